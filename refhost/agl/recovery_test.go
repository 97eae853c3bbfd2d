package agl

import "testing"

// TestSameDeployment: recovery resends only to the destination, account and
// deduplication promise the approved snapshot bound.
func TestSameDeployment(t *testing.T) {
	d := Destination{URL: "http://127.0.0.1:8025/a", Account: "acme", HonoursIdempotencyKey: true}
	bound := map[string]any{"destination": d.URL, "account": d.Account, "destination_idempotent": true}
	if !sameDeployment(bound, d) {
		t.Fatal("the bound deployment is this host's, yet it differs")
	}
	for name, other := range map[string]Destination{
		"another url":      {URL: "http://127.0.0.1:8026/a", Account: "acme", HonoursIdempotencyKey: true},
		"another account":  {URL: d.URL, Account: "acme-eu", HonoursIdempotencyKey: true},
		"no deduplication": {URL: d.URL, Account: "acme"},
	} {
		if sameDeployment(bound, other) {
			t.Errorf("%s: taken for the bound deployment", name)
		}
	}
	if sameDeployment(nil, d) {
		t.Error("a snapshot without a deployment matched")
	}
}
