package openwop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
)

// TestEveryStoredRecordSatisfiesTheSchemas exercises every way the host
// records a negotiation (inbound and outbound, attributed and anonymous,
// accepted, downgraded and refused for each reason the host has) and then
// validates every record in the store, not only those a stream delivers:
// each host-event envelope against the envelope schema, each payload against
// the payload schema, each run event's own fields by hand.
func TestEveryStoredRecordSatisfiesTheSchemas(t *testing.T) {
	f := start(t, testConfig, "")
	env, pay := schemas(t)
	card := f.srv.URL + "/a2a/agent-card.json"
	versions := map[string][]string{
		"a2a": {"", "1.0", "0.3", "0.5", "2.0", "0.2", "bad version!"},
		"mcp": {"", "2025-11-25", "2025-06-18", "2025-05-01", "2026-01-01", "2024-11-05", "bad version!"},
	}
	for _, key := range []string{"k1", ""} {
		ac := a2a.Client{APIKey: key, Workspace: "ws-schema"}
		mc := mcp.Client{APIKey: key, Workspace: "ws-schema"}
		for _, v := range versions["a2a"] {
			_, err := ac.FetchAgentCard(ctx(), card, v)
			require.NoError(t, err)
			_, err = ac.SendMessage(ctx(), f.srv.URL+"/a2a", v, "hi")
			require.NoError(t, err)
		}
		for _, v := range versions["mcp"] {
			_, err := mc.Initialize(ctx(), f.srv.URL+"/mcp", v)
			require.NoError(t, err)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, card, nil)
	req.Header.Set("Authorization", "Bearer k2")
	req.Header.Add("A2A-Version", "1.0")
	req.Header.Add("A2A-Version", "0.3")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	noVersion := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	defer noVersion.Close()
	peers := []a2a.Config{
		{Versions: []string{"1.0"}}, {Versions: []string{"0.3"}}, {Versions: []string{"0.2"}},
		{Versions: []string{"0.5"}}, {Versions: []string{"0.3"}, RefuseUnsupported: true},
	}
	for _, pc := range peers {
		p := a2a.Start(pc)
		invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": p.URL()})
		p.Close()
	}
	invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": noVersion.URL})
	invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": "http://127.0.0.1:1"})
	for _, sc := range []mcp.Config{
		{Versions: []string{"2025-11-25"}}, {Versions: []string{"2025-03-26"}, EventStream: true},
		{Versions: []string{"2024-11-05"}}, {Versions: []string{"2025-06-18"}, RefuseUnsupported: true},
	} {
		s := mcp.Start(sc)
		invoke(t, f, "k2", "mcp", map[string]any{"serverUrl": s.URL(), "requestVersion": "2025-11-25"})
		s.Close()
	}

	reasons := map[string]bool{}
	outcomes := map[string]bool{}
	check := func(raw []byte) {
		p := validate(t, pay, raw)
		outcomes[p["outcome"].(string)] = true
		if r, ok := p["reason"].(string); ok {
			reasons[r] = true
		}
		if v, ok := p["requested"].(string); ok {
			assert.True(t, validVersion(v), "requested %q", v)
		}
	}

	rows, err := f.host.store.db.QueryContext(context.Background(), `SELECT tenant_id IS NULL, envelope FROM host_events`)
	require.NoError(t, err)
	var hostEvents, anonymous int
	for rows.Next() {
		var anon bool
		var b []byte
		require.NoError(t, rows.Scan(&anon, &b))
		e := validate(t, env, b)
		assert.NotContains(t, e, "runId")
		if anon {
			anonymous++
			assert.NotContains(t, e, "workspaceId", "an anonymous caller has no workspace")
		}
		raw, _ := json.Marshal(e["payload"])
		check(raw)
		hostEvents++
	}
	require.NoError(t, rows.Err())
	rows.Close()

	rows, err = f.host.store.db.QueryContext(context.Background(), `SELECT run_id, event FROM run_events`)
	require.NoError(t, err)
	var runEvents int
	for rows.Next() {
		var runID string
		var b []byte
		require.NoError(t, rows.Scan(&runID, &b))
		var ev struct {
			EventID   string          `json:"eventId"`
			RunID     string          `json:"runId"`
			Sequence  int64           `json:"sequence"`
			Type      string          `json:"type"`
			Timestamp string          `json:"timestamp"`
			Payload   json.RawMessage `json:"payload"`
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&ev), "%s", b)
		assert.Equal(t, runID, ev.RunID)
		assert.Equal(t, "negotiation.decided", ev.Type)
		assert.NotEmpty(t, ev.EventID)
		assert.Positive(t, ev.Sequence)
		check(ev.Payload)
		runEvents++
	}
	require.NoError(t, rows.Err())
	rows.Close()

	assert.Equal(t, 2*(2*len(versions["a2a"])+len(versions["mcp"]))+1, hostEvents, "every inbound exchange is recorded once")
	assert.Equal(t, len(versions["a2a"])*2+len(versions["mcp"]), anonymous)
	assert.Equal(t, len(peers)+2+4, runEvents, "every outbound exchange is recorded once")
	assert.Equal(t, map[string]bool{"accepted": true, "refused": true}, outcomes)
	for _, r := range []string{reasonBelowFloor, reasonMalformed, reasonUnauthPinned, reasonConflict,
		reasonUnsupported, reasonPeerUnnamed, reasonPeerRefused, reasonPeerUnreadable} {
		assert.True(t, reasons[r], "no record exercised reason %s", r)
	}
}
