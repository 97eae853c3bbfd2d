package perid_test

import "testing"

// TestEachIdTheFairnessAuditTouchedStillFails: the ids whose scenarios or
// rules the fairness audit changed (issue 20: a scenario split into one per
// id, checks moved into preconditions, rules narrowed to their own id) pass
// on the reference host, fail under every rule for them, and every one of
// their scenarios (each outline row) fails under some rule (proveEachId).
func TestEachIdTheFairnessAuditTouchedStillFails(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the audited ids' scenarios against sabotaged hosts")
	}
	proveEachId(t, []string{
		"contractrefine.preflight.post.preflight-id-uuidv4", "contractrefine.preflight.post.audit-id-uuidv4",
		"contractrefine.preflight.post.session-metadata-missing-deny", "contractrefine.preflight.post.reason-shape",
		"agtp.rcns.gate.attempt-id-on-464", "agtp.inventory.inspect-rcns-attempt",
		"openwop.requirement.0242.requested.outbound", "openwop.requirement.0242.requested.outbound.mcp",
		"agl.contract.interface-compatibility", "agl.contract.interface-binding-changes",
		"contractrefine.tool.advisory-continues-to-policy", "contractrefine.preflight.mode.empty-defaults-advisory",
		"contractrefine.preflight.mode.well-formed-preserved", "contractrefine.preflight.wal.audit-join-chronological",
	})
}
