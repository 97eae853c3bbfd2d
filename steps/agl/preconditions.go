package agl

// The preconditions AGL scenarios establish without witnessing them. Each is
// declared in scenarios/agl.toml with the requirements whose own scenarios
// witness exactly that behaviour: when the host breaks one of these set-ups,
// a scenario that does not witness one of those requirements reads "blocked:
// precondition failed" naming them, and their own scenarios fail.
const (
	preContracts         = "agl.precondition.contracts-registered"
	preAgent             = "agl.precondition.agent-registered"
	preGrant             = "agl.precondition.grant-issued"
	preScopedGrant       = "agl.precondition.scoped-grant-issued"
	preDraft             = "agl.precondition.draft-created"
	preDraftEdited       = "agl.precondition.draft-edited"
	preSendProposed      = "agl.precondition.send-proposed"
	preTransferProposed  = "agl.precondition.transfer-proposed"
	preApprovalRequested = "agl.precondition.approval-requested"
	preApproved          = "agl.precondition.approval-granted"
	preOperationNamed    = "agl.precondition.operation-named"
	preDispatched        = "agl.precondition.send-dispatched"
	preUnknown           = "agl.precondition.send-unknown"
	prePermitRevoked     = "agl.precondition.permit-revoked"
	preGrantRevoked      = "agl.precondition.grant-revoked"
	preDelegated         = "agl.precondition.narrower-delegation"
	preConditions        = "agl.precondition.dispatch-conditions"
	preBudget            = "agl.precondition.budget-opened"
)

// preconditions lists them all, for the test that holds them to the registry.
var preconditions = []string{
	preContracts, preAgent, preGrant, preScopedGrant, preDraft, preDraftEdited, preSendProposed,
	preTransferProposed, preApprovalRequested, preApproved, preOperationNamed, preDispatched,
	preUnknown, prePermitRevoked, preGrantRevoked, preDelegated, preConditions, preBudget,
}
