package validator

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/parley-conformance/parley/evidence/envelope"
	"github.com/parley-conformance/parley/schemas"
)

// TestAnAttestationIsTheDocumentedStatement: what the suite's validator
// signs verifies under its key and is the statement the binding documents.
func TestAnAttestationIsTheDocumentedStatement(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v := Validator{Name: "policy-checker", Key: priv, Method: "llm", Policy: "sources-cited", Version: "2.1.0"}
	env, err := v.Attest("rpt_1", "sha256:"+"ab"+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd",
		[]Item{{ReceiptID: "rcp_1", ContentDigest: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}}, "pass")
	if err != nil {
		t.Fatal(err)
	}
	payload, i, err := envelope.VerifyTrusted(env, envelope.InTotoPayloadType, []ed25519.PublicKey{pub})
	if err != nil || i != 0 {
		t.Fatalf("verify: %v", err)
	}
	if err := schemas.ValidateJSON("agl/evidence-statement.json", payload); err != nil {
		t.Fatalf("%v\n%s", err, payload)
	}
	if _, err := v.Attest("rpt_1", "md5:00", nil, "pass"); err == nil {
		t.Fatal("a digest that is not sha256 was signed")
	}
}
