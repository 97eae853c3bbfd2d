package evidence_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/parley-conformance/parley/evidence"
)

// TestAChangedPayloadSaysSo changes a verdict in the signed payload and
// writes the envelope back in canonical form: the error says the payload
// changed, which reads apart from a bundle signed by another key.
func TestAChangedPayloadSaysSo(t *testing.T) {
	b, pub := sign(t, statement(t))
	var env dsse.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(payload, []byte(`"executed-pass"`), []byte(`"executed-fail"`), 1)
	if bytes.Equal(changed, payload) {
		t.Fatal("no verdict to change")
	}
	env.Payload = base64.StdEncoding.EncodeToString(changed)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&env); err != nil {
		t.Fatal(err)
	}
	_, err = evidence.Verify(buf.Bytes(), pub, reg, corpus)
	if !errors.Is(err, evidence.ErrPayloadChanged) {
		t.Fatalf("want a changed-payload error, got %v", err)
	}
	if errors.Is(err, evidence.ErrOtherKey) {
		t.Fatalf("a changed payload reads as a wrong key: %v", err)
	}
}

// A bundle written before scenarios carried their duration still verifies:
// the field is optional in the schema and omitted when empty.
func TestABundleWithoutDurationsVerifies(t *testing.T) {
	st := statement(t)
	timed := false
	for i := range st.Predicate.Requirements {
		for j := range st.Predicate.Requirements[i].Scenarios {
			timed = timed || st.Predicate.Requirements[i].Scenarios[j].DurationMs > 0
			st.Predicate.Requirements[i].Scenarios[j].DurationMs = 0
		}
	}
	if !timed {
		t.Error("a run's scenarios carry no duration")
	}
	if raw, _ := json.Marshal(st); bytes.Contains(raw, []byte("durationMs")) {
		t.Fatal("an untimed statement still names durationMs")
	}
	b, pub := sign(t, st)
	if _, err := evidence.Verify(b, pub, reg, corpus); err != nil {
		t.Fatalf("an untimed bundle does not verify: %v", err)
	}
}
