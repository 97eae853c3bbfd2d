package openwop

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/a2a"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.3", "1.0", -1}, {"1.10", "1.9", 1}, {"1.0", "1.0", 0}, {"1", "1.0", -1},
		{"2025-03-26", "2025-06-18", -1}, {"2025-11-25", "2025-06-18", 1},
		{"1.0-rc1", "1.0", 1}, {"1.0a", "1.0b", -1},
	} {
		assert.Equal(t, c.want, compareVersions(c.a, c.b), "%s vs %s", c.a, c.b)
	}
}

func TestVersionPolicy(t *testing.T) {
	p, err := newVersionPolicy("a2a", VersionRange{Versions: []string{"0.2", "0.3", "0.5", "1.0"}, Floor: "0.3", Preferred: "1.0"}, DefaultA2A)
	require.NoError(t, err)
	assert.Equal(t, []string{"0.3", "0.5", "1.0"}, p.supported, "versions below the floor are not spoken")

	for _, c := range []struct {
		ask    string
		authed bool
		want   decision
	}{
		{"", true, decision{accepted: true, version: "1.0"}},
		{"1.0", false, decision{accepted: true, version: "1.0"}},
		{"3.0", false, decision{accepted: true, version: "1.0"}},
		{"0.5", false, decision{reason: reasonUnauthPinned}},
		{"0.5", true, decision{accepted: true, version: "0.5"}},
		{"0.9", true, decision{accepted: true, version: "0.5"}},
		{"0.4", true, decision{accepted: true, version: "0.3"}},
		{"0.2", true, decision{reason: reasonBelowFloor, floor: "0.3"}},
		{"0.2", false, decision{reason: reasonBelowFloor, floor: "0.3"}},
		{"x y", true, decision{reason: reasonMalformed}},
	} {
		assert.Equal(t, c.want, p.answer(c.ask, c.authed), "answer(%q, %v)", c.ask, c.authed)
	}
	for _, c := range []struct {
		got  string
		want decision
	}{
		{"0.5", decision{accepted: true, version: "0.5"}},
		{"0.2", decision{reason: reasonBelowFloor, floor: "0.3"}},
		{"0.4", decision{reason: reasonUnsupported}},
		{"2.0", decision{reason: reasonUnsupported}},
		{"", decision{reason: reasonPeerUnnamed}},
	} {
		assert.Equal(t, c.want, p.check(c.got), "check(%q)", c.got)
	}
}

func TestConfigJSONAndValidation(t *testing.T) {
	const doc = `{
	  "tenants": [{"id": "t1", "api_keys": ["k1"]}, {"id": "t2", "api_keys": ["k2", "k2b"]}],
	  "a2a": {"versions": ["0.3", "1.0"], "preferred": "1.0", "floor": "0.3"},
	  "mcp": {"versions": ["2025-03-26", "2025-06-18", "2025-11-25"], "preferred": "2025-11-25", "floor": "2025-03-26"},
	  "limits": {"max_body_bytes": 65536, "outbound_timeout": "5s", "sse_keepalive": "15s",
	             "sse_write_timeout": "10s", "max_subscribers": 256, "max_mcp_sessions": 1024}
	}`
	var c Config
	require.NoError(t, json.Unmarshal([]byte(doc), &c))
	r, err := c.resolve()
	require.NoError(t, err)
	assert.Equal(t, "t2", r.keys["k2b"])
	assert.Equal(t, 5*time.Second, r.outboundTimeout)
	assert.Equal(t, int64(65536), r.maxBody)

	var zero Config
	r, err = zero.resolve()
	require.NoError(t, err)
	assert.Equal(t, "1.0", r.a2a.preferred)
	assert.Equal(t, "0.3", r.a2a.floor)
	assert.Negative(t, compareVersions(r.mcp.floor, r.mcp.preferred), "default floor sits below preferred")

	for name, bad := range map[string]Config{
		"dup key":         {Tenants: []Tenant{{ID: "a", APIKeys: []string{"k"}}, {ID: "b", APIKeys: []string{"k"}}}},
		"dup tenant":      {Tenants: []Tenant{{ID: "a"}, {ID: "a"}}},
		"empty id":        {Tenants: []Tenant{{APIKeys: []string{"k"}}}},
		"floor above":     {A2A: VersionRange{Versions: []string{"0.3", "1.0"}, Floor: "1.0", Preferred: "0.3"}},
		"floor unlisted":  {A2A: VersionRange{Versions: []string{"1.0"}, Floor: "0.3"}},
		"bad version":     {MCP: VersionRange{Versions: []string{"2025 06"}}},
		"tiny body limit": {Limits: Limits{MaxBodyBytes: 10}},
	} {
		_, err := bad.resolve()
		assert.Error(t, err, name)
	}
	var d Duration
	assert.Error(t, json.Unmarshal([]byte(`5`), &d))
}

// Concurrent exchanges all land, once each, in one tenant's stream.
func TestConcurrentExchangesAllDelivered(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	c := a2a.Client{APIKey: "k1"}
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := c.FetchAgentCard(ctx(), f.srv.URL+"/a2a/agent-card.json", "1.0")
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for range n {
		fr, _, _ := next(t, s)
		assert.False(t, seen[fr.ID], "duplicate %s", fr.ID)
		seen[fr.ID] = true
	}
	assert.Len(t, seen, n)
}
