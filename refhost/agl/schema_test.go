package agl

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	parleyschemas "github.com/parley-conformance/parley/schemas"
)

// TestResponsesMatchSchemas drives the binding and validates what comes
// back against schemas/agl, so the documented interface and the host agree.
func TestResponsesMatchSchemas(t *testing.T) {
	files, err := filepath.Glob("../../schemas/agl/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	schemas := map[string]*jsonschema.Schema{}
	for _, f := range files {
		sch, err := parleyschemas.Compile("agl/" + filepath.Base(f))
		require.NoError(t, err, f)
		schemas[filepath.Base(f)] = sch
	}
	check := func(name string, r resp) {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Raw))
		require.NoError(t, err)
		require.NoError(t, schemas[name].Validate(inst), "%s: %s", name, r.Raw)
	}
	checkReq := func(name string, body any) {
		t.Helper()
		raw, _ := jsonMarshal(body)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err)
		require.NoError(t, schemas[name].Validate(inst), "%s: %s", name, raw)
	}

	th := newTestHost(t, nil)
	c := th.c
	check("info.json", c.do("GET", "/agl/v1/", "", nil))
	check("implementations.json", c.do("GET", "/agl/v1/implementations", "", nil))
	ct := emailContract(c, sendOp)
	checkReq("contract.json", ct)
	check("contract-registration.json", c.do("POST", "/agl/v1/contracts", testKeys.Operator, ct))
	check("contract-registration.json", c.do("GET", "/agl/v1/contracts/"+sendOp, "", nil))
	s := newScenario(t, c, []string{sendOp})
	check("agent.json", c.do("GET", "/agl/v1/agents/"+s.agent, "", nil))
	check("grant.json", c.do("GET", "/agl/v1/grants/"+s.grantID, testKeys.Authority, nil))
	id, handle := s.draft(t)
	check("resource.json", c.do("GET", "/agl/v1/resources/"+id, "", nil))
	act := s.action(sendOp, map[string]any{"draft": handle})
	checkReq("action-request.json", act)
	prop := c.do("POST", "/agl/v1/proposals", "", act)
	check("proposal.json", prop)
	ar := c.do("POST", "/agl/v1/proposals/"+prop.str("proposal_id")+"/approval-requests", "", map[string]any{"ttl_seconds": 60})
	check("approval-request.json", ar)
	check("approval-request.json", c.do("GET", "/agl/v1/approval-requests/"+ar.str("request_id"), "", nil))
	decReq := map[string]any{"approver": "carol", "role": "operator", "decision": "granted", "digest": prop.str("digest")}
	checkReq("decision-request.json", decReq)
	dec := c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver, decReq)
	check("approval-request.json", dec)
	check("permit.json", c.do("GET", "/agl/v1/permits/"+dec.str("permit", "permit_id"), "", nil))
	body := s.action(sendOp, map[string]any{"draft": handle})
	body["permit_token"] = dec.str("permit", "permit_token")
	checkReq("dispatch-request.json", body)
	op := c.do("POST", "/agl/v1/dispatch", "", body)
	check("operation.json", op)
	check("error.json", c.do("POST", "/agl/v1/dispatch", "", body))
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(op.Raw))
	require.Error(t, schemas["error.json"].Validate(inst), "the schemas do discriminate")
	check("operation.json", c.do("GET", "/agl/v1/operations/"+op.str("operation_id"), "", nil))
	check("operation-list.json", c.do("GET", "/agl/v1/operations?execution_id="+s.exec, "", nil))
	check("audit-page.json", c.do("GET", "/agl/v1/audit", testKeys.Operator, nil))
	check("error.json", c.do("GET", "/agl/v1/operations/nope", "", nil))
	fault := map[string]any{"boundary": "claim", "action": "delay", "delay_ms": 1}
	checkReq("seam-fault.json", fault)
	check("seam-fault.json", c.do("POST", SeamPrefix+"faults", "", fault))
	checkReq("host-config.json", th.h.cfg)

	// The surfaces of the rest of the runtime.
	check("legacy-invoke-result.json", c.do("POST", "/agl/v1/legacy/invoke", "", map[string]any{"tool": "legacy.echo", "arguments": map[string]any{"x": 1}}))
	check("error.json", c.do("POST", "/agl/v1/legacy/invoke", "", map[string]any{"tool": sendOp, "arguments": map[string]any{}}))
	sc := map[string]any{"execution_id": s.exec + "-budget", "budget": map[string]any{"tool_calls": 3}}
	checkReq("scope-create.json", sc)
	root := c.do("POST", "/agl/v1/scopes", testKeys.Operator, sc)
	check("scope.json", root)
	check("scope.json", c.do("POST", "/agl/v1/scopes/"+root.str("scope_id")+"/children", "", map[string]any{"budget": map[string]any{"tool_calls": 2}}))
	check("scope.json", c.do("GET", "/agl/v1/scopes/"+root.str("scope_id"), "", nil))
	cancel := map[string]any{"grant_token": s.grantToken}
	checkReq("cancel-request.json", cancel)
	check("error.json", c.do("POST", "/agl/v1/operations/"+op.str("operation_id")+"/cancel", "", cancel))
	par := map[string]any{"mode": "map", "execution_id": s.exec, "principal": s.principal, "agent_id": s.agent, "grant_token": s.grantToken,
		"branches": []any{map[string]any{"operation": sendOp, "arguments": map[string]any{"draft": handle}, "permit_token": dec.str("permit", "permit_token")}}}
	checkReq("parallel-request.json", par)
	check("parallel-result.json", c.do("POST", "/agl/v1/parallel", "", par))
	check("seam-admission.json", c.do("GET", SeamPrefix+"admission", "", nil))
	barrier := map[string]any{"points": []string{"claim"}, "parties": 2, "timeout_ms": 10}
	checkReq("seam-barrier.json", barrier)
	check("seam-barrier.json", c.do("POST", SeamPrefix+"barrier", "", barrier))
	check("seam-barrier.json", c.do("GET", SeamPrefix+"barrier", "", nil))
	c.do("DELETE", SeamPrefix+"barrier", "", nil)
	check("seam-clock.json", c.do("POST", SeamPrefix+"clock", "", map[string]any{"advance_ms": 0}))
	check("seam-retention.json", c.do("POST", SeamPrefix+"retention", "", nil))
}
