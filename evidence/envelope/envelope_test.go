package envelope

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
)

func TestVerifyTrustedNamesTheKeyAndRefusesOthers(t *testing.T) {
	pubA, privA, _ := ed25519.GenerateKey(rand.Reader)
	pubB, _, _ := ed25519.GenerateKey(rand.Reader)
	_, privC, _ := ed25519.GenerateKey(rand.Reader)
	payload := []byte(`{"result":"fail"}`)
	env, err := Sign(InTotoPayloadType, payload, privA)
	if err != nil {
		t.Fatal(err)
	}
	got, i, err := VerifyTrusted(env, InTotoPayloadType, []ed25519.PublicKey{pubB, pubA})
	if err != nil || i != 1 || string(got) != string(payload) {
		t.Fatalf("trusted key: %q %d %v", got, i, err)
	}
	other, _ := Sign(InTotoPayloadType, payload, privC)
	if _, _, err := VerifyTrusted(other, InTotoPayloadType, []ed25519.PublicKey{pubA, pubB}); !errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("another key: %v", err)
	}
	var m map[string]any
	json.Unmarshal(env, &m)
	m["payload"] = base64.StdEncoding.EncodeToString([]byte(`{"result":"pass"}`))
	changed, _ := json.Marshal(m)
	if _, _, err := VerifyTrusted(changed, InTotoPayloadType, []ed25519.PublicKey{pubA}); !errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("changed payload: %v", err)
	}
	if _, _, err := VerifyTrusted(env, "application/json", []ed25519.PublicKey{pubA}); err == nil || errors.Is(err, ErrUntrustedSigner) {
		t.Fatalf("another payload type: %v", err)
	}
}
