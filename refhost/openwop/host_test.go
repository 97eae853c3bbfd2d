package openwop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/refhost/hostenv"
	parleyschemas "github.com/parley-conformance/parley/schemas"
)

var (
	schemaOnce               sync.Once
	envelopeSchema, payloadS *jsonschema.Schema
	schemaErr                error
)

func schemas(t *testing.T) (*jsonschema.Schema, *jsonschema.Schema) {
	t.Helper()
	schemaOnce.Do(func() {
		envelopeSchema, schemaErr = parleyschemas.Compile("openwop/host-event.envelope.json")
		if schemaErr == nil {
			payloadS, schemaErr = parleyschemas.Compile("openwop/negotiation-decided.payload.json")
		}
	})
	require.NoError(t, schemaErr)
	return envelopeSchema, payloadS
}

// validate checks raw JSON against a schema and decodes it into a map.
func validate(t *testing.T, s *jsonschema.Schema, raw []byte) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	require.NoError(t, err)
	require.NoError(t, s.Validate(v), "schema violation in %s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

var testConfig = Config{
	Tenants: []Tenant{{ID: "t1", APIKeys: []string{"k1"}}, {ID: "t2", APIKeys: []string{"k2"}}},
	Limits:  Limits{OutboundTimeout: Duration(2 * time.Second), SSEKeepAlive: Duration(50 * time.Millisecond)},
}

type fixture struct {
	host *Host
	srv  *httptest.Server
	dir  string
}

func start(t *testing.T, cfg Config, dir string) *fixture {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	h, err := Open(cfg, hostenv.Env{DataDir: dir})
	require.NoError(t, err)
	// Mount the way a multi-family assembler does: only the advertised
	// paths, and the seams at their fixed prefix. A short ReadTimeout proves
	// long-lived streams are not cut by it.
	mux := http.NewServeMux()
	for _, p := range Paths {
		mux.Handle(p, h.Handler())
	}
	mux.Handle(SeamPrefix, h.Seams())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	f := &fixture{host: h, srv: srv, dir: dir}
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) stop() {
	f.srv.CloseClientConnections()
	f.srv.Close()
	_ = f.host.Close()
}

func (f *fixture) dial(t *testing.T, key, last string) *sse.Stream {
	t.Helper()
	s, err := sse.Dial(context.Background(), f.srv.URL+"/host/events", sse.Options{APIKey: key, LastEventID: last})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// next reads the next negotiation.decided frame, checks the envelope and
// payload against the schemas and the frame invariants, and returns both.
func next(t *testing.T, s *sse.Stream) (sse.Frame, map[string]any, map[string]any) {
	t.Helper()
	env, pay := schemas(t)
	f, err := s.Next(3 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "negotiation.decided", f.Event)
	require.True(t, f.HasID, "durable frames carry an id")
	e := validate(t, env, []byte(f.Data))
	require.Equal(t, f.ID, e["eventId"])
	require.Equal(t, "durable", e["delivery"])
	require.NotContains(t, e, "runId")
	raw, _ := json.Marshal(e["payload"])
	return f, e, validate(t, pay, raw)
}

func ctx() context.Context { return context.Background() }

func TestDiscoveryAdvertisesFacetsAndHostEventType(t *testing.T) {
	f := start(t, testConfig, "")
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/.well-known/openwop", nil)
	req.Host = "host.example:8443"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var doc struct {
		A2A struct {
			AgentCardURL     string   `json:"agentCardUrl"`
			Versions         []string `json:"versions"`
			PreferredVersion string   `json:"preferredVersion"`
			Floor            string   `json:"floor"`
		} `json:"a2a"`
		MCP struct {
			ServerURLs  []string `json:"serverUrls"`
			ServerMount string   `json:"serverMount"`
		} `json:"mcp"`
		HostEvents struct {
			Types []struct{ Type, Delivery string } `json:"types"`
		} `json:"hostEvents"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	assert.Equal(t, "http://host.example:8443/a2a/agent-card.json", doc.A2A.AgentCardURL)
	assert.Equal(t, []string{"http://host.example:8443/mcp"}, doc.MCP.ServerURLs)
	assert.Equal(t, "/mcp", doc.MCP.ServerMount)
	assert.Equal(t, "1.0", doc.A2A.PreferredVersion)
	assert.Equal(t, "0.3", doc.A2A.Floor)
	assert.Contains(t, doc.HostEvents.Types, struct{ Type, Delivery string }{"negotiation.decided", "durable"})

	req.Host = "bad/host"
	resp2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp2.Body.Close()
	assert.Equal(t, 400, resp2.StatusCode)
}

func TestInboundA2ARecordsRequested(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	c := a2a.Client{APIKey: "k1"}
	card := f.srv.URL + "/a2a/agent-card.json"
	cases := []struct {
		ask, version, outcome, reason, floor string
		status                               int
	}{
		{"1.0", "1.0", "accepted", "", "", 200},
		{"0.3", "0.3", "accepted", "", "", 200},
		{"0.5", "0.3", "accepted", "", "", 200}, // downgrade between floor and preferred
		{"2.0", "1.0", "accepted", "", "", 200}, // downgrade from above preferred
		{"0.2", "", "refused", "below-floor", "0.3", 400},
	}
	for _, tc := range cases {
		resp, err := c.FetchAgentCard(ctx(), card, tc.ask)
		require.NoError(t, err)
		require.Equal(t, tc.status, resp.Status, tc.ask)
		assert.Equal(t, tc.version, resp.Version)
		_, _, p := next(t, s)
		assert.Equal(t, "a2a", p["protocol"])
		assert.Equal(t, tc.ask, p["requested"], "requested must equal the version the caller named")
		assert.Equal(t, tc.outcome, p["outcome"])
		if tc.version != "" {
			assert.Equal(t, tc.version, p["version"])
		} else {
			assert.NotContains(t, p, "version")
		}
		if tc.reason != "" {
			assert.Equal(t, tc.reason, p["reason"])
			assert.Equal(t, tc.floor, p["floor"])
		}
		assert.NotContains(t, p, "peerDigest")
	}

	// The JSON-RPC endpoint negotiates per request too.
	resp, err := c.SendMessage(ctx(), f.srv.URL+"/a2a", "0.3", "hi")
	require.NoError(t, err)
	require.Equal(t, 200, resp.Status)
	assert.Equal(t, "0.3", resp.Version)
	assert.Contains(t, resp.JSON, "result")
	_, _, p := next(t, s)
	assert.Equal(t, "0.3", p["requested"])

	resp, err = c.SendMessage(ctx(), f.srv.URL+"/a2a", "0.1", "hi")
	require.NoError(t, err)
	assert.Equal(t, float64(-32009), resp.JSON["error"].(map[string]any)["code"])
	_, _, p = next(t, s)
	assert.Equal(t, "below-floor", p["reason"])

	// No version named: the preferred version, and no requested field.
	resp, err = c.FetchAgentCard(ctx(), card, "")
	require.NoError(t, err)
	assert.Equal(t, "1.0", resp.Version)
	_, _, p = next(t, s)
	assert.NotContains(t, p, "requested")

	// Conflicting repeated headers are refused, not guessed at.
	req, _ := http.NewRequest(http.MethodGet, card, nil)
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Add("A2A-Version", "1.0")
	req.Header.Add("A2A-Version", "0.3")
	r2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	assert.Equal(t, 400, r2.StatusCode)
	_, _, p = next(t, s)
	assert.Equal(t, "conflicting-versions", p["reason"])
}

func TestInboundMCPRecordsRequested(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	c := mcp.Client{APIKey: "k1", Workspace: "ws-1"}
	cases := []struct{ ask, version, reason string }{
		{"2025-11-25", "2025-11-25", ""},
		{"2025-06-18", "2025-06-18", ""},
		{"2025-05-01", "2025-03-26", ""},
		{"2026-01-01", "2025-11-25", ""},
		{"2024-11-05", "", "below-floor"},
	}
	for _, tc := range cases {
		res, err := c.Initialize(ctx(), f.srv.URL+"/mcp", tc.ask)
		require.NoError(t, err)
		require.Equal(t, 200, res.Status)
		assert.Equal(t, tc.version, res.ProtocolVersion)
		_, e, p := next(t, s)
		assert.Equal(t, "ws-1", e["workspaceId"])
		assert.Equal(t, "mcp", p["protocol"])
		assert.Equal(t, tc.ask, p["requested"])
		if tc.reason == "" {
			assert.Equal(t, "accepted", p["outcome"])
			assert.Equal(t, tc.version, p["version"])
			assert.NotEmpty(t, res.SessionID)
		} else {
			require.NotNil(t, res.Error)
			assert.Equal(t, -32602, res.Error.Code)
			assert.Equal(t, "refused", p["outcome"])
			assert.Equal(t, tc.reason, p["reason"])
			assert.Equal(t, "2025-03-26", p["floor"])
		}
	}

	// Params alone name the revision too.
	c.OmitVersionHeader = true
	res, err := c.Initialize(ctx(), f.srv.URL+"/mcp", "2025-06-18")
	require.NoError(t, err)
	assert.Equal(t, "2025-06-18", res.ProtocolVersion)
	_, _, p := next(t, s)
	assert.Equal(t, "2025-06-18", p["requested"])

	// The session speaks the negotiated revision; another one is rejected.
	call := func(version, session string) int {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", version)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 200, call("2025-06-18", res.SessionID))
	assert.Equal(t, 400, call("2025-11-25", res.SessionID))
	assert.Equal(t, 404, call("2025-06-18", "nope"))

	// On initialize the revision asked for is params.protocolVersion; a
	// header that says something else does not change the negotiation.
	for _, tc := range []struct{ params, header, version, outcome string }{
		{"2025-06-18", "2025-11-25", "2025-06-18", "accepted"},
		{"2025-11-25", "2024-11-05", "2025-11-25", "accepted"},
		{"2024-11-05", "2025-11-25", "", "refused"},
	} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+tc.params+`"}}`))
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("MCP-Protocol-Version", tc.header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var answer struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
		resp.Body.Close()
		assert.Equal(t, tc.version, answer.Result.ProtocolVersion)
		_, _, p = next(t, s)
		assert.Equal(t, tc.outcome, p["outcome"])
		assert.Equal(t, tc.params, p["requested"])
	}
}

// B.4: an unauthenticated exchange is recorded, with no tenant, and reaches
// no subscriber; it is never given less than the preferred version.
func TestUnauthenticatedExchangeRecordedButDeliveredToNoOne(t *testing.T) {
	f := start(t, testConfig, "")
	s1 := f.dial(t, "k1", "")
	s2 := f.dial(t, "k2", "")
	anon := a2a.Client{}
	card := f.srv.URL + "/a2a/agent-card.json"

	resp, err := anon.FetchAgentCard(ctx(), card, "1.0")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.Status)
	resp, err = anon.FetchAgentCard(ctx(), card, "0.5")
	require.NoError(t, err)
	assert.Equal(t, 400, resp.Status, "an anonymous caller is not downgraded below preferred")
	assert.Equal(t, "unauthenticated-below-preferred", resp.JSON["reason"])
	res, err := (&mcp.Client{}).Initialize(ctx(), f.srv.URL+"/mcp", "2025-11-25")
	require.NoError(t, err)
	assert.Equal(t, "2025-11-25", res.ProtocolVersion)

	n, err := f.host.store.unattributedCount(ctx())
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "every anonymous negotiation is recorded")

	// Barrier: one attributed record per tenant. Each stream's first frame
	// must be its own, proving the anonymous records were skipped.
	_, err = (&a2a.Client{APIKey: "k1"}).FetchAgentCard(ctx(), card, "0.3")
	require.NoError(t, err)
	_, err = (&a2a.Client{APIKey: "k2"}).FetchAgentCard(ctx(), card, "1.0")
	require.NoError(t, err)
	_, _, p := next(t, s1)
	assert.Equal(t, "0.3", p["requested"])
	_, _, p = next(t, s2)
	assert.Equal(t, "1.0", p["requested"])
	_, err = s1.Until(200*time.Millisecond, func(sse.Frame) bool { return true })
	assert.ErrorIs(t, err, sse.ErrTimeout)
	_, err = s2.Until(200*time.Millisecond, func(sse.Frame) bool { return true })
	assert.ErrorIs(t, err, sse.ErrTimeout)

	// A wrong key is not an anonymous caller: 401, and nothing recorded.
	resp, err = (&a2a.Client{APIKey: "wrong"}).FetchAgentCard(ctx(), card, "1.0")
	require.NoError(t, err)
	assert.Equal(t, 401, resp.Status)
	n, _ = f.host.store.unattributedCount(ctx())
	assert.Equal(t, int64(3), n)

	// And the stream itself needs a tenant.
	_, err = sse.Dial(ctx(), f.srv.URL+"/host/events", sse.Options{})
	var se *sse.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 401, se.Status)
}

func TestEventsSurviveRestartAndResume(t *testing.T) {
	dir := t.TempDir()
	f := start(t, testConfig, dir)
	c := a2a.Client{APIKey: "k1"}
	card := f.srv.URL + "/a2a/agent-card.json"
	s := f.dial(t, "k1", "")
	var ids []string
	for _, v := range []string{"1.0", "0.3", "0.2"} {
		_, err := c.FetchAgentCard(ctx(), card, v)
		require.NoError(t, err)
		fr, _, _ := next(t, s)
		ids = append(ids, fr.ID)
	}
	f.stop()

	g := start(t, testConfig, dir)
	// Resume after the first: the other two, with the same ids.
	s = g.dial(t, "k1", ids[0])
	for _, want := range ids[1:] {
		fr, _, _ := next(t, s)
		assert.Equal(t, want, fr.ID)
	}
	// Live events continue after the replay.
	_, err := c.FetchAgentCard(ctx(), g.srv.URL+"/a2a/agent-card.json", "1.0")
	require.NoError(t, err)
	fr, _, _ := next(t, s)
	assert.NotContains(t, ids, fr.ID)

	// Another tenant's id is unknown to this tenant: a full replay of its own
	// (empty) log, never a peek at t1's position.
	s2 := g.dial(t, "k2", ids[0])
	_, err = s2.Next(200 * time.Millisecond)
	assert.ErrorIs(t, err, sse.ErrTimeout)
	assert.Positive(t, s2.Comments(), "keep-alive comments flow while idle")
}

func pollRun(t *testing.T, f *fixture, key, runID string) []map[string]any {
	t.Helper()
	_, pay := schemas(t)
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/runs/"+runID+"/events/poll", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var body struct {
		Events []struct {
			RunID   string          `json:"runId"`
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	var out []map[string]any
	for _, e := range body.Events {
		assert.Equal(t, runID, e.RunID)
		assert.Equal(t, "negotiation.decided", e.Type)
		out = append(out, validate(t, pay, e.Payload))
	}
	return out
}

func invoke(t *testing.T, f *fixture, key, protocol string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/conformance/seams/sample/"+protocol+"/invoke", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestOutboundA2ASeam(t *testing.T) {
	f := start(t, testConfig, "")
	cases := []struct {
		name    string
		peer    a2a.Config
		ask     string
		status  int
		version string
		reason  string
		contact bool
	}{
		{"accept", a2a.Config{Versions: []string{"1.0"}}, "1.0", 200, "1.0", "", true},
		{"default request is preferred", a2a.Config{Versions: []string{"0.3", "1.0"}}, "", 200, "1.0", "", true},
		{"downgrade", a2a.Config{Versions: []string{"0.3"}}, "1.0", 200, "0.3", "", true},
		{"peer below floor", a2a.Config{Versions: []string{"0.2"}}, "1.0", 400, "", "below-floor", true},
		{"peer refuses", a2a.Config{Versions: []string{"0.3"}, RefuseUnsupported: true}, "1.0", 400, "", "peer-refused", true},
		{"host will not ask below its floor", a2a.Config{Versions: []string{"0.2"}}, "0.2", 400, "", "below-floor", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := a2a.Start(tc.peer)
			defer p.Close()
			body := map[string]any{"peerUrl": p.URL()}
			if tc.ask != "" {
				body["requestVersion"] = tc.ask
			}
			status, out := invoke(t, f, "k1", "a2a", body)
			require.Equal(t, tc.status, status, out)
			assert.Equal(t, p.Digest(), out["peerDigest"])
			ask := tc.ask
			if ask == "" {
				ask = "1.0"
			}
			if tc.contact {
				got, named := p.LastRequested()
				assert.True(t, named)
				assert.Equal(t, ask, got)
			} else {
				assert.Empty(t, p.Received())
			}
			evs := pollRun(t, f, "k1", out["runId"].(string))
			require.Len(t, evs, 1)
			e := evs[0]
			assert.Equal(t, ask, e["requested"])
			assert.Equal(t, p.Digest(), e["peerDigest"])
			if tc.status == 200 {
				assert.Equal(t, tc.version, out["negotiatedVersion"])
				assert.Equal(t, "a2a", out["protocol"])
				assert.Equal(t, "accepted", e["outcome"])
				assert.Equal(t, tc.version, e["version"])
			} else {
				assert.Equal(t, "interop_version_unsupported", out["error"])
				assert.Equal(t, "refused", e["outcome"])
				assert.Equal(t, tc.reason, e["reason"])
			}
		})
	}
	// Another tenant cannot read the run.
	p := a2a.Start(a2a.Config{})
	defer p.Close()
	_, out := invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": p.URL()})
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/runs/"+out["runId"].(string)+"/events/poll", nil)
	req.Header.Set("Authorization", "Bearer k2")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}

func TestOutboundMCPSeam(t *testing.T) {
	f := start(t, testConfig, "")
	cases := []struct {
		name    string
		srv     mcp.Config
		ask     string
		status  int
		version string
		reason  string
	}{
		{"accept", mcp.Config{Versions: []string{"2025-06-18"}}, "2025-06-18", 200, "2025-06-18", ""},
		{"accept over sse", mcp.Config{Versions: []string{"2025-11-25"}, EventStream: true}, "2025-11-25", 200, "2025-11-25", ""},
		{"downgrade", mcp.Config{Versions: []string{"2025-03-26"}}, "2025-11-25", 200, "2025-03-26", ""},
		{"server below floor", mcp.Config{Versions: []string{"2024-11-05"}}, "2025-11-25", 400, "", "below-floor"},
		{"server refuses", mcp.Config{Versions: []string{"2025-03-26"}, RefuseUnsupported: true}, "2025-11-25", 400, "", "peer-refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mcp.Start(tc.srv)
			defer s.Close()
			status, out := invoke(t, f, "k1", "mcp", map[string]any{"serverUrl": s.URL(), "requestVersion": tc.ask})
			require.Equal(t, tc.status, status, out)
			init, ok := s.LastInitialize()
			require.True(t, ok)
			assert.Equal(t, tc.ask, init.Requested)
			assert.Equal(t, tc.ask, init.Header)
			evs := pollRun(t, f, "k1", out["runId"].(string))
			require.Len(t, evs, 1)
			assert.Equal(t, tc.ask, evs[0]["requested"])
			assert.Equal(t, s.Digest(), evs[0]["peerDigest"])
			if tc.status == 200 {
				assert.Equal(t, tc.version, out["negotiatedVersion"])
				assert.Equal(t, tc.version, evs[0]["version"])
				// The host completed the handshake in the negotiated revision.
				rec := s.Received()
				last := rec[len(rec)-1]
				assert.Equal(t, "notifications/initialized", last.Method)
				assert.Equal(t, tc.version, last.Header)
			} else {
				assert.Equal(t, tc.reason, evs[0]["reason"])
				if tc.reason == "below-floor" {
					assert.Equal(t, "2025-03-26", evs[0]["floor"])
				}
			}
		})
	}
}

func TestSeamsRejectBadInput(t *testing.T) {
	f := start(t, testConfig, "")
	status, _ := invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": "ftp://x"})
	assert.Equal(t, 400, status)
	status, _ = invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": "http://127.0.0.1:1", "requestVersion": "1.0\nx"})
	assert.Equal(t, 400, status)
	status, _ = invoke(t, f, "nokey", "mcp", map[string]any{"serverUrl": "http://127.0.0.1:1"})
	assert.Equal(t, 401, status)
	// An unreachable peer is recorded as such and answered 502.
	status, out := invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": "http://127.0.0.1:1"})
	assert.Equal(t, 502, status)
	evs := pollRun(t, f, "k1", out["runId"].(string))
	assert.Equal(t, "peer-unreachable", evs[0]["reason"])
}

// A hostile peer (huge body, or no answer) costs the host a bounded read and
// a deadline, not a hang.
func TestHostilePeerIsBounded(t *testing.T) {
	cfg := testConfig
	cfg.Limits.MaxBodyBytes = 4096
	cfg.Limits.OutboundTimeout = Duration(300 * time.Millisecond)
	f := start(t, cfg, "")
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("A2A-Version", "1.0")
		_, _ = io.WriteString(w, `{"protocolVersion":"1.0","pad":"`+strings.Repeat("x", 10000)+`"}`)
	}))
	defer huge.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	junk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("A2A-Version", "1.0 <b>")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer junk.Close()

	status, _ := invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": huge.URL})
	assert.Equal(t, 502, status)
	start := time.Now()
	status, _ = invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": slow.URL})
	assert.Equal(t, 502, status)
	assert.Less(t, time.Since(start), 2*time.Second)
	status, out := invoke(t, f, "k1", "a2a", map[string]any{"peerUrl": junk.URL})
	assert.Equal(t, 400, status)
	evs := pollRun(t, f, "k1", out["runId"].(string))
	assert.Equal(t, "malformed-version", evs[0]["reason"])

	// Inbound bodies are bounded too.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(`{"pad":"`+strings.Repeat("x", 10000)+`"}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 413, resp.StatusCode)
}

func TestCloseEndsStreams(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	done := make(chan struct{})
	go func() { _ = f.host.Close(); close(done) }()
	// Close that waited on the stream would wait forever: the bounds only
	// name the failure, so they are far beyond any machine's slowness.
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while a stream was open")
	}
	_, err := s.Until(30*time.Second, func(fr sse.Frame) bool { return false })
	assert.ErrorIs(t, err, io.EOF)
}

func TestStreamOutlivesServerReadTimeout(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	time.Sleep(700 * time.Millisecond) // more than twice the server's ReadTimeout
	_, err := (&a2a.Client{APIKey: "k1"}).FetchAgentCard(ctx(), f.srv.URL+"/a2a/agent-card.json", "1.0")
	require.NoError(t, err)
	_, _, p := next(t, s)
	assert.Equal(t, "1.0", p["requested"])
}

func TestMCPRejectsForeignOrigin(t *testing.T) {
	f := start(t, testConfig, "")
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`))
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode)
	n, _ := f.host.store.unattributedCount(ctx())
	assert.Zero(t, n)
}

// A graceful stop of the server does not wait on open event streams: they
// end between frames, so Shutdown returns before any deadline (a host that
// kept them would have Shutdown wait out its context and fail here).
func TestServerShutdownEndsStreams(t *testing.T) {
	f := start(t, testConfig, "")
	s := f.dial(t, "k1", "")
	_, err := (&a2a.Client{APIKey: "k1"}).FetchAgentCard(ctx(), f.srv.URL+"/a2a/agent-card.json", "1.0")
	require.NoError(t, err)
	next(t, s)
	sctx, cancel := context.WithTimeout(ctx(), 30*time.Second)
	defer cancel()
	require.NoError(t, f.srv.Config.Shutdown(sctx))
	_, err = s.Until(5*time.Second, func(fr sse.Frame) bool { return false })
	assert.ErrorIs(t, err, io.EOF)
}
