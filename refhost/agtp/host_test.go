package agtp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

var (
	agentA  = strings.Repeat("a", 64)
	agentB  = strings.Repeat("b", 64)
	agentT3 = strings.Repeat("3", 64)
	agentT2 = strings.Repeat("2", 64)
	agentNo = strings.Repeat("0", 64) // no rcns:negotiate granted
	agentOp = strings.Repeat("f", 64) // operator, inspect:all
	hex64   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

const baseTOML = `
server_id = "refhost-test"

[policies.rcns]
enabled = true

[[policies.recipes]]
name = "room-booking"
version = "1"
method = "BOOK"
path = "/room/{id}"
steps = ["rooms.put", "bookings.count"]
success_status = 201

[[policies.recipes]]
name = "vault"
version = "1"
method = "ORDER"
path = "/vault"
steps = ["vault.put"]

[[policies.passthroughs]]
method = "SCHEDULE"
path = "/slot"
primitive = "rooms.put"

[[agents]]
agent_id = "` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `"
name = "alice"
trust_tier = 1
scopes = ["rooms:*", "rcns:negotiate"]

[[agents]]
agent_id = "` + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + `"
trust_tier = 1
scopes = ["rooms:*", "rcns:negotiate"]

[[agents]]
agent_id = "` + "3333333333333333333333333333333333333333333333333333333333333333" + `"
trust_tier = 3
scopes = ["rooms:*", "rcns:negotiate"]

[[agents]]
agent_id = "` + "2222222222222222222222222222222222222222222222222222222222222222" + `"
trust_tier = 2
scopes = ["rooms:*", "rcns:negotiate"]

[[agents]]
agent_id = "` + "0000000000000000000000000000000000000000000000000000000000000000" + `"
trust_tier = 1
scopes = ["rooms:*"]

[[agents]]
agent_id = "` + "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff" + `"
trust_tier = 1
scopes = ["inspect:all", "rcns:negotiate", "rooms:*"]

[[primitives]]
name = "rooms.put"
kind = "record.put"
collection = "rooms"
scopes = ["rooms:write"]

[[primitives]]
name = "rooms.get"
kind = "record.get"
collection = "rooms"
scopes = ["rooms:read"]

[[primitives]]
name = "bookings.count"
kind = "counter.incr"
collection = "bookings"
scopes = ["rooms:write"]

[[primitives]]
name = "bookings.read"
kind = "counter.get"
collection = "bookings"
scopes = ["rooms:read"]

[[primitives]]
name = "vault.put"
kind = "record.put"
scopes = ["vault:write"]

[[endpoints]]
method = "FETCH"
path = "/room"
tier = "A"
primitive = "rooms.get"

[[endpoints]]
method = "REPORT"
path = "/bookings"
primitive = "bookings.read"
`

type fixture struct {
	t    *testing.T
	h    *Host
	dir  string
	cl   *wire.Client
	seam http.Handler
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	return openFixture(t, t.TempDir(), mutate)
}

func openFixture(t *testing.T, dir string, mutate func(*Config)) *fixture {
	t.Helper()
	cfg, err := ParseTOML([]byte(baseTOML))
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := Open(cfg, hostenv.Env{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.ServeAGTP(l)
	cl, err := wire.NewClient(l.Addr().String(), wire.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, h: h, dir: dir, cl: cl, seam: h.Seams()}
	t.Cleanup(f.close)
	return f
}

func (f *fixture) close() {
	f.cl.Close()
	f.h.Close()
}

type res struct {
	*wire.Response
	body map[string]any
}

func (r res) reason() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["reason"].(string)
	return s
}

func (r res) str(path ...string) string {
	var v any = r.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// do sends one request; hdr alternates name, value.
func (f *fixture) do(method, target, agent string, params map[string]any, hdr ...string) res {
	f.t.Helper()
	var body []byte
	if params != nil {
		body, _ = json.Marshal(map[string]any{"method": method, "parameters": params})
	}
	req, err := wire.NewRequest(method, target, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if agent != "" {
		req.Header.Set("Agent-ID", agent)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.cl.Do(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	r := res{Response: resp}
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, &r.body); err != nil {
			f.t.Fatalf("body %q: %v", resp.Body, err)
		}
	}
	if resp.Header.Get("Server-ID") != "refhost-test" || resp.Header.Get("Response-ID") == "" {
		f.t.Fatalf("missing Server-ID/Response-ID: %v", resp.Header)
	}
	return r
}

func (f *fixture) expect(r res, status int, reason string) {
	f.t.Helper()
	if r.Status != status || (reason != "" && r.reason() != reason) {
		f.t.Fatalf("got %d %q (%s), want %d %q", r.Status, r.reason(), r.Body, status, reason)
	}
}

func (f *fixture) seamCall(method, path, body string) map[string]any {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.seam.ServeHTTP(rec, httptest.NewRequest(method, SeamPrefix+path, strings.NewReader(body)))
	if rec.Code != 200 {
		f.t.Fatalf("seam %s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return m
}

// attribution decodes the Attribution-Record JWS payload and checks Audit-ID.
func attribution(t *testing.T, r res) map[string]any {
	t.Helper()
	jws := r.Header.Get("Attribution-Record")
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		t.Fatalf("Attribution-Record %q is not compact JWS", jws)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	_, audit := attributionJWS(p)
	if r.Header.Get("Audit-ID") != audit {
		t.Fatalf("Audit-ID %s is not sha256 of the JWS", r.Header.Get("Audit-ID"))
	}
	return p
}

var rcnsOn = []string{"Allow-RCNS", "true"}

func optimistic(c *Config) { c.Policies.RCNS.Mode = ModeOptimistic }

func TestGateLocks(t *testing.T) {
	f := newFixture(t, nil)
	// Lock 2 closed: unsignaled 404, or 405 where the path exists.
	r := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"})
	f.expect(r, 404, "not-found")
	if r.Header.Has("RCNS-Attempt-Id") {
		t.Fatal("RCNS signaled to a caller that did not opt in")
	}
	r = f.do("BOOK", "/room", agentA, nil, "Allow-RCNS", "yes")
	f.expect(r, 405, "method-not-allowed")
	if r.Header.Get("Allow") != "FETCH" {
		t.Fatalf("Allow: %q", r.Header.Get("Allow"))
	}
	// Lock 3: granted but unclaimed is 262; not granted is 455.
	r = f.do("BOOK", "/room/1", agentA, nil, "Allow-RCNS", "true", "Authority-Scope", "rooms:write, rooms:read")
	f.expect(r, 262, "scope-required")
	if e := r.body["error"].(map[string]any); e["scope"] != "rcns:negotiate" {
		t.Fatalf("262 scope: %v", e)
	}
	f.expect(f.do("BOOK", "/room/1", agentNo, nil, rcnsOn...), 455, "scope-exceeded")
	// Lock 4 at the default min tier 1: tier 2 and 3 refused.
	r = f.do("BOOK", "/room/1", agentT3, nil, rcnsOn...)
	f.expect(r, 464, "trust-tier-insufficient")
	if r.Header.Get("RCNS-Attempt-Id") == "" {
		t.Fatal("464 without RCNS-Attempt-Id")
	}
	f.expect(f.do("BOOK", "/room/1", agentT2, nil, rcnsOn...), 464, "trust-tier-insufficient")
	// INSPECT the refused attempt.
	a := f.do("INSPECT", "/", agentT3, map[string]any{"target": "rcns-attempt", "attempt_id": r.Header.Get("RCNS-Attempt-Id")})
	if a.Status != 200 || a.str("result", "reason") != "trust-tier-insufficient" {
		t.Fatalf("attempt: %s", a.Body)
	}
	// No recipe: composition-impossible. A composed primitive the agent
	// lacks: authority refused before anything runs.
	f.expect(f.do("BOOK", "/hall", agentA, nil, rcnsOn...), 464, "composition-impossible")
	r = f.do("ORDER", "/vault", agentA, nil, rcnsOn...)
	f.expect(r, 455, "scope-exceeded")
	// Unknown method and unknown agent.
	f.expect(f.do("FROBNICATE", "/x", agentA, nil), 459, "method-violation")
	f.expect(f.do("BOOK", "/x", strings.Repeat("9", 64), nil), 403, "unknown-agent")
}

func TestMinTrustTier2(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policies.RCNS.MinTrustTier = 2 })
	f.expect(f.do("BOOK", "/room/1", agentT3, nil, rcnsOn...), 464, "trust-tier-insufficient")
	f.expect(f.do("BOOK", "/room/1", agentT2, nil, rcnsOn...), 461, "")
	f.expect(f.do("BOOK", "/room/2", agentA, nil, rcnsOn...), 461, "")
}

func TestDisabled(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policies.RCNS.Enabled = false })
	r := f.do("BOOK", "/room/1", agentA, nil, rcnsOn...)
	f.expect(r, 464, "rcns-disabled")
	if r.Header.Get("RCNS-Attempt-Id") == "" {
		t.Fatal("no RCNS-Attempt-Id")
	}
	f.expect(f.do("BOOK", "/room/1", agentA, nil), 404, "not-found")
}

func TestConfirmFirst(t *testing.T) {
	f := newFixture(t, nil)
	p := f.do("BOOK", "/room/7", agentA, map[string]any{"id": "7"}, rcnsOn...)
	f.expect(p, 461, "")
	sid := p.str("synthesis_id")
	if sid == "" || p.str("method") != "BOOK" || p.str("path") != "/room/7" || p.str("expires_at") == "" ||
		p.str("recipe_lineage", "recipe_name") != "room-booking" || p.str("recipe_lineage", "recipe_version") != "1" ||
		!hex64.MatchString(p.str("contract_hash")) || p.body["endpoint"] == nil {
		t.Fatalf("461 body: %s", p.Body)
	}
	// Nothing ran yet.
	if r := f.do("REPORT", "/bookings", agentA, nil); r.body["result"].(map[string]any)["value"].(float64) != 0 {
		t.Fatalf("preview executed: %s", r.Body)
	}
	// Another agent presenting it.
	f.expect(f.do("BOOK", "/room/7", agentB, map[string]any{"id": "7"}, "Contract-Synthesized", sid), 464, "contract-not-yours")
	f.expect(f.do("BOOK", "/room/7", agentA, map[string]any{"id": "7"}, "Contract-Synthesized", "syn_nope"), 404, "contract-not-found")
	// Acceptance: re-issue with the header; the gate is skipped, no new contract.
	r := f.do("BOOK", "/room/7", agentA, map[string]any{"id": "7"}, "Contract-Synthesized", sid, "Allow-RCNS", "true")
	f.expect(r, 201, "")
	if r.Header.Get("Contract-Synthesized") != sid || r.Header.Has("RCNS-Attempt-Id") {
		t.Fatalf("headers: %v", r.Header)
	}
	att := attribution(t, r)
	if att["synthesis_id"] != sid || att["contract_hash"] != p.str("contract_hash") || att["negotiation_origin"] != "rcns-gate" {
		t.Fatalf("attribution: %v", att)
	}
	r2 := f.do("BOOK", "/room/7", agentA, map[string]any{"id": "7"}, "Contract-Synthesized", sid)
	if a2 := attribution(t, r2); a2["contract_hash"] != att["contract_hash"] {
		t.Fatal("contract_hash not stable across invocations")
	}
	ds := f.do("DISCOVER", "/contracts", agentA, nil)
	if n := len(ds.body["result"].(map[string]any)["contracts"].([]any)); n != 1 {
		t.Fatalf("DISCOVER /contracts: %d contracts", n)
	}
	// Tier A/B: attribution without the extension fields.
	tb := f.do("FETCH", "/room", agentA, map[string]any{"id": "7"})
	f.expect(tb, 200, "")
	for _, k := range []string{"synthesis_id", "contract_hash", "negotiation_origin"} {
		if _, ok := attribution(t, tb)[k]; ok {
			t.Fatalf("Tier A response carries %s", k)
		}
	}
}

func TestOptimisticAndResolver(t *testing.T) {
	f := newFixture(t, optimistic)
	r := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, rcnsOn...)
	f.expect(r, 201, "")
	sid := r.Header.Get("Contract-Synthesized")
	if sid == "" || attribution(t, r)["synthesis_id"] != sid {
		t.Fatalf("optimistic response: %v", r.Header)
	}
	// The resolver serves the caller's own contract for the pair without a
	// new synthesis, and never another agent's.
	r2 := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"})
	if r2.Status != 201 || r2.Header.Get("Contract-Synthesized") != sid {
		t.Fatalf("resolver: %d %v", r2.Status, r2.Header)
	}
	f.expect(f.do("BOOK", "/room/1", agentB, map[string]any{"id": "1"}), 404, "not-found")
	f.expect(f.do("BOOK", "/room/1", agentB, map[string]any{"id": "1"}, "Synthesis-Id", sid), 464, "contract-not-yours")
	rb := f.do("BOOK", "/room/1", agentB, map[string]any{"id": "1"}, rcnsOn...)
	if rb.Status != 201 || rb.Header.Get("Contract-Synthesized") == sid {
		t.Fatal("agent B resolved agent A's contract")
	}
	// A step failure answers with its status and executes nothing.
	f.expect(f.do("BOOK", "/room/1", agentA, map[string]any{"nokey": true}, "Contract-Synthesized", sid), 400, "missing-parameter")
	if v := f.do("REPORT", "/bookings", agentA, nil).body["result"].(map[string]any)["value"].(float64); v != 3 {
		t.Fatalf("bookings %v, want 3", v)
	}
}

func TestReleasePaths(t *testing.T) {
	f := newFixture(t, optimistic)
	mk := func(agent, id string) string {
		r := f.do("BOOK", "/room/"+id, agent, map[string]any{"id": id}, rcnsOn...)
		f.expect(r, 201, "")
		return r.Header.Get("Contract-Synthesized")
	}
	// SUSPEND by the originator only.
	s1 := mk(agentA, "1")
	f.expect(f.do("SUSPEND", "/", agentB, map[string]any{"synthesis_id": s1}), 403, "not-originator")
	f.expect(f.do("SUSPEND", "/", agentA, map[string]any{"synthesis_id": s1, "reason": "done"}), 200, "")
	f.expect(f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", s1), 464, "contract-revoked")
	ev := f.do("INSPECT", "/", agentA, map[string]any{"target": "lifecycle"})
	evs := ev.body["result"].(map[string]any)["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["type"] != "rcns_release" ||
		evs[0].(map[string]any)["payload"].(map[string]any)["synthesis_id"] != s1 {
		t.Fatalf("lifecycle: %s", ev.Body)
	}
	// REVOKE by the operator.
	s2 := mk(agentA, "2")
	f.expect(f.do("REVOKE", "/", agentB, map[string]any{"target": "contract", "synthesis_id": s2}), 403, "not-originator")
	f.expect(f.do("REVOKE", "/", agentOp, map[string]any{"target": "contract", "synthesis_id": s2, "reason": "x"}), 200, "")
	f.expect(f.do("BOOK", "/room/2", agentA, map[string]any{"id": "2"}, "Contract-Synthesized", s2), 464, "contract-revoked")
	// TTL.
	s3 := mk(agentA, "3")
	f.seamCall("POST", "clock/advance", `{"seconds": 3601}`)
	f.expect(f.do("BOOK", "/room/3", agentA, map[string]any{"id": "3"}, "Contract-Synthesized", s3), 464, "contract-revoked")
	evs = f.seamCall("GET", "events?type=rcns_release&agent_id="+agentA, "")["events"].([]any)
	reasons := []string{}
	for _, e := range evs {
		reasons = append(reasons, e.(map[string]any)["payload"].(map[string]any)["reason"].(string))
	}
	if strings.Join(reasons, ",") != "caller-release,revoked,ttl-expired" {
		t.Fatalf("release reasons %v", reasons)
	}
}

func TestStaleSweep(t *testing.T) {
	f := newFixture(t, optimistic)
	r := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, rcnsOn...)
	old := r.Header.Get("Contract-Synthesized")
	pt := f.do("SCHEDULE", "/slot", agentA, map[string]any{"id": "s"}, rcnsOn...)
	f.expect(pt, 200, "")
	v := f.do("ORDER", "/vault", agentOp, map[string]any{"id": "v"}, rcnsOn...)
	f.expect(v, 455, "scope-exceeded") // op lacks vault:write
	f.seamCall("PUT", "recipes/room-booking", `{"version":"2","method":"BOOK","path":"/room/{id}","composed_of":["rooms.put"],"success_status":202}`)

	// The old contract keeps its captured version; a new synthesis gets v2.
	r = f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", old)
	f.expect(r, 201, "")
	ins := f.do("INSPECT", "/", agentA, map[string]any{"target": "contract", "synthesis_id": old})
	if ins.str("result", "recipe_lineage", "recipe_version") != "1" {
		t.Fatalf("captured version lost: %s", ins.Body)
	}
	nb := f.do("BOOK", "/room/9", agentB, map[string]any{"id": "9"}, rcnsOn...)
	f.expect(nb, 202, "")
	newer := nb.Header.Get("Contract-Synthesized")

	// Agents without inspect:all cannot sweep.
	f.expect(f.do("REVOKE", "/", agentA, map[string]any{"target": "stale-contracts"}), 455, "scope-exceeded")
	// Default mode grandfather: reported, not evicted.
	g := f.do("REVOKE", "/", agentOp, map[string]any{"target": "stale-contracts", "actor": "ops-1"})
	f.expect(g, 200, "")
	res := g.body["result"].(map[string]any)
	if res["mode"] != "grandfather" || res["counts"].(map[string]any)["grandfathered"].(float64) != 1 ||
		res["counts"].(map[string]any)["unchanged"].(float64) != 1 || res["counts"].(map[string]any)["skipped"].(float64) != 1 {
		t.Fatalf("grandfather sweep: %s", g.Body)
	}
	f.expect(f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", old), 201, "")

	// Invalidate: evicted, rcns_release with the actor, then 404.
	iv := f.do("REVOKE", "/", agentOp, map[string]any{"target": "stale-contracts", "mode": "invalidate", "actor": "ops-1"})
	f.expect(iv, 200, "")
	ex := iv.body["result"].(map[string]any)["examined"].([]any)
	disp := map[string]string{}
	for _, e := range ex {
		disp[e.(map[string]any)["synthesis_id"].(string)] = e.(map[string]any)["disposition"].(string)
	}
	if disp[old] != "evicted" || disp[newer] != "unchanged" || len(disp) != 2 {
		t.Fatalf("invalidate: %s", iv.Body)
	}
	f.expect(f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", old), 404, "contract-not-found")
	f.expect(f.do("SCHEDULE", "/slot", agentA, map[string]any{"id": "s"}, "Contract-Synthesized", pt.Header.Get("Contract-Synthesized")), 200, "")
	evs := f.seamCall("GET", "events?type=rcns_release&agent_id="+agentA, "")["events"].([]any)
	p := evs[len(evs)-1].(map[string]any)["payload"].(map[string]any)
	if p["reason"] != "policy-change-invalidation" || p["actor"] != "ops-1" || p["synthesis_id"] != old {
		t.Fatalf("event: %v", p)
	}

	// A removed recipe is drift with current_version null.
	f.seamCall("DELETE", "recipes/room-booking", "")
	sw := f.seamCall("POST", "sweep", `{"mode":"grandfather","actor":"ops-2"}`)
	e := sw["examined"].([]any)[0].(map[string]any)
	if e["synthesis_id"] != newer || e["current_version"] != nil || e["disposition"] != "grandfathered" {
		t.Fatalf("removed recipe: %v", sw)
	}
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policies.RCNS.RateLimitPerMinute = 3 })
	var sid string
	for i := 0; i < 3; i++ {
		r := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, rcnsOn...)
		f.expect(r, 461, "")
		sid = r.str("synthesis_id")
	}
	r := f.do("BOOK", "/room/1", agentA, nil, rcnsOn...)
	f.expect(r, 429, "rate-limited")
	if r.body["scope"] != "rcns" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("429: %s %v", r.Body, r.Header)
	}
	// Contract invocations and other agents are outside the ceiling.
	f.expect(f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", sid), 201, "")
	f.expect(f.do("BOOK", "/room/1", agentB, nil, rcnsOn...), 461, "")
	f.seamCall("POST", "clock/advance", `{"seconds": 61}`)
	f.expect(f.do("BOOK", "/room/2", agentA, nil, rcnsOn...), 461, "")
}

func TestDefaultRateLimitIsTen(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 10; i++ {
		f.expect(f.do("BOOK", "/room/1", agentA, nil, rcnsOn...), 461, "")
	}
	f.expect(f.do("BOOK", "/room/1", agentA, nil, rcnsOn...), 429, "rate-limited")
}

func TestIdempotency(t *testing.T) {
	f := newFixture(t, nil)
	a1 := f.do("BOOK", "/room/1", agentA, nil, "Allow-RCNS", "true", "Idempotency-Key", "k1")
	a2 := f.do("BOOK", "/room/1", agentA, nil, "Allow-RCNS", "true", "Idempotency-Key", "k1")
	if a1.Status != 461 || a2.str("synthesis_id") != a1.str("synthesis_id") || a2.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %s / %s", a1.Body, a2.Body)
	}
	b1 := f.do("BOOK", "/room/1", agentB, nil, "Allow-RCNS", "true", "Idempotency-Key", "k1")
	if b1.Status != 461 || b1.str("synthesis_id") == a1.str("synthesis_id") || b1.Header.Has("Idempotent-Replay") {
		t.Fatalf("cross-agent: %s", b1.Body)
	}
	f.expect(f.do("BOOK", "/room/2", agentA, nil, "Allow-RCNS", "true", "Idempotency-Key", "k1"), 400, "idempotency-key-mismatch")
}

func TestContractsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	f := openFixture(t, dir, optimistic)
	sid := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, rcnsOn...).Header.Get("Contract-Synthesized")
	f.close()
	g := openFixture(t, dir, optimistic)
	r := g.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, "Contract-Synthesized", sid)
	f.expect(r, 201, "")
	g.expect(g.do("BOOK", "/room/1", agentB, nil, "Contract-Synthesized", sid), 464, "contract-not-yours")
}

func TestConcurrentInvocations(t *testing.T) {
	f := newFixture(t, optimistic)
	sid := f.do("BOOK", "/room/1", agentA, map[string]any{"id": "1"}, rcnsOn...).Header.Get("Contract-Synthesized")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, _ := wire.NewClient(f.cl.Addr(), wire.ClientOptions{})
			defer cl.Close()
			req, _ := wire.NewRequest("BOOK", "/room/1", []byte(`{"parameters":{"id":"1"}}`))
			req.Header.Set("Agent-ID", agentA)
			req.Header.Set("Contract-Synthesized", sid)
			resp, err := cl.Do(context.Background(), req)
			if err == nil && resp.Status != 201 {
				err = &wire.FrameError{Status: resp.Status, Msg: string(resp.Body)}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := f.do("REPORT", "/bookings", agentA, nil).body["result"].(map[string]any)["value"].(float64); v != 21 {
		t.Fatalf("bookings %v, want 21", v)
	}
}
