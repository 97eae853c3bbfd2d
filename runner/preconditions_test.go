package runner

import (
	"strings"
	"testing"

	"github.com/parley-conformance/parley/verdict"
)

// A setup that fails in one scenario while the requirement it relies on
// passed where it is witnessed is that scenario's failure, not a block; a
// setup whose requirement also failed on its own stays a block pointing at
// the root cause.
func TestAPreconditionThatPassedElsewhereIsNoExcuse(t *testing.T) {
	results := []ScenarioResult{
		{ReqIDs: []string{"x.setup.ok"}, Result: verdict.ExecutedPass, Assertions: 1},
		{ReqIDs: []string{"x.setup.broken"}, Result: verdict.ExecutedFail, Detail: "broken on its own"},
		{ReqIDs: []string{"x.rule.a"}, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"x.setup.ok"}, Detail: "precondition not met: the host refused"},
		{ReqIDs: []string{"x.rule.b"}, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"x.setup.broken"}, Detail: "precondition not met"},
		{ReqIDs: []string{"x.rule.c"}, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"x.setup.ok", "x.setup.broken"}, Detail: "precondition not met"},
		{ReqIDs: []string{"x.rule.d"}, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"x.setup.unrun"}, Detail: "precondition not met"},
	}
	got := map[string]ScenarioResult{}
	for _, r := range resolvePreconditions(results) {
		got[r.ReqIDs[0]] = r
	}
	if a := got["x.rule.a"]; a.Result != verdict.ExecutedFail || a.Cause != "" || a.ReliesOn != nil || !strings.Contains(a.Detail, "x.setup.ok passed") || !strings.Contains(a.Detail, "the host refused") {
		t.Errorf("a setup whose requirement passed elsewhere: %+v, want the host's failure naming it", a)
	}
	for _, id := range []string{"x.rule.b", "x.rule.c", "x.rule.d"} {
		if r := got[id]; r.Result != verdict.Blocked || r.Cause != verdict.CausePrecondition {
			t.Errorf("%s: %+v, want blocked on its precondition (its requirement failed or did not run)", id, r)
		}
	}
}
