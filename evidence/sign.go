package evidence

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/parley-conformance/parley/evidence/envelope"
)

// KeyID names a public key: the SHA-256 of its PKIX encoding.
func KeyID(pub ed25519.PublicKey) string { return envelope.KeyID(pub) }

type (
	signer   = envelope.Signer
	verifier = envelope.Verifier
)

// Sign serializes the statement and wraps it in a DSSE envelope. The
// envelope's bytes are canonical (compact JSON and one newline), so that
// verification can refuse any byte that differs.
func Sign(st Statement, key ed25519.PrivateKey) ([]byte, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(signer{Key: key})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(context.Background(), PayloadType, payload)
	if err != nil {
		return nil, err
	}
	return encodeEnvelope(env)
}

func encodeEnvelope(env *dsse.Envelope) ([]byte, error) { return envelope.Encode(env) }

// GenerateKey makes a new ed25519 key pair.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// WriteKeyPair writes the private key (PKCS #8 PEM, mode 0600) and the public
// key (PKIX PEM, mode 0644). It refuses to overwrite either.
func WriteKeyPair(privPath, pubPath string, pub ed25519.PublicKey, priv ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	if err := writeNew(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeNew(pubPath, EncodePublicKey(pubDER), 0o644)
}

// EncodePublicKey PEM-encodes a PKIX public key.
func EncodePublicKey(pkixDER []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkixDER})
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadPrivateKey reads a PKCS #8 PEM ed25519 private key.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM \"PRIVATE KEY\" (make one with `parley keygen`)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ed25519 key", path)
	}
	return ek, nil
}

// ParsePublicKey reads a PKIX PEM ed25519 public key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\"")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an ed25519 public key")
	}
	return ek, nil
}
