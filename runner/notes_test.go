package runner

import (
	"testing"

	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

// What a scenario notes (World.Note) becomes its detail when it passes, and
// is kept beside the failure when it does not.
func TestNotesReachTheScenarioDetail(t *testing.T) {
	w := steps.NewWorld(nil, steps.Scenario{})
	w.Observe(&steps.Response{Status: 200})
	if err := w.Assert(true, "never shown"); err != nil {
		t.Fatal(err)
	}
	w.Note("%d rounds of %d claimers", 24, 8)
	r := classify(w, nil)
	if r.Result != verdict.ExecutedPass || r.Detail != "24 rounds of 8 claimers" {
		t.Fatalf("classified %+v", r)
	}
	f := w.Settle(steps.Fail("2 of 8 completed"))
	r = classify(w, f)
	if r.Result != verdict.ExecutedFail || r.Detail != "2 of 8 completed (noted: 24 rounds of 8 claimers)" {
		t.Fatalf("classified %+v", r)
	}
}
