// Package validator is the suite's evidence validator: it issues
// attestations (an in-toto Statement v1 in a DSSE envelope, signed with
// ed25519) naming its policy and version, the evidence it inspected, the
// report digest and its result. An LLM-backed validator says so in its
// statement's method; a host labels it from its own configuration.
package validator

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parley-conformance/parley/evidence/envelope"
)

// PredicateType is the attestation's predicate type.
const PredicateType = "https://parley.dev/agl/evidence-attestation/v1"

// Item is one piece of evidence the validator inspected.
type Item struct {
	ReceiptID     string `json:"receipt_id"`
	ContentDigest string `json:"content_digest"`
}

// Validator signs attestations.
type Validator struct {
	Name    string
	Key     ed25519.PrivateKey
	Method  string // "deterministic" or "llm"
	Policy  string
	Version string
}

// Attest returns a DSSE envelope attesting result ("pass" or "fail") for
// the report whose digest is reportDigest ("sha256:<hex>"), report naming
// it in the subject.
func (v Validator) Attest(report, reportDigest string, items []Item, result string) ([]byte, error) {
	hexd, ok := strings.CutPrefix(reportDigest, "sha256:")
	if _, err := hex.DecodeString(hexd); !ok || err != nil {
		return nil, fmt.Errorf("validator: report digest %q is not sha256:<hex>", reportDigest)
	}
	if items == nil {
		items = []Item{}
	}
	st := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "report:" + report, "digest": map[string]any{"sha256": hexd}}},
		"predicateType": PredicateType,
		"predicate": map[string]any{
			"validator": v.Name, "policy": map[string]any{"name": v.Policy, "version": v.Version},
			"evidence": items, "report_digest": reportDigest, "result": result, "method": v.Method,
		},
	}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return envelope.Sign(envelope.InTotoPayloadType, payload, v.Key)
}
