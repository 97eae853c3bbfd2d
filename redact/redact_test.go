package redact

import (
	"strings"
	"testing"
)

func TestTextRemovesCredentialsAndKeepsTheRest(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
	for _, c := range []struct{ in, gone, kept string }{
		{"key: " + key, "MIGHAgEAMBMG", "key: "},
		{`{"key_pem":"-----BEGIN PRIVATE KEY-----\nMIGHAgEA\n-----END PRIVATE KEY-----\n","cert_pem":"CERT"}`, "MIGHAgEA", `"cert_pem":"CERT"`},
		{"Authorization: Bearer op_5f3a9c1e2b7d4e6f8a0b", "op_5f3a9c1e2b7d", "Authorization: Bearer "},
		{`{"operator_key":"op_secret123","mode":"enforce"}`, "op_secret123", `"mode":"enforce"`},
		{`{"tenants":[{"id":"acme","api_keys":["parley-openwop-key-acme"]}]}`, "parley-openwop-key-acme", `"id":"acme"`},
		{`{"grant_token":"gt_abcdef123456"}`, "gt_abcdef123456", `"grant_token"`},
		// The same document quoted inside another JSON string.
		{`{"document":"{\"resolver_key\":\"resolver_abc123\",\"url\":\"http://x\"}"}`, "resolver_abc123", `\"url\":\"http://x\"`},
		{`{"idempotency_key":"k-123456","destination_key":"d"}`, "", `"idempotency_key":"k-123456"`},
	} {
		out := Text(c.in)
		if c.gone != "" && strings.Contains(out, c.gone) {
			t.Errorf("Text(%q) = %q still shows %q", c.in, out, c.gone)
		}
		if !strings.Contains(out, c.kept) {
			t.Errorf("Text(%q) = %q lost %q", c.in, out, c.kept)
		}
	}
}

func TestASetRemovesItsValuesLongestFirst(t *testing.T) {
	var s Set
	s.Add("abc", "secret-token-1", "secret-token-12345")
	out := s.Text("a secret-token-12345 and secret-token-1 and abc")
	if strings.Contains(out, "secret-token") || strings.Contains(out, "2345") {
		t.Fatalf("a registered value survived: %q", out)
	}
	if !strings.Contains(out, "and abc") {
		t.Fatalf("a value too short to be a secret was removed: %q", out)
	}
	var none *Set
	if got := none.Text("Bearer abcdefgh"); strings.Contains(got, "abcdefgh") {
		t.Fatalf("a nil set skipped the patterns: %q", got)
	}
}
