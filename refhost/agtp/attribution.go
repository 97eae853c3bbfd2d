package agtp

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
)

// canonicalJSON renders v with sorted object keys, no insignificant white
// space and no HTML escaping. For the value types a contract holds (strings,
// integers, arrays, objects, null) this is the JSON Canonicalization Scheme.
func canonicalJSON(v any) []byte {
	raw, _ := json.Marshal(v)
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&generic)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(generic) // maps marshal with sorted keys
	return bytes.TrimRight(b.Bytes(), "\n")
}

// contractHash is the SHA-256 of the canonical contract definition: the
// synthesized endpoint plus its recipe lineage (null for passthrough).
func contractHash(endpoint json.RawMessage, lineage map[string]any) string {
	var l any
	if lineage != nil {
		l = lineage
	}
	sum := sha256.Sum256(canonicalJSON(map[string]any{"endpoint": endpoint, "recipe_lineage": l}))
	return hex.EncodeToString(sum[:])
}

// attributionJWS is the unsigned (alg none) compact JWS form of an
// Attribution-Record payload, and its Audit-ID.
func attributionJWS(payload map[string]any) (jws, auditID string) {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"none","typ":"agtp-attribution+jwt"}`))
	p := enc.EncodeToString(canonicalJSON(payload))
	jws = h + "." + p + "."
	sum := sha256.Sum256([]byte(jws))
	return jws, hex.EncodeToString(sum[:])
}
