package evidence_test

import (
	"bytes"
	"crypto/ed25519"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/scenarios"
)

var (
	fuzzOnce   sync.Once
	fuzzBundle []byte
	fuzzPub    ed25519.PublicKey
)

// FuzzVerify feeds verify arbitrary bytes, starting from a real bundle: it
// never panics, and it accepts nothing but the very bundle that was signed.
func FuzzVerify(f *testing.F) {
	fuzzOnce.Do(func() {
		fuzzBundle, fuzzPub = sign(f, statement(f))
	})
	reg, corpus, err := scenarios.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fuzzBundle)
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"x","sig":"AA=="}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := evidence.Verify(data, fuzzPub, reg, corpus)
		if err == nil && !bytes.Equal(data, fuzzBundle) {
			t.Fatalf("verify accepted bytes that are not the signed bundle: %q", data)
		}
		if err == nil && st == nil {
			t.Fatal("accepted without a statement")
		}
		if _, err := evidence.VerifySigned(data, fuzzPub); err == nil && !bytes.Equal(data, fuzzBundle) {
			t.Fatalf("verify-signed accepted bytes that are not the signed bundle: %q", data)
		}
	})
}
