package verdict

import (
	"reflect"
	"strings"
	"testing"
)

func TestARowTakesTheWorstOfItsScenariosAndItsDetail(t *testing.T) {
	ex := &Exchange{Method: "GET", Target: "/x", Status: 500}
	r := Row{ID: "a.b.c", Scenarios: []ScenarioResult{
		{URI: "f.feature", Line: 3, Name: "one", Result: ExecutedPass, Assertions: 2},
		{URI: "f.feature", Line: 9, Name: "two", Result: Blocked, Cause: CausePrecondition, ReliesOn: []string{"a.b.root"}, Detail: "setup", Exchange: ex, Assertions: 1},
		{URI: "f.feature", Line: 12, Name: "three", Result: Inapplicable},
	}}
	r.Fold()
	if r.Result != Blocked || r.Assertions != 3 || r.Cause != CausePrecondition || !reflect.DeepEqual(r.ReliesOn, []string{"a.b.root"}) || r.Exchange != ex {
		t.Fatalf("folded %+v", r)
	}
	if !strings.HasPrefix(r.Detail, "f.feature:9 two: ") {
		t.Fatalf("detail %q does not name the worst scenario", r.Detail)
	}
	r.Scenarios = append(r.Scenarios, ScenarioResult{URI: "f.feature", Line: 20, Result: ExecutedFail, Detail: "wrong"})
	r.Fold()
	if r.Result != ExecutedFail || r.Cause != "" || r.ReliesOn != nil || r.Exchange != nil {
		t.Fatalf("a failure must win and carry no cause: %+v", r)
	}
}

func TestRootCausesLeadToTheFailureThatBlockedOthers(t *testing.T) {
	rows := []Row{
		{ID: "root.one", Result: ExecutedFail},
		{ID: "dep.a", Result: Blocked, Cause: CausePrecondition, ReliesOn: []string{"root.one"}},
		{ID: "dep.b", Result: Blocked, Cause: CausePrecondition, ReliesOn: []string{"root.one", "root.two"}},
		{ID: "dep.c", Result: Blocked, Cause: CauseSeamAbsent},
		{ID: "root.two", Result: ExecutedPass},
	}
	roots := RootCauses(rows)
	if len(roots) != 2 || roots[0].ID != "root.one" || !reflect.DeepEqual(roots[0].Blocks, []string{"dep.a", "dep.b"}) || roots[1].ID != "root.two" {
		t.Fatalf("roots %+v", roots)
	}
	if s := roots[0].String(); s != "root.one (executed-fail): 1 failure blocks 2 requirements" {
		t.Fatalf("%q", s)
	}
}

func TestVerdictOrderAndCauses(t *testing.T) {
	if Worst(ExecutedPass, Blocked) != Blocked || Worst(ExecutedFail, Blocked) != ExecutedFail || Worst(Skipped, Inapplicable) != Skipped || Worst(Inapplicable, ExecutedPass) != ExecutedPass {
		t.Fatal("verdict order")
	}
	for _, c := range Causes {
		if !IsCause(c) {
			t.Fatalf("%s", c)
		}
	}
	if IsCause("host-said-so") {
		t.Fatal("an open cause")
	}
}

// Rows that failed the same way on hosts of different configurations are
// one group; another cause is another group.
func TestGroupByGist(t *testing.T) {
	start := func(cfg string) string {
		return "the host did not start with this configuration: it exited (status 1) before printing its ready line; its last log lines:\n  boom\n(configuration sha256:" + cfg + ")"
	}
	row := func(id, result, cause, detail string) Row {
		r := Row{ID: id, Scenarios: []ScenarioResult{{URI: "a.feature", Line: 3, Name: id, Result: result, Cause: cause, Detail: detail}}}
		r.Fold()
		return r
	}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	rows := []Row{
		row("x.one", ExecutedFail, "", start(a)),
		row("x.two", ExecutedFail, "", start(b)),
		row("x.three", Blocked, CauseDeclined, "the host declined configuration sha256:"+a+": no TLS"),
		row("x.four", Blocked, CauseDeclined, "the host declined configuration sha256:"+b+": no TLS"),
		row("x.five", ExecutedFail, "", "POST /x answered 200 OK where 201 Created was expected"),
	}
	g := GroupByGist(rows)
	if len(g) != 3 || len(g[0].Rows) != 2 || len(g[1].Rows) != 2 || len(g[2].Rows) != 1 {
		t.Fatalf("groups: %+v", g)
	}
	if strings.Contains(g[0].Gist, "configuration sha256") || !strings.HasSuffix(g[0].Gist, "boom") {
		t.Errorf("gist %q", g[0].Gist)
	}
}

// A passing row carries what its scenarios noted (a contention check's
// rounds and answers), each under its scenario; scenarios that noted
// nothing add nothing.
func TestAPassingRowCarriesItsScenariosNotes(t *testing.T) {
	r := Row{ID: "a.b.c", Scenarios: []ScenarioResult{
		{URI: "f.feature", Line: 3, Name: "one", Result: ExecutedPass, Assertions: 2, Detail: "24 rounds"},
		{URI: "f.feature", Line: 9, Name: "two", Result: ExecutedPass, Assertions: 1},
		{URI: "f.feature", Line: 12, Name: "three", Result: ExecutedPass, Assertions: 1, Detail: "1 round"},
	}}
	r.Fold()
	if r.Result != ExecutedPass || r.Detail != "f.feature:3 one: 24 rounds\nf.feature:12 three: 1 round" {
		t.Fatalf("folded %+v", r)
	}
	r.Scenarios = r.Scenarios[1:2]
	r.Fold()
	if r.Detail != "" {
		t.Fatalf("a pass without notes has detail %q", r.Detail)
	}
}
