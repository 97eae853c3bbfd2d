package decisions

import (
	"slices"
	"testing"
)

func TestTheRepairBudgetIsPerSessionAndPlanHash(t *testing.T) {
	m := New(2)
	a, b := Request{Variant: VRepair}, Request{Variant: VRepair, Hash: 1}
	for i, id := range []string{"1", "2"} {
		if err := m.Post(a, id, Repair, "contract: provenance_missing", nil); err != nil {
			t.Fatalf("repair %d: %v", i+1, err)
		}
	}
	if got := m.Allowed(a); !slices.Equal(got, []string{Pass, Deny}) {
		t.Errorf("a spent budget allows %v, want anything but repair_required", got)
	}
	if err := m.Post(a, "3", Repair, "", nil); err == nil {
		t.Error("a third repair_required on a budget of 2 was allowed")
	}
	if got := m.Allowed(b); !slices.Equal(got, []string{Repair}) {
		t.Errorf("another plan hash allows %v, want its own budget", got)
	}
	if err := m.Post(Request{Variant: VPass}, "1", Pass, "", nil); err == nil {
		t.Error("a preflight_id issued twice was allowed")
	}
	if err := m.Post(Request{Variant: VNoHash}, "4", Deny, "contract: other", nil); err == nil {
		t.Error("a missing plan hash denied for another reason was allowed")
	}
}

func TestOnlyAPassBindsItsKind(t *testing.T) {
	m := New(2)
	_ = m.Post(Request{Variant: VPass}, "p", Pass, "", nil)
	_ = m.Post(Request{Variant: VDeliver}, "d", Pass, "", nil)
	_ = m.Post(Request{Variant: VRepair}, "r", Repair, "", nil)
	for id, want := range map[string]bool{"p": true, "d": false, "r": false, "x": false} {
		if got := m.Runs(id, "tool.echo"); got != want {
			t.Errorf("tool.echo bound to %s runs %v, want %v", id, got, want)
		}
	}
}
