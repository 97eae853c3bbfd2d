package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// InTotoPayloadType is the DSSE payload type of an in-toto Statement.
const InTotoPayloadType = "application/vnd.in-toto+json"

// ErrUntrustedSigner says no trusted key verifies an envelope's signature.
var ErrUntrustedSigner = errors.New("signed by no trusted key")

// SignEnvelope wraps payload in a DSSE envelope of payloadType signed with
// key, in the same canonical envelope encoding the bundle uses. Other
// signed documents than the bundle (the AGL evidence attestations) use it.
func SignEnvelope(payloadType string, payload []byte, key ed25519.PrivateKey) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(signer{key})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(context.Background(), payloadType, payload)
	if err != nil {
		return nil, err
	}
	return encodeEnvelope(env)
}

// VerifyEnvelope checks a DSSE envelope of payloadType against the trusted
// keys and returns its payload and the index of the key that verified it.
// An envelope no trusted key verifies (signed by another key, or changed
// after signing) is ErrUntrustedSigner.
func VerifyEnvelope(envelope []byte, payloadType string, trusted []ed25519.PublicKey) ([]byte, int, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, -1, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType != payloadType {
		return nil, -1, fmt.Errorf("payloadType is %q, want %q", env.PayloadType, payloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, -1, fmt.Errorf("%w: the envelope carries no signature", ErrUntrustedSigner)
	}
	if _, err := base64.StdEncoding.DecodeString(env.Payload); err != nil {
		return nil, -1, fmt.Errorf("the payload is not base64: %w", err)
	}
	for i, k := range trusted {
		ev, err := dsse.NewEnvelopeVerifier(verifier{k})
		if err != nil {
			return nil, -1, err
		}
		if _, payload, err := ev.VerifyAndDecode(context.Background(), &env); err == nil {
			return payload, i, nil
		}
	}
	return nil, -1, fmt.Errorf("%w: no key the host trusts verifies the signature over this payload", ErrUntrustedSigner)
}
