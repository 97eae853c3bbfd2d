package perid_test

import "testing"

// TestEachAGLDelegationIdFailsUnderEveryRuleForIt: each bounded-delegation
// requirement (issue 23 part 3) passes on the reference host and fails
// against every rule that breaks it, each of its scenarios under some rule
// (proveEachId).
func TestEachAGLDelegationIdFailsUnderEveryRuleForIt(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the delegation scenarios against sabotaged hosts")
	}
	proveEachId(t, []string{"agl.delegation.attenuates", "agl.delegation.redelegation-narrows", "agl.delegation.same-dispatcher", "agl.delegation.budget-bounded-by-delegator"})
}
