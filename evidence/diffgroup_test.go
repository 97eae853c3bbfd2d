package evidence_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/internal/textwrap"
	"github.com/parley-conformance/parley/verdict"
)

// A pass that is now blocked is listed once (as regressed, not again as
// newly blocked), and the rows blocked by one root are one group.
func TestDiffListsEachRowOnceByRootCause(t *testing.T) {
	subj := evidence.Subject{Name: "acme", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}
	ids := []string{"x.root", "x.a", "x.b", "x.c", "x.d"}
	var oldRows, newRows []verdict.Row
	for _, id := range ids {
		oldRows = append(oldRows, verdict.Row{ID: id, Result: verdict.ExecutedPass, Assertions: 1})
		n := verdict.Row{ID: id, Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"x.root"}, Detail: "precondition not met"}
		switch id {
		case "x.root":
			n = verdict.Row{ID: id, Result: verdict.ExecutedFail, Detail: "POST /x answered 200 OK where 201 Created was expected"}
		case "x.d":
			n = verdict.Row{ID: id, Result: verdict.Blocked, Cause: verdict.CauseDeclined, Detail: "declined"}
		}
		newRows = append(newRows, n)
	}
	d, err := evidence.Compare(crafted(subj, oldRows...), crafted(subj, newRows...), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Regressed) != 5 || len(d.NewlyBlocked) != 0 {
		t.Fatalf("regressed %d, newly blocked %d; want 5 and 0", len(d.Regressed), len(d.NewlyBlocked))
	}
	var b bytes.Buffer
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, id := range ids {
		if n := strings.Count(text, id+" "); id != "x.root" && n != 1 {
			t.Errorf("%s is listed %d times:\n%s", id, n, text)
		}
	}
	if !strings.Contains(text, "3 now blocked (precondition-failed), one cause:\n      a setup relying on x.root failed") {
		t.Errorf("the blocked rows are not grouped under their root:\n%s", text)
	}
	var page bytes.Buffer
	if err := evidence.RenderDiffHTML(&page, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "3 now blocked (precondition-failed), one cause") {
		t.Error("the HTML diff does not group by root cause")
	}
}

// A cause is printed whole, wrapped: the host's log line under "did not
// start" and a long reason reach the console, as in the run's summary.
func TestDiffPrintsEachCauseWhole(t *testing.T) {
	subj := evidence.Subject{Name: "acme", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}
	reason := strings.TrimSpace(strings.Repeat("the host cannot serve this fixture member for a reason ", 4))
	var oldRows, newRows []verdict.Row
	for _, id := range []string{"x.a", "x.b", "x.c"} {
		oldRows = append(oldRows, verdict.Row{ID: id, Result: verdict.ExecutedPass, Assertions: 1})
		n := verdict.Row{ID: id, Result: verdict.ExecutedFail, Detail: "the host did not start with this configuration: it exited; its last log lines:\n  boom-in-the-log"}
		if id == "x.c" {
			n = verdict.Row{ID: id, Result: verdict.Blocked, Cause: verdict.CauseDeclined, Detail: reason}
		}
		newRows = append(newRows, n)
	}
	d, err := evidence.Compare(crafted(subj, oldRows...), crafted(subj, newRows...), false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	words := textwrap.Unwrap(text)
	for _, want := range []string{"boom-in-the-log", reason} {
		if !strings.Contains(words, want) {
			t.Errorf("the diff does not carry %q whole:\n%s", want, text)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "      ") && len([]rune(l)) > 100 {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}
}
