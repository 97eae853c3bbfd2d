package agl

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/evsource"
	"github.com/parley-conformance/parley/peers/validator"
	parleyschemas "github.com/parley-conformance/parley/schemas"
)

func evSchema(t *testing.T, name string, r resp) {
	t.Helper()
	require.NoError(t, parleyschemas.ValidateJSON("agl/evidence-"+name+".json", r.Raw), "%s: %s", name, r.Raw)
}

// TestEvidenceFlow walks a question to a publication and back through the
// refusals that guard it: the digest of what the source served, a
// credential kept out of the record, an attestation by an unlisted key or
// of another report, and a publication without a passing judgment.
func TestEvidenceFlow(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	th := newTestHost(t, func(c *Config) {
		c.Evidence.Validators = []Validator{{Name: "llm-reviewer", Kind: "llm", PublicKey: base64.StdEncoding.EncodeToString(pub)}}
	})
	c, op := th.c, testKeys.Operator
	src := evsource.New("cred-123")
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	digest := src.Set("a", []byte("revenue grew"))

	q := c.do("POST", "/agl/v1/evidence/questions", op, map[string]any{"execution_id": "x1", "text": "did revenue grow?"})
	require.Equal(t, 201, q.Status, string(q.Raw))
	evSchema(t, "question", q)
	qid := q.str("question_id")
	rc := c.do("POST", "/agl/v1/evidence/questions/"+qid+"/receipts", op, map[string]any{"question_revision": 1,
		"source": map[string]any{"url": srv.URL + "/doc/a?token=s3cret", "credential": "cred-123"}})
	require.Equal(t, 201, rc.Status, string(rc.Raw))
	evSchema(t, "receipt", rc)
	assert.Equal(t, digest, rc.str("content_digest"))
	assert.Equal(t, srv.URL+"/doc/a", rc.str("source", "url"))

	report := func(answer string) resp {
		r := c.do("POST", "/agl/v1/evidence/reports", op, map[string]any{"question_id": qid, "question_revision": 1,
			"receipt_ids": []string{rc.str("receipt_id")}, "body": map[string]any{"answer": answer}})
		require.Equal(t, 201, r.Status, string(r.Raw))
		require.Equal(t, 200, c.do("POST", "/agl/v1/evidence/reports/"+r.str("report_id")+"/review", op, map[string]any{"reviewer": "ed"}).Status)
		return r
	}
	r1, r2 := report("yes"), report("no")
	evSchema(t, "report", r1)
	require.NotEqual(t, r1.str("report_digest"), r2.str("report_digest"))
	items := []validator.Item{{ReceiptID: rc.str("receipt_id"), ContentDigest: digest}}
	attest := func(key ed25519.PrivateKey, about, at resp, result string) resp {
		v := validator.Validator{Name: "llm-reviewer", Key: key, Method: "deterministic", Policy: "grounded", Version: "1"}
		env, err := v.Attest(about.str("report_id"), about.str("report_digest"), items, result)
		require.NoError(t, err)
		return c.do("POST", "/agl/v1/evidence/reports/"+at.str("report_id")+"/attestations", op, map[string]any{"envelope": json.RawMessage(env)})
	}
	assert.Equal(t, "untrusted_validator", attest(stranger, r1, r1, "pass").code())
	assert.Equal(t, "attestation_unbound", attest(priv, r2, r1, "pass").code())
	failed := attest(priv, r1, r1, "fail")
	require.Equal(t, 201, failed.Status, string(failed.Raw))
	assert.Equal(t, "attestation_required", c.do("POST", "/agl/v1/evidence/reports/"+r1.str("report_id")+"/publication", op, map[string]any{"attestation_id": failed.str("attestation_id")}).code())
	passed := attest(priv, r1, r1, "pass")
	require.Equal(t, 201, passed.Status, string(passed.Raw))
	evSchema(t, "attestation", passed)
	assert.Equal(t, "llm", passed.str("judgment", "validator_kind"), "the kind is the configuration's, not the statement's")
	p := c.do("POST", "/agl/v1/evidence/reports/"+r1.str("report_id")+"/publication", op, map[string]any{"attestation_id": passed.str("attestation_id")})
	require.Equal(t, 201, p.Status, string(p.Raw))
	evSchema(t, "publication", p)
	evSchema(t, "publication", c.do("GET", "/agl/v1/evidence/publications/"+p.str("publication_id"), "", nil))
	assert.Equal(t, r1.str("report_digest"), p.str("report_digest"))
	assert.Equal(t, "attestation_unbound", c.do("POST", "/agl/v1/evidence/reports/"+r2.str("report_id")+"/publication", op, map[string]any{"attestation_id": passed.str("attestation_id")}).code())

	// Revised: old evidence no longer serves.
	require.Equal(t, 200, c.do("PUT", "/agl/v1/evidence/questions/"+qid, op, map[string]any{"text": "and now?", "expected_revision": 1}).Status)
	assert.Equal(t, "stale_revision", c.do("POST", "/agl/v1/evidence/reports", op, map[string]any{"question_id": qid, "question_revision": 2,
		"receipt_ids": []string{rc.str("receipt_id")}, "body": map[string]any{}}).code())

	audit := c.do("GET", "/agl/v1/audit?execution_id=x1", op, nil)
	require.Equal(t, http.StatusOK, audit.Status)
	assert.Contains(t, string(audit.Raw), rc.str("receipt_id"))
	assert.NotContains(t, string(audit.Raw), "cred-123")
	assert.NotContains(t, string(audit.Raw), "s3cret")
}
