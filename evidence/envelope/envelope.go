// Package envelope signs and verifies DSSE envelopes with ed25519 keys:
// the signing the evidence bundle uses, shared with the other signed
// documents parley handles (the AGL evidence attestations). It imports
// nothing of parley, so a host may use it.
package envelope

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// InTotoPayloadType is the DSSE payload type of an in-toto Statement.
const InTotoPayloadType = "application/vnd.in-toto+json"

// ErrUntrustedSigner says no trusted key verifies an envelope's signature.
var ErrUntrustedSigner = errors.New("signed by no trusted key")

// KeyID names a public key: the SHA-256 of its PKIX encoding.
func KeyID(pub ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Signer is a DSSE signer over an ed25519 key.
type Signer struct{ Key ed25519.PrivateKey }

func (s Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.Key, data), nil
}
func (s Signer) KeyID() (string, error) { return KeyID(s.Key.Public().(ed25519.PublicKey)), nil }

// Verifier is a DSSE verifier over an ed25519 public key.
type Verifier struct{ Key ed25519.PublicKey }

func (v Verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.Key, data, sig) {
		return errors.New("ed25519: signature does not verify")
	}
	return nil
}
func (v Verifier) KeyID() (string, error)   { return KeyID(v.Key), nil }
func (v Verifier) Public() crypto.PublicKey { return v.Key }

// Encode writes an envelope in its canonical form: compact JSON, no HTML
// escaping, one newline.
func Encode(env *dsse.Envelope) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Sign wraps payload in a DSSE envelope of payloadType signed with key.
func Sign(payloadType string, payload []byte, key ed25519.PrivateKey) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(Signer{key})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(context.Background(), payloadType, payload)
	if err != nil {
		return nil, err
	}
	return Encode(env)
}

// VerifyTrusted checks an envelope of payloadType against the trusted keys
// and returns its payload and the index of the key that verified it. An
// envelope no trusted key verifies (signed by another key, or changed
// after signing) is ErrUntrustedSigner.
func VerifyTrusted(envelope []byte, payloadType string, trusted []ed25519.PublicKey) ([]byte, int, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, -1, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType != payloadType {
		return nil, -1, fmt.Errorf("payloadType is %q, want %q", env.PayloadType, payloadType)
	}
	if _, err := base64.StdEncoding.DecodeString(env.Payload); err != nil {
		return nil, -1, fmt.Errorf("the payload is not base64: %w", err)
	}
	if len(env.Signatures) == 0 {
		return nil, -1, fmt.Errorf("%w: the envelope carries no signature", ErrUntrustedSigner)
	}
	for i, k := range trusted {
		ev, err := dsse.NewEnvelopeVerifier(Verifier{k})
		if err != nil {
			return nil, -1, err
		}
		if _, payload, err := ev.VerifyAndDecode(context.Background(), &env); err == nil {
			return payload, i, nil
		}
	}
	return nil, -1, fmt.Errorf("%w: no key the host trusts verifies the signature over this payload", ErrUntrustedSigner)
}
