package agl

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHaltSeamCrashesTheInstanceInPlace: the "halt" action kills one host
// instance at a boundary the way a crash would (no answer, no heartbeat, the
// open transaction rolled back) while the test process lives on, so a second
// instance on the same store recovers the claim as Unknown and never retries.
func TestHaltSeamCrashesTheInstanceInPlace(t *testing.T) {
	db := filepath.Join(t.TempDir(), "shared.db")
	for _, tc := range []struct {
		boundary string
		effects  int
	}{{"external_call", 0}, {"completion", 1}, {"claim", 0}} {
		t.Run(tc.boundary, func(t *testing.T) {
			shared := func(c *Config) { c.DatabasePath = db; c.ClaimLeaseMS = 300 }
			victim := newTestHost(t, shared)
			survivor := newTestHost(t, shared)
			registerAll(t, victim.c)
			s := newScenario(t, victim.c, []string{sendOp})
			resID, handle := s.draft(t)
			_, permit, permitID := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
			r := victim.c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": tc.boundary, "action": "halt"})
			require.Equal(t, 201, r.Status, string(r.Raw))

			body := s.action(sendOp, map[string]any{"draft": handle})
			body["permit_token"] = permit
			raw, _ := json.Marshal(body)
			_, err := victim.c.hc.Post(victim.c.base+"/agl/v1/dispatch", "application/json", strings.NewReader(string(raw)))
			require.Error(t, err, "a halted instance answers nothing")
			_, err = victim.c.hc.Get(victim.c.base + "/agl/v1/")
			require.Error(t, err, "nor any later request")
			assert.Equal(t, tc.effects, victim.email.Count())

			other := &scenario{c: survivor.c, principal: s.principal, agent: s.agent, exec: s.exec, grantID: s.grantID, grantToken: s.grantToken, mailbox: s.mailbox}
			if tc.boundary == "claim" {
				// The claim transaction rolled back: nothing is claimed.
				assert.Nil(t, survivor.c.do("GET", "/agl/v1/permits/"+permitID, "", nil).Body["consumed_at"])
				assert.Equal(t, "Authorized", survivor.c.do("GET", "/agl/v1/resources/"+resID, "", nil).str("state"))
				return
			}
			require.Eventually(t, func() bool {
				ops := survivor.c.do("GET", "/agl/v1/operations?execution_id="+s.exec, "", nil)
				list, _ := ops.Body["operations"].([]any)
				return len(list) == 1 && list[0].(map[string]any)["state"] == "Unknown"
			}, 5*time.Second, 50*time.Millisecond)
			assert.Equal(t, "Unknown", survivor.c.do("GET", "/agl/v1/resources/"+resID, "", nil).str("state"))
			d := other.dispatch(sendOp, map[string]any{"draft": handle}, permit)
			assert.Equal(t, "uncertain_completion", d.code())
			assert.Equal(t, tc.effects, victim.email.Count(), "no retry")
		})
	}
}
