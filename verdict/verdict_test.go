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
