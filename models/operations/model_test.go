package operations

import "testing"

func approved(m *Model) *Action {
	a := m.Propose()
	m.RequestApproval(a)
	m.Decide(a, true)
	return a
}

func TestAPermitDispatchesOnceAndTheBudgetIsNeverRefunded(t *testing.T) {
	m := New(2)
	a, b, c := approved(m), approved(m), approved(m)
	m.Arm(FaultReject)
	if d, state := m.DispatchAllowed(a); d != nil || state != FailedNoEffect {
		t.Fatalf("a dispatch meeting a rejecting destination allows %v %q, want FailedNoEffect", d, state)
	}
	m.Dispatch(a)
	if m.Effects != 0 || m.Used != 1 {
		t.Fatalf("after a send with no effect: %d effects, %d used; want 0 and 1 (charged, not refunded)", m.Effects, m.Used)
	}
	d, _ := m.DispatchAllowed(a)
	if !Contains(d, PermitConsumed) || Contains(d, OK) {
		t.Errorf("a second dispatch of one permit allows %v, want permit_consumed", d)
	}
	if _, state := m.DispatchAllowed(b); state != Completed {
		t.Errorf("b's dispatch allows %q, want Completed", state)
	}
	m.Dispatch(b)
	if d, _ := m.DispatchAllowed(c); !Contains(d, BudgetExhausted) || len(d) != 1 {
		t.Errorf("a third claim on a budget of 2 allows %v, want budget_exhausted only", d)
	}
	if m.Effects != 1 {
		t.Errorf("effects %d, want 1", m.Effects)
	}
}

func TestOnlyAnUnknownOperationReconcilesAndItsPermitStaysSpent(t *testing.T) {
	m := New(3)
	a := approved(m)
	if r, _ := m.ReconcileAllowed(a, Lookup); !Contains(r, NotAwaiting) {
		t.Errorf("a Pending operation reconciles: %v", r)
	}
	m.Arm(FaultFail)
	m.Dispatch(a)
	if a.Op != Unknown || m.Effects != 1 {
		t.Fatalf("a send whose destination failed after the effect is %s with %d effects, want Unknown with 1", a.Op, m.Effects)
	}
	if d, _ := m.DispatchAllowed(a); !Contains(d, Uncertain) || !Contains(d, PermitConsumed) {
		t.Errorf("an Unknown operation's permit presented again allows %v, want uncertain_completion or permit_consumed", d)
	}
	m.Reconcile(a, HumanNoEffect)
	if a.Op != ReconciledNoEffect {
		t.Fatalf("reconciled as no effect: %s", a.Op)
	}
	if d, _ := m.DispatchAllowed(a); len(d) == 0 || Contains(d, Uncertain) {
		t.Errorf("a reconciled operation's permit allows %v, want a consumed-permit refusal", d)
	}
	if r, _ := m.ReconcileAllowed(a, Lookup); !Contains(r, NotAwaiting) {
		t.Errorf("a reconciled operation reconciles again: %v", r)
	}
}

func TestRevocationsAndDecisions(t *testing.T) {
	m := New(3)
	a := m.Propose()
	m.RequestApproval(a)
	if got := m.DecideAllowed(a, false); !Contains(got, OK) {
		t.Errorf("a denial allows %v", got)
	}
	m.Decide(a, false)
	if got := m.DecideAllowed(a, true); !Contains(got, NotPending) {
		t.Errorf("a decided request granted again allows %v", got)
	}
	b := approved(m)
	m.RevokePermit(b)
	if d, _ := m.DispatchAllowed(b); len(d) != 1 || d[0] != PermitRevoked {
		t.Errorf("a revoked permit allows %v", d)
	}
	if (m.ReadPermit(b) != PermitRead{Revoked: true}) {
		t.Errorf("a revoked permit reads %+v", m.ReadPermit(b))
	}
	c := approved(m)
	m.RevokeGrant()
	if d, _ := m.DispatchAllowed(c); len(d) != 1 || d[0] != GrantRevoked {
		t.Errorf("a dispatch under a revoked grant allows %v", d)
	}
	if got := m.ProposeAllowed(); !Contains(got, GrantRevoked) || !Contains(got, Answer{201, ""}) {
		t.Errorf("a proposal under a revoked grant allows %v", got)
	}
	if got := m.ChangedAllowed(c, b); Contains(got, OK) || !Contains(got, ProposalDiffers) {
		t.Errorf("a changed action allows %v", got)
	}
}

func TestAnEditVoidsThePermitAndThePendingRequest(t *testing.T) {
	m := New(3)
	a, b := approved(m), m.Propose()
	m.RequestApproval(b)
	m.Edit(a)
	m.Edit(b)
	if a.Revision != 2 {
		t.Errorf("an edited draft is at revision %d, want 2", a.Revision)
	}
	if d, _ := m.DispatchAllowed(a); len(d) != 1 || d[0] != StaleRevision {
		t.Errorf("the permit of an edited draft allows %v, want stale_revision", d)
	}
	if got := m.DecideAllowed(b, true); Contains(got, Answer{201, ""}) {
		t.Errorf("a request an edit invalidated may still be granted: %v", got)
	}
	c := approved(m)
	m.Dispatch(c)
	if got := m.EditAllowed(c); len(got) != 1 || got[0] != InvalidState {
		t.Errorf("an edit of a dispatched draft allows %v", got)
	}
}
