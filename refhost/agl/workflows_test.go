package agl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
	parleyschemas "github.com/parley-conformance/parley/schemas"
)

func TestCheckWorkflowEndpoint(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	good, err := aglchecker.Fixture("match/dispatch-all-outcomes")
	require.NoError(t, err)
	r := c.do("POST", "/agl/v1/workflows/check", "", string(good))
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, true, r.Body["checked"])
	doc, err := ParseJSON(good)
	require.NoError(t, err)
	enc, err := Canonicalize(doc)
	require.NoError(t, err)
	sum := sha256.Sum256(enc)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), r.str("certificate", "ir_digest"))
	assert.Equal(t, "send-approved-email", r.str("certificate", "workflow"))

	// The same workflow, members in another order, has the same certificate.
	var v any
	require.NoError(t, json.Unmarshal(good, &v))
	again, _ := json.Marshal(v)
	r2 := c.do("POST", "/agl/v1/workflows/check", "", string(again))
	assert.Equal(t, r.Body, r2.Body)

	bad, err := aglchecker.Fixture("affine/double-dispatch")
	require.NoError(t, err)
	r = c.do("POST", "/agl/v1/workflows/check", "", string(bad))
	require.Equal(t, 200, r.Status, string(r.Raw))
	assert.Equal(t, false, r.Body["checked"])
	assert.Nil(t, r.Body["certificate"])
	assert.NotEmpty(t, r.Body["diagnostics"])

	other := strings.Replace(string(good), `"ir_version": "agl-workflow/1"`, `"ir_version": "agl-workflow/2"`, 1)
	r = c.do("POST", "/agl/v1/workflows/check", "", other)
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "unsupported_ir_version", r.code())
	unknown := strings.Replace(string(good), `"kind": "propose"`, `"kind": "teleport"`, 1)
	r = c.do("POST", "/agl/v1/workflows/check", "", unknown)
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "invalid_workflow", r.code())
	r = c.do("POST", "/agl/v1/workflows/check", "", `{"ir_version":`)
	assert.Equal(t, 400, r.Status)
	r = c.do("POST", "/agl/v1/workflows/check", "", `{"ir_version": "agl-workflow/1", "ir_version": "agl-workflow/1"}`)
	assert.Equal(t, 422, r.Status)
}

func TestContractInterfaceCompatibility(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	v1 := emailContract(c, sendOp)
	v1["possible_effects"] = []string{"external_write", "email_send", "audit_write"}
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, v1).Status)
	minor := func(edit func(m map[string]any)) resp {
		m := emailContract(c, sendOp)
		m["possible_effects"] = []string{"external_write", "email_send", "audit_write"}
		m["contract_version"] = "1.1"
		edit(m)
		return c.do("POST", "/agl/v1/contracts", testKeys.Operator, m)
	}
	for name, edit := range map[string]func(m map[string]any){
		"wider effect": func(m map[string]any) {
			m["possible_effects"] = []string{"external_write", "email_send", "audit_write", "financial_write"}
		},
		"weaker authority": func(m map[string]any) { m["authority_requirements"] = []any{} },
		"approval role": func(m map[string]any) {
			m["approval_requirement"] = map[string]any{"required": true, "role": "treasurer"}
		},
		"idempotency": func(m map[string]any) { m["idempotency_contract"] = map[string]any{"kind": "destination_key"} },
		"input type approved": func(m map[string]any) {
			m["input_type"].(map[string]any)["properties"].(map[string]any)["note"] = map[string]any{"type": "string"}
		},
	} {
		r := minor(edit)
		assert.Equal(t, 409, r.Status, name)
		assert.Equal(t, "incompatible_contract_change", r.code(), name)
	}
	// A compatible change registers under a new minor version, with a new fingerprint.
	r := minor(func(m map[string]any) {
		m["possible_effects"] = []string{"external_write", "email_send"}
		m["scheduling_contract"] = map[string]any{"max_attempts": 2}
	})
	require.Equal(t, 201, r.Status, string(r.Raw))
	// An incompatible change under a new major version is a new interface.
	v2 := emailContract(c, sendOp)
	v2["contract_version"] = "2"
	v2["possible_effects"] = []string{"external_write", "email_send", "financial_write"}
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, v2).Status)
}

// TestWorkflowSchemas: every fixture satisfies schemas/agl/workflow.json and
// the checker's answer to each satisfies workflow-check.json.
func TestWorkflowSchemas(t *testing.T) {
	th := newTestHost(t, nil)
	names := aglchecker.Names()
	require.NotEmpty(t, names)
	for _, n := range names {
		b, err := aglchecker.Fixture(n)
		require.NoError(t, err)
		require.NoError(t, parleyschemas.ValidateJSON("agl/workflow.json", b), n)
		r := th.c.do("POST", "/agl/v1/workflows/check", "", string(b))
		require.Equal(t, 200, r.Status, n)
		require.NoError(t, parleyschemas.ValidateJSON("agl/workflow-check.json", r.Raw), "%s: %s", n, r.Raw)
	}
}
