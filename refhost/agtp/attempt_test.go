package agtp

import "testing"

// TestEvery464CarriesAnAttemptID: the wire notes put RCNS-Attempt-Id on
// every 464, so the contract-resolution refusals carry one too, and the
// refused agent can read it back with INSPECT target=rcns-attempt.
func TestEvery464CarriesAnAttemptID(t *testing.T) {
	f := newFixture(t, optimistic)
	r := f.do("BOOK", "/room/r-att", agentA, map[string]any{"id": "r-att"}, rcnsOn...)
	f.expect(r, 201, "")
	sid := r.Header.Get("Contract-Synthesized")
	seen := map[string]bool{}
	for _, tc := range []struct {
		agent, reason string
		revoke        bool
	}{{agentB, "contract-not-yours", false}, {agentA, "contract-revoked", true}} {
		if tc.revoke {
			f.expect(f.do("REVOKE", "/", agentA, map[string]any{"target": "contract", "synthesis_id": sid, "reason": "t"}), 200, "")
		}
		r := f.do("BOOK", "/room/r-att", tc.agent, map[string]any{"id": "r-att"}, "Contract-Synthesized", sid)
		f.expect(r, 464, tc.reason)
		id := r.Header.Get("RCNS-Attempt-Id")
		if id == "" || seen[id] {
			t.Fatalf("%s: RCNS-Attempt-Id %q missing or reused", tc.reason, id)
		}
		seen[id] = true
		got := f.do("INSPECT", "/", tc.agent, map[string]any{"target": "rcns-attempt", "attempt_id": id})
		f.expect(got, 200, "")
		if got.str("result", "reason") != tc.reason || got.str("result", "synthesis_id") != sid {
			t.Fatalf("INSPECT rcns-attempt: %s", got.Body)
		}
	}
}
