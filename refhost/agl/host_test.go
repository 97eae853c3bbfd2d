package agl

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/fakemail"
)

const sendOp = "mail.send_email"
const transferOp = "ledger.transfer"

func registerAll(t *testing.T, c *client) {
	r := c.do("POST", "/agl/v1/contracts", testKeys.Operator, emailContract(c, sendOp))
	require.Contains(t, []int{200, 201}, r.Status, string(r.Raw))
	r = c.do("POST", "/agl/v1/contracts", testKeys.Operator, transferContract(c, transferOp))
	require.Contains(t, []int{200, 201}, r.Status, string(r.Raw))
}

func TestEmailHappyPathAndAudit(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	resID, handle := s.draft(t)
	prop, permit, permitID := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	assert.True(t, strings.HasPrefix(prop.str("digest"), "sha256:"))
	assert.Contains(t, prop.str("canonical_encoding"), `["agl-canon/1",`)
	// Defaults are materialized in what the approver sees.
	assert.Contains(t, string(prop.Raw), `"priority":"normal"`)
	r := c.do("GET", "/agl/v1/resources/"+resID, "", nil)
	assert.Equal(t, "Authorized", r.str("state"))

	d := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	require.Equal(t, 200, d.Status, string(d.Raw))
	assert.Equal(t, "Completed", d.str("state"))
	assert.Equal(t, permitID, d.str("permit_id"))
	assert.Equal(t, 1, th.email.CountFor(d.str("operation_id")))
	r = c.do("GET", "/agl/v1/resources/"+resID, "", nil)
	assert.Equal(t, "Sent", r.str("state"))

	// The same permit again: claimed, not a second effect.
	d2 := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, 409, d2.Status)
	assert.Equal(t, "permit_consumed", d2.code())
	assert.Equal(t, false, d2.Body["error"].(map[string]any)["retryable"])
	assert.Equal(t, 1, th.email.Count())

	a := c.do("GET", "/agl/v1/audit?execution_id="+s.exec, testKeys.Operator, nil)
	require.Equal(t, 200, a.Status)
	events := []string{}
	for _, rec := range a.Body["records"].([]any) {
		events = append(events, rec.(map[string]any)["event"].(string))
	}
	assert.Equal(t, []string{"proposed", "approval_requested", "approval_decided", "claimed", "outcome", "dispatch_denied"}, events)
	// No bearer secret anywhere in the audit trail.
	all := c.do("GET", "/agl/v1/audit", testKeys.Operator, nil)
	for _, secret := range []string{permit, s.grantToken, testKeys.Resolver, testKeys.Authority, hashToken(permit), hashToken(s.grantToken)} {
		assert.NotContains(t, string(all.Raw), secret)
	}
	assert.Contains(t, string(a.Raw), permitID)
}

func TestForgedApprovalsRefused(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	prop := c.do("POST", "/agl/v1/proposals", "", s.action(sendOp, map[string]any{"draft": handle}))
	require.Equal(t, 201, prop.Status, string(prop.Raw))
	ar := c.do("POST", "/agl/v1/proposals/"+prop.str("proposal_id")+"/approval-requests", "", map[string]any{"ttl_seconds": 60})
	require.Equal(t, 201, ar.Status, string(ar.Raw))
	dec := map[string]any{"approver": "mallory", "role": "operator", "decision": "granted", "digest": prop.str("digest")}
	r := c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", "", dec)
	assert.Equal(t, 401, r.Status)
	assert.Equal(t, "unauthenticated_decision", r.code())
	r = c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", s.grantToken, dec)
	assert.Equal(t, 403, r.Status)
	// A model's "granted" inside the dispatch request is not a permit.
	body := s.action(sendOp, map[string]any{"draft": handle})
	body["decision"] = map[string]any{"status": "Granted", "permit": "anything"}
	r = c.do("POST", "/agl/v1/dispatch", "", body)
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "unauthenticated_decision", r.code())
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, "apt_forged")
	assert.Equal(t, "invalid_protocol_state", r.code(), "still Proposed, not Authorized: step 4 refuses first")
	// Once genuinely authorized, a permit token nobody minted is still refused.
	dec["approver"] = "carol"
	r = c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, dec)
	require.Equal(t, 201, r.Status, string(r.Raw))
	for _, tok := range []string{"apt_forged", "", r.str("permit", "permit_id")} {
		r = s.dispatch(sendOp, map[string]any{"draft": handle}, tok)
		assert.Equal(t, 403, r.Status)
		assert.Equal(t, "unbound_approval", r.code(), "token %q", tok)
	}
	assert.Equal(t, 0, th.email.Count())
}

func TestProposalMismatchAndDefaults(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{transferOp})
	args := map[string]any{"account": s.account(), "recipient": "IBAN-1", "amount": 100}
	_, permit, _ := s.approve(t, transferOp, args, "treasurer")
	for _, changed := range []map[string]any{
		{"account": s.account(), "recipient": "IBAN-2", "amount": 100},
		{"account": s.account(), "recipient": "IBAN-1", "amount": 1000},
		{"account": s.account(), "recipient": "IBAN-1", "amount": 100, "currency": "USD"},
	} {
		r := s.dispatch(transferOp, changed, permit)
		assert.Equal(t, 403, r.Status, string(r.Raw))
		assert.Equal(t, "proposal_mismatch", r.code())
		assert.Equal(t, "proposal_mismatch", r.str("error", "category"))
	}
	assert.Equal(t, 0, th.hook.Count())
	// 1e2 is the same number as 100 and the default currency is the same
	// value whether written or not: the exact action, so it dispatches.
	r := s.dispatch(transferOp, json.RawMessage(`{"account":"`+s.account()+`","recipient":"IBAN-1","amount":1e2,"currency":"EUR"}`), permit)
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, 1, th.hook.Count())
}

func TestDeniesAtDispatch(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, permitID := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")

	// A tool the host registered but the agent was not given.
	r := s.dispatch(transferOp, map[string]any{"account": s.account(), "recipient": "x", "amount": 1}, "")
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "tool_not_in_toolset", r.code())

	// Protected write inside a race.
	body := s.action(sendOp, map[string]any{"draft": handle})
	body["permit_token"], body["context"] = permit, map[string]any{"race": true}
	r = c.do("POST", "/agl/v1/dispatch", "", body)
	assert.Equal(t, "unsupported_protected_race", r.code())

	// Schema error and forged handle.
	r = s.dispatch(sendOp, map[string]any{"draft": handle, "bcc": "eve@example.com"}, permit)
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "schema_error", r.code())
	r = s.dispatch(sendOp, map[string]any{"draft": "hdl_forged"}, permit)
	assert.Equal(t, "unknown_handle", r.code())

	// Revocation stops a new dispatch.
	r = c.do("POST", "/agl/v1/permits/"+permitID+"/revoke", testKeys.Resolver, nil)
	require.Equal(t, 200, r.Status, string(r.Raw))
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "permit_revoked", r.code())
	assert.Equal(t, 5, int(mustInt(r.Body["error"].(map[string]any)["step"])))
	assert.Equal(t, 0, th.email.Count())
}

func mustInt(v any) int64 {
	n, _ := v.(interface{ Int64() (int64, error) }).Int64()
	return n
}

func TestExpiryAndGrantRevocation(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	th.clock.advance(11 * time.Minute) // past the 600 s approval
	r := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, "permit_expired", r.code())

	s2 := newScenario(t, c, []string{sendOp})
	_, h2 := s2.draft(t)
	_, p2, _ := s2.approve(t, sendOp, map[string]any{"draft": h2}, "operator")
	require.Equal(t, 200, c.do("POST", "/agl/v1/grants/"+s2.grantID+"/revoke", testKeys.Authority, nil).Status)
	r = s2.dispatch(sendOp, map[string]any{"draft": h2}, p2)
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "grant_revoked", r.code())
	assert.Equal(t, 0, th.email.Count())
}

func TestEditInvalidatesApproval(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	id, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	r := c.do("PUT", "/agl/v1/resources/"+id, "", map[string]any{"owner": s.principal, "expected_revision": 1,
		"payload": map[string]any{"from": s.mailbox, "to": []string{"eve@example.com"}, "subject": "Quarterly numbers", "body": "See attached."}})
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "Draft", r.str("state"))
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "stale_revision", r.code())
	assert.Equal(t, 0, th.email.Count())
}

func TestDelegationOnlyNarrows(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	wide := map[string]any{"subject": "bot", "operations": []string{sendOp, transferOp}, "ttl_seconds": 60,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}}}
	r := c.do("POST", "/agl/v1/grants/"+s.grantID+"/delegations", s.grantToken, wide)
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "delegation_widens", r.code())
	longer := map[string]any{"subject": "bot", "operations": []string{sendOp}, "ttl_seconds": 7200,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}}}
	assert.Equal(t, "delegation_widens", c.do("POST", "/agl/v1/grants/"+s.grantID+"/delegations", s.grantToken, longer).code())
	ok := map[string]any{"subject": "bot", "operations": []string{sendOp}, "ttl_seconds": 60,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}}}
	r = c.do("POST", "/agl/v1/grants/"+s.grantID+"/delegations", s.grantToken, ok)
	require.Equal(t, 201, r.Status, string(r.Raw))
	child := r.str("grant_id")
	require.Equal(t, 200, c.do("POST", "/agl/v1/grants/"+s.grantID+"/revoke", testKeys.Authority, nil).Status)
	g := c.do("GET", "/agl/v1/grants/"+child, testKeys.Authority, nil)
	assert.Equal(t, s.grantID, g.str("parent_grant_id"))
	r = c.do("POST", "/agl/v1/grants/"+child+"/delegations", r.str("grant_token"), ok)
	assert.Equal(t, "grant_revoked", r.code(), "revoking a parent revokes its delegations")
}

func TestUncertainWriteWaitsForReconciliation(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	id, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	th.email.Inject(fakemail.Fault{Mode: fakemail.FaultFailAfterEffect})
	r := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "Unknown", r.str("state"))
	assert.Equal(t, true, r.Body["awaiting_reconciliation"])
	op := r.str("operation_id")
	assert.Equal(t, 1, th.email.Count(), "no blind retry of a non-idempotent write")
	assert.Equal(t, "Unknown", c.do("GET", "/agl/v1/resources/"+id, "", nil).str("state"))
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "uncertain_completion", r.code())
	r = c.do("POST", "/agl/v1/operations/"+op+"/reconcile", "", map[string]any{"method": "receiver_lookup"})
	assert.Equal(t, 401, r.Status)
	r = c.do("POST", "/agl/v1/operations/"+op+"/reconcile", testKeys.Resolver, map[string]any{"method": "receiver_lookup"})
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "ReconciledCompleted", r.str("state"))
	assert.Equal(t, "Sent", c.do("GET", "/agl/v1/resources/"+id, "", nil).str("state"))
	assert.Equal(t, 1, th.email.Count())
}

func TestIdempotentDestinationRetries(t *testing.T) {
	th := newTestHost(t, func(cfg *Config) { cfg.Email.HonoursIdempotencyKey = true })
	th.email.Idempotent = true
	c := th.c
	ct := emailContract(c, sendOp)
	ct["idempotency_contract"] = map[string]any{"kind": "destination_key"}
	ct["scheduling_contract"] = map[string]any{"max_attempts": 3}
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct).Status)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	th.email.Inject(fakemail.Fault{Mode: fakemail.FaultGarbage})
	r := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "Completed", r.str("state"))
	assert.Equal(t, "2", string(r.Body["attempt"].(interface{ String() string }).String()))
	assert.Equal(t, 1, th.email.Count(), "the destination deduplicated the retry")
}

func TestFaultBoundaries(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")

	// Claim boundary: nothing persisted, nothing sent, permit still usable.
	require.Equal(t, 201, c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": "claim", "action": "fail"}).Status)
	r := s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, 500, r.Status)
	assert.Equal(t, "persistence_failure", r.code())
	assert.Equal(t, 0, th.email.Count())

	// Completion boundary: the effect happened, the record could not be
	// written, so the outcome is Unknown rather than a retryable failure.
	require.Equal(t, 201, c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": "completion", "action": "fail"}).Status)
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "Unknown", r.str("state"))
	assert.Equal(t, 1, th.email.Count())

	// External-call boundary: connection lost after sending.
	s2 := newScenario(t, c, []string{sendOp})
	_, h2 := s2.draft(t)
	_, p2, _ := s2.approve(t, sendOp, map[string]any{"draft": h2}, "operator")
	require.Equal(t, 201, c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": "external_call", "action": "fail"}).Status)
	r = s2.dispatch(sendOp, map[string]any{"draft": h2}, p2)
	assert.Equal(t, "Unknown", r.str("state"))
	r = c.do("POST", "/agl/v1/operations/"+r.str("operation_id")+"/reconcile", testKeys.Resolver,
		map[string]any{"method": "human", "resolution": "completed", "actor": "dave"})
	assert.Equal(t, "ReconciledCompleted", r.str("state"))
}

func TestContractRegistration(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	ct := emailContract(c, sendOp)
	assert.Equal(t, 401, c.do("POST", "/agl/v1/contracts", "", ct).Status)
	r := c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct)
	require.Equal(t, 201, r.Status, string(r.Raw))
	fp := r.str("contract_fingerprint")
	r = c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct)
	assert.Equal(t, 200, r.Status)
	assert.Equal(t, fp, r.str("contract_fingerprint"))
	ct["possible_effects"] = []string{"external_write", "email_send", "financial_write"}
	r = c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct)
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "contract_conflict", r.code())
	bad := emailContract(c, "mail.other")
	bad["implementation_fingerprint"] = "sha256:00"
	assert.Equal(t, "implementation_fingerprint_mismatch", c.do("POST", "/agl/v1/contracts", testKeys.Operator, bad).code())
	fin := transferContract(c, "ledger.x")
	fin["possible_effects"] = []string{"financial_write"}
	assert.Equal(t, 422, c.do("POST", "/agl/v1/contracts", testKeys.Operator, fin).Status)

	// A permit issued under version 1 stops working once version 2 replaces it.
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	v2 := emailContract(c, sendOp)
	v2["contract_version"] = "2"
	v2["possible_effects"] = []string{"external_write", "email_send", "financial_write"}
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, v2).Status)
	r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
	assert.Equal(t, "contract_fingerprint_mismatch", r.code())
	assert.Equal(t, 0, th.email.Count())
}

func TestRequestLimits(t *testing.T) {
	th := newTestHost(t, func(cfg *Config) { cfg.MaxBodyBytes = 512 })
	r := th.c.do("POST", "/agl/v1/proposals", "", `{"execution_id":"`+strings.Repeat("x", 1024)+`"}`)
	assert.Equal(t, 413, r.Status)
	assert.Equal(t, "body_too_large", r.code())
	r = th.c.do("POST", "/agl/v1/proposals", "", `{"execution_id":`)
	assert.Equal(t, 400, r.Status)
	r = th.c.do("GET", "/agl/v1/nope", "", nil)
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "not_found", r.code())
}

func TestDenialDeploymentAndCeiling(t *testing.T) {
	th := newTestHost(t, func(cfg *Config) { cfg.Deployment.AllowedRecipientDomains = []string{"example.com"} })
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t, "eve@evil.test")
	r := c.do("POST", "/agl/v1/proposals", "", s.action(sendOp, map[string]any{"draft": handle}))
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "deployment_restricted", r.code())

	// An agent whose ceiling lacks email_send.
	r = c.do("PUT", "/agl/v1/agents/"+s.agent, testKeys.Operator, map[string]any{
		"principal": s.principal, "tools": []string{sendOp}, "effect_ceiling": []string{"external_write"}})
	require.Equal(t, 200, r.Status)
	_, h2 := s.draft(t)
	r = c.do("POST", "/agl/v1/proposals", "", s.action(sendOp, map[string]any{"draft": h2}))
	assert.Equal(t, "effect_ceiling_exceeded", r.code())
}

func TestDeniedDecisionAndRevision(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	id, handle := s.draft(t)
	prop := c.do("POST", "/agl/v1/proposals", "", s.action(sendOp, map[string]any{"draft": handle}))
	require.Equal(t, 201, prop.Status, string(prop.Raw))
	ar := c.do("POST", "/agl/v1/proposals/"+prop.str("proposal_id")+"/approval-requests", "", map[string]any{"ttl_seconds": 60})
	dec := map[string]any{"approver": "carol", "role": "auditor", "decision": "granted", "digest": prop.str("digest")}
	r := c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, dec)
	assert.Equal(t, "approver_role_mismatch", r.code())
	dec["role"], dec["digest"] = "operator", "sha256:"+strings.Repeat("0", 64)
	r = c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, dec)
	assert.Equal(t, "proposal_mismatch", r.code(), "a decision binds the digest the approver saw")
	dec["digest"], dec["decision"] = prop.str("digest"), "denied"
	r = c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, dec)
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Nil(t, r.Body["permit"])
	assert.Equal(t, "Denied", c.do("GET", "/agl/v1/resources/"+id, "", nil).str("state"))
	r = c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, dec)
	assert.Equal(t, "request_not_pending", r.code())

	// Editing a proposed draft voids its pending approval request.
	r = c.do("PUT", "/agl/v1/resources/"+id, "", map[string]any{"owner": s.principal, "expected_revision": 1,
		"payload": map[string]any{"from": s.mailbox, "to": []string{"bob@example.com"}, "subject": "v2", "body": "b"}})
	require.Equal(t, 200, r.Status, string(r.Raw))
	h2 := r.str("handle")
	p2 := c.do("POST", "/agl/v1/proposals", "", s.action(sendOp, map[string]any{"draft": h2}))
	require.Equal(t, 201, p2.Status, string(p2.Raw))
	ar2 := c.do("POST", "/agl/v1/proposals/"+p2.str("proposal_id")+"/approval-requests", "", map[string]any{"ttl_seconds": 60})
	r = c.do("PUT", "/agl/v1/resources/"+id, "", map[string]any{"owner": s.principal, "expected_revision": 2,
		"payload": map[string]any{"from": s.mailbox, "to": []string{"bob@example.com"}, "subject": "v3", "body": "b"}})
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "invalidated", c.do("GET", "/agl/v1/approval-requests/"+ar2.str("request_id"), "", nil).str("status"))
	r = c.do("PUT", "/agl/v1/resources/"+id, "", map[string]any{"owner": s.principal, "expected_revision": 2,
		"payload": map[string]any{"from": s.mailbox, "to": []string{"bob@example.com"}, "subject": "v4", "body": "b"}})
	assert.Equal(t, "stale_revision", r.code())
}

func TestUnprotectedOperationNeedsNoPermit(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	ct := transferContract(c, "ledger.note")
	ct["approval_requirement"] = map[string]any{"required": false}
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct).Status)
	s := newScenario(t, c, []string{"ledger.note"})
	args := map[string]any{"account": s.account(), "recipient": "IBAN-9", "amount": 5}
	r := s.dispatch("ledger.note", args, "")
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "Completed", r.str("state"))
	assert.Nil(t, r.Body["permit_id"])
	assert.Equal(t, 1, th.hook.CountFor(r.str("operation_id")))
	// The intent was persisted as a snapshot even without an approval.
	p := c.do("GET", "/agl/v1/proposals/"+r.str("proposal_id"), "", nil)
	assert.Equal(t, r.str("snapshot_digest"), p.str("digest"))
	// Authority still applies: another account is outside the grant.
	args["account"] = "acct-someone-else"
	assert.Equal(t, "authority_missing", s.dispatch("ledger.note", args, "").code())
}

// TestHoldWaitsForRelease: a hold at the external call keeps the claimed
// dispatch from sending until the suite releases it, however long that is;
// the release answers how many holds it ended.
func TestHoldWaitsForRelease(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	_, handle := s.draft(t)
	_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
	require.Equal(t, 201, c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": "external_call", "action": "hold", "operation": sendOp}).Status)
	done := make(chan resp, 1)
	go func() { done <- s.dispatch(sendOp, map[string]any{"draft": handle}, permit) }()
	for {
		r := c.do("GET", SeamPrefix+"faults", "", nil)
		list, _ := r.Body["faults"].([]any)
		if len(list) == 1 && fmt.Sprint(list[0].(map[string]any)["fired"]) == "1" {
			break
		}
	}
	assert.Equal(t, 0, th.email.Count(), "a held dispatch sent its message")
	select {
	case r := <-done:
		t.Fatalf("the held dispatch answered before its release: %s", r.Raw)
	default:
	}
	r := c.do("POST", SeamPrefix+"faults/release", "", map[string]any{"operation": sendOp, "boundary": "external_call"})
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, "1", fmt.Sprint(r.Body["released"]))
	d := <-done
	require.Equal(t, 200, d.Status, string(d.Raw))
	assert.Equal(t, "Completed", d.str("state"))
	assert.Equal(t, 1, th.email.Count())
	assert.Equal(t, "0", fmt.Sprint(c.do("POST", SeamPrefix+"faults/release", "", map[string]any{"operation": sendOp}).Body["released"]), "a released hold was released again")
}
