package certify

import (
	"testing"

	"github.com/parley-conformance/parley/verdict"
)

func TestEachVerdictReadsAsASubtest(t *testing.T) {
	for _, c := range []struct {
		row   verdict.Row
		allow bool
		want  subtestKind
	}{
		{verdict.Row{Result: verdict.ExecutedPass}, false, passSubtest},
		{verdict.Row{Result: verdict.ExecutedFail, Detail: "x"}, true, failSubtest},
		{verdict.Row{Result: verdict.Blocked, Cause: verdict.CauseDeclined}, false, failSubtest},
		{verdict.Row{Result: verdict.Blocked, Cause: verdict.CauseDeclined}, true, skipSubtest},
		{verdict.Row{Result: verdict.Blocked, Cause: verdict.CauseSuiteFault}, true, failSubtest},
		{verdict.Row{Result: verdict.Skipped}, false, skipSubtest},
		{verdict.Row{Result: verdict.Inapplicable}, false, skipSubtest},
	} {
		if got := subtest(c.row, c.allow); got.kind != c.want {
			t.Errorf("%s (%s), allowBlocked %v: subtest %d, want %d", c.row.Result, c.row.Cause, c.allow, got.kind, c.want)
		}
	}
}

func TestRunPatternsSplitLikeTheTestingPackage(t *testing.T) {
	got := splitRun(`TestX/agtp\.rcns\.(gate|sweep)/deeper`)
	if len(got) != 3 || got[1] != `agtp\.rcns\.(gate|sweep)` {
		t.Fatalf("got %q", got)
	}
}
