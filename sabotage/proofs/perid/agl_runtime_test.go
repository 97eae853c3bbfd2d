package perid_test

import "testing"

// TestEachAGLRuntimeIdFailsUnderEveryRuleForIt: each AGL runtime
// requirement of issue 24 passes on the reference host and fails against
// every rule that breaks it, each of its scenarios under some rule
// (proveEachId). -run 'TestEachAGLRuntimeIdFailsUnderEveryRuleForIt/<id>'
// proves one alone.
func TestEachAGLRuntimeIdFailsUnderEveryRuleForIt(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the issue's scenarios against sabotaged hosts")
	}
	proveEachId(t, []string{"agl.dispatch.admission-wait-expires", "agl.durability.reconcile-after-revocation", "agl.audit.retry-attempts", "agl.dispatch.admission-rechecks-authority", "agl.recovery.authority-rechecked", "agl.recovery.resumes-deduplicated-send", "agl.recovery.deployment-changed-at-restart"})
}
