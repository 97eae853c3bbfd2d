package agtp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// Host is a running AGTP host. It is safe for concurrent use.
type Host struct {
	cfg     Config // normalized
	env     hostenv.Env
	log     *slog.Logger
	db      *sql.DB
	agents  map[string]*Agent
	prims   map[string]Primitive
	eps     map[string]Endpoint // "METHOD /path"
	byPath  map[string][]string // path -> methods exposed there
	catalog map[string]bool
	refused []pairRule // policies.propose.refused
	review  []pairRule // policies.propose.review

	recMu   sync.RWMutex
	recipes []Recipe // current policy; the seams may edit it

	clockMu sync.Mutex
	offset  time.Duration
	// expiryHeld stops the expiry pass (the janitor's, and the one a sweep
	// runs first) while the clock seam holds it; the request path still
	// refuses a contract past its expires_at.
	expiryHeld bool

	rl   *rateLimiter
	idem keyedMutex

	srvMu   sync.Mutex
	servers []*wire.Server
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// Open validates cfg, opens (or creates) the contract store under
// env.DataDir and starts the TTL janitor.
func Open(cfg Config, env hostenv.Env) (*Host, error) {
	n, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	db, err := openDB(env.DataDir)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: n, env: env, log: env.Log().With("family", "agtp"), db: db,
		agents: map[string]*Agent{}, prims: map[string]Primitive{}, eps: map[string]Endpoint{},
		byPath: map[string][]string{}, catalog: n.catalog(), recipes: n.Policies.Recipes,
		rl: newRateLimiter(n.Policies.RCNS.RateLimitPerMinute), stop: make(chan struct{}), done: make(chan struct{})}
	h.refused, _ = parsePairRules("refused", h.catalog, n.Policies.Propose.Refused)
	h.review, _ = parsePairRules("review", h.catalog, n.Policies.Propose.Review)
	for i := range n.Agents {
		h.agents[n.Agents[i].AgentID] = &n.Agents[i]
	}
	for _, p := range n.Primitives {
		h.prims[p.Name] = p
	}
	for _, e := range n.Endpoints {
		h.eps[e.Method+" "+e.Path] = e
		h.byPath[e.Path] = append(h.byPath[e.Path], e.Method)
	}
	for _, rc := range n.Policies.Recipes {
		for _, st := range rc.Steps {
			if _, ok := h.prims[st]; !ok {
				h.log.Warn("agtp: a recipe composes a primitive that is not registered; its syntheses will fail (464 synthesis-error)",
					"recipe", rc.Name, "version", rc.Version, "primitive", st)
			}
		}
	}
	if n.Policies.RCNS.Enabled {
		h.log.Info("agtp: RCNS enabled", "mode", n.Policies.RCNS.Mode, "min_trust_tier", n.Policies.RCNS.MinTrustTier,
			"rate_limit_per_minute", n.Policies.RCNS.RateLimitPerMinute)
	}
	// No AGTP session of an earlier process is alive: its session-scoped
	// syntheses end now.
	if err := h.endSession(context.Background(), ""); err != nil {
		db.Close()
		return nil, err
	}
	go h.janitor()
	return h, nil
}

// ServeAGTP serves AGTP/1.0 on l until Close. The caller wraps l in TLS 1.3;
// plaintext connections are refused unless both ends are loopback.
func (h *Host) ServeAGTP(l net.Listener) error {
	h.srvMu.Lock()
	if h.closed {
		h.srvMu.Unlock()
		return wire.ErrServerClosed
	}
	// A session lives on one connection; connection ids are unique per
	// server, so each server gets a prefix of its own.
	x := handler{h: h, prefix: "srv_" + uuid.NewString() + "/"}
	s := wire.NewServer(x, wire.ServerOptions{Logger: h.log, ServerID: h.cfg.ServerID, ConnClosed: x.closed})
	h.servers = append(h.servers, s)
	h.srvMu.Unlock()
	return s.Serve(l)
}

// Close stops serving, the janitor and the store.
func (h *Host) Close() error {
	h.srvMu.Lock()
	if h.closed {
		h.srvMu.Unlock()
		return nil
	}
	h.closed = true
	servers := h.servers
	h.srvMu.Unlock()
	for _, s := range servers {
		s.Close()
	}
	close(h.stop)
	<-h.done
	return h.db.Close()
}

func (h *Host) now() time.Time {
	h.clockMu.Lock()
	off := h.offset
	h.clockMu.Unlock()
	return h.env.Clock().Add(off).UTC()
}

func (h *Host) janitor() {
	defer close(h.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			if err := h.expireDue(context.Background()); err != nil {
				h.log.Error("agtp: TTL janitor", "err", err)
			}
			if err := h.expireReviews(context.Background()); err != nil {
				h.log.Error("agtp: review janitor", "err", err)
			}
		}
	}
}

// expireDue releases every live contract past its expiry (emitting
// rcns_release reason ttl-expired) and forgets old tombstones and cached
// idempotent responses.
func (h *Host) expireDue(ctx context.Context) error {
	h.clockMu.Lock()
	held := h.expiryHeld
	h.clockMu.Unlock()
	if held {
		return nil
	}
	now := h.now()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	due, err := listContracts(ctx, tx, `WHERE state IN ('pending','active') AND expires_at <= ?`, now.UnixNano())
	if err != nil {
		return err
	}
	for _, c := range due {
		if err := release(ctx, tx, c, stateExpired, "ttl-expired", now, nil); err != nil {
			return err
		}
	}
	old := now.Add(-time.Duration(h.cfg.Policies.TombstoneSeconds) * time.Second).UnixNano()
	if _, err := tx.ExecContext(ctx, `DELETE FROM contracts WHERE state IN ('released','revoked','expired') AND released_at < ?`, old); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM rcns_attempts WHERE at < ?`, old); err != nil {
		return err
	}
	idem := now.Add(-time.Duration(h.cfg.Policies.IdempotencyTTLSeconds) * time.Second).UnixNano()
	if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE at < ?`, idem); err != nil {
		return err
	}
	return tx.Commit()
}

type handler struct {
	h      *Host
	prefix string
}

func (x handler) ServeAGTP(ctx context.Context, ci wire.ConnInfo, req *wire.Request) *wire.Response {
	return x.h.serve(ctx, x.prefix+ci.ID, ci, req)
}

// closed ends the AGTP session that lived on the connection.
func (x handler) closed(ci wire.ConnInfo) {
	if err := x.h.endSession(context.Background(), x.prefix+ci.ID); err != nil {
		x.h.log.Error("agtp: ending a session", "err", err)
	}
}

// call is one request in flight.
type call struct {
	req        *wire.Request
	conn       wire.ConnInfo
	session    string // the AGTP session (connection) the request arrived on
	agent      *Agent // nil: anonymous
	auth       authority
	params     map[string]any
	taskID     string
	responseID string
	now        time.Time
}

func (h *Host) serve(ctx context.Context, session string, ci wire.ConnInfo, req *wire.Request) (resp *wire.Response) {
	c := &call{req: req, conn: ci, session: session, now: h.now(), responseID: "rsp_" + uuid.NewString(), taskID: req.Header.Get("Task-ID")}
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("agtp: handler panic", "panic", r, "method", req.Method, "path", req.Path)
			resp = h.refuse(500, "internal-error", "the host failed while serving this request", nil)
		}
		h.finish(c, resp)
	}()
	if !h.catalog[req.Method] {
		return h.refuse(459, "method-violation", fmt.Sprintf("%s is neither in the method catalog nor in this server's policies.methods", req.Method), nil)
	}
	if r := h.identify(c); r != nil {
		return r
	}
	if r := c.parseBody(); r != nil {
		return r
	}
	if key := req.Header.Get("Idempotency-Key"); key != "" && c.agent != nil {
		return h.idempotent(ctx, c, key)
	}
	return h.dispatch(ctx, c)
}

// identify resolves Agent-ID to its identity document and the request's
// Authority-Scope claim against the document's grant.
func (h *Host) identify(c *call) *wire.Response {
	id := c.req.Header.Get("Agent-ID")
	if id == "" {
		if c.req.Method == "DISCOVER" {
			return nil // anonymous discovery only
		}
		return h.refuse(262, "agent-id-required", "this method needs an Agent-ID", nil)
	}
	if !agentIDRe.MatchString(id) {
		return h.refuse(400, "malformed-agent-id", "Agent-ID must be 64 lowercase hexadecimal characters", nil)
	}
	a := h.agents[id]
	if a == nil {
		return h.refuse(403, "unknown-agent", "no identity document is registered for this Agent-ID", nil)
	}
	switch a.Status {
	case "suspended":
		return h.refuse(503, "agent-suspended", "this agent is suspended", nil)
	case "retired":
		return h.refuse(410, "agent-retired", "this Agent-ID is retired", nil)
	}
	c.agent = a
	c.auth = authority{granted: a.Scopes, effective: a.Scopes}
	if c.req.Header.Has("Authority-Scope") {
		claim, err := parseClaim(strings.Join(c.req.Header.Values("Authority-Scope"), ","))
		if err != nil {
			return h.refuse(400, "malformed-authority-scope", err.Error(), nil)
		}
		for _, t := range claim {
			if !anyCovers(a.Scopes, t) {
				return h.refuse(262, "scope-claim-invalid", "the claim may only narrow the identity document's grant", map[string]any{"scope": t})
			}
		}
		c.auth.effective = claim
	}
	if len(a.Methods) > 0 && !contains(a.Methods, c.req.Method) {
		return h.refuse(455, "method-not-permitted", "the identity document does not list this method", nil)
	}
	return nil
}

// parseBody reads the request envelope; parameters come from the query
// string, overridden by the body's parameters object (or by the body itself
// when it is not an envelope).
func (c *call) parseBody() *wire.Response {
	c.params = map[string]any{}
	if q, err := url.ParseQuery(c.req.RawQuery); err == nil {
		for k, v := range q {
			c.params[k] = v[0]
		}
	} else {
		return refuseStatic(400, "malformed-query", err.Error())
	}
	if len(c.req.Body) == 0 {
		return nil
	}
	var body map[string]any
	if err := json.Unmarshal(c.req.Body, &body); err != nil || body == nil {
		return refuseStatic(400, "malformed-body", "the body must be a JSON object")
	}
	if c.taskID == "" {
		if t, ok := body["task_id"].(string); ok {
			c.taskID = t
		}
	}
	src := body
	if p, ok := body["parameters"]; ok {
		pm, ok := p.(map[string]any)
		if !ok {
			return refuseStatic(400, "malformed-body", "parameters must be an object")
		}
		src = pm
	}
	for k, v := range src {
		c.params[k] = v
	}
	return nil
}

func (c *call) param(name string) string {
	s, _ := c.params[name].(string)
	return s
}

func (h *Host) dispatch(ctx context.Context, c *call) *wire.Response {
	m, p := c.req.Method, c.req.Path
	if floorMethods[m] {
		return h.builtin(ctx, c)
	}
	if sid := presented(c.req); sid != "" {
		// A presented contract skips the gate: no recursive synthesis.
		return h.invokeContract(ctx, c, sid)
	}
	if e, ok := h.eps[m+" "+p]; ok {
		return h.runEndpoint(ctx, c, e)
	}
	// Endpoints a honoured persistent PROPOSE added to the catalog.
	if k, err := h.persistedFor(ctx, m, p); err != nil {
		return h.internal(err)
	} else if k != nil {
		return h.runPersisted(ctx, c, k)
	}
	// Tier C resolver, scoped by Agent-ID: the caller's own live contract
	// for this pair serves it without a new gate evaluation.
	own, err := listContracts(ctx, h.db, `WHERE agent_id = ? AND method = ? AND state = 'active' AND expires_at > ? ORDER BY created_at DESC`,
		c.agent.AgentID, m, c.now.UnixNano())
	if err != nil {
		return h.internal(err)
	}
	for _, k := range own {
		if contractServes(k, m, p) {
			return h.invokeContract(ctx, c, k.ID)
		}
	}
	return h.gate(ctx, c)
}

// presented is the synthesis_id a request presents. The RCNS text names the
// header Contract-Synthesized everywhere but once, where it says Synthesis-Id;
// both are accepted, Contract-Synthesized first.
func presented(r *wire.Request) string {
	if v := r.Header.Get("Contract-Synthesized"); v != "" {
		return v
	}
	return r.Header.Get("Synthesis-Id")
}

// unregistered is the standard refusal for a pair outside Tier A/B: 405 with
// the allowed methods when the path exists, else 404.
func (h *Host) unregistered(c *call) *wire.Response {
	if ms := h.byPath[c.req.Path]; len(ms) > 0 {
		ms = append([]string(nil), ms...)
		sort.Strings(ms)
		r := h.refuse(405, "method-not-allowed", "this path does not expose "+c.req.Method, map[string]any{"allowed_methods": ms})
		r.Header.Set("Allow", strings.Join(ms, ", "))
		return r
	}
	return h.refuse(404, "not-found", "no endpoint is registered for this method and path", nil)
}

func (h *Host) runEndpoint(ctx context.Context, c *call, e Endpoint) *wire.Response {
	p := h.prims[e.Primitive]
	if tok, obt, ok := c.auth.lack(p.Scopes); !ok {
		return h.scopeRefusal(tok, obt)
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return h.internal(err)
	}
	defer tx.Rollback()
	out, err := runPrimitive(ctx, tx, p, c.params)
	if r := h.stepFailure(err); r != nil {
		return r
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	return h.success(c, e.SuccessStatus, out, e.Tier, nil)
}

func (h *Host) stepFailure(err error) *wire.Response {
	if err == nil {
		return nil
	}
	var se *stepError
	if errors.As(err, &se) {
		return h.refuse(se.status, se.reason, se.msg, nil)
	}
	return h.internal(err)
}

func (h *Host) scopeRefusal(token string, obtainable bool) *wire.Response {
	if obtainable {
		return h.refuse(262, "scope-required", "the identity document grants "+token+" but the request did not claim it", map[string]any{"scope": token})
	}
	return h.refuse(455, "scope-exceeded", "the identity document does not grant "+token, map[string]any{"scope": token})
}

// success builds the response envelope and the Attribution-Record; ext holds
// the contract extension fields (nil on Tier A/B, where they are omitted).
func (h *Host) success(c *call, status int, result any, tier string, ext map[string]any) *wire.Response {
	att := h.attributionFor(c, status, tier, ext)
	jws, audit := attributionJWS(att)
	body := map[string]any{"status": status, "result": result, "attribution": att}
	if c.taskID != "" {
		body["task_id"] = c.taskID
	}
	r := jsonResponse(status, body)
	r.Header.Set("Attribution-Record", jws)
	r.Header.Set("Audit-ID", audit)
	return r
}

// attribute adds the Attribution-Record (and Audit-ID) of a success whose
// body is not the response envelope (a 263).
func (h *Host) attribute(c *call, r *wire.Response) {
	jws, audit := attributionJWS(h.attributionFor(c, r.Status, "A", nil))
	r.Header.Set("Attribution-Record", jws)
	r.Header.Set("Audit-ID", audit)
}

// attributionFor is the Attribution-Record payload of a success; ext holds
// the contract extension fields (nil on Tier A/B, where they are omitted).
func (h *Host) attributionFor(c *call, status int, tier string, ext map[string]any) map[string]any {
	att := map[string]any{
		"iss": h.cfg.ServerID, "server_id": h.cfg.ServerID, "method": c.req.Method, "path": c.req.Path,
		"status": status, "response_id": c.responseID, "tier": tier,
		"iat": c.now.Unix(), "issued_at": c.now.Format(time.RFC3339Nano),
	}
	if c.agent != nil {
		att["agent_id"] = c.agent.AgentID
	}
	if c.taskID != "" {
		att["task_id"] = c.taskID
	}
	if rid := c.req.Header.Get("Request-ID"); rid != "" {
		att["request_id"] = rid
	}
	for k, v := range ext {
		att[k] = v
	}
	return att
}

// finish adds the headers every response carries.
func (h *Host) finish(c *call, r *wire.Response) {
	if r.Header == nil {
		r.Header = wire.Header{}
	}
	r.Header.Set("Server-ID", h.cfg.ServerID)
	if !r.Header.Has("Response-ID") {
		r.Header.Set("Response-ID", c.responseID)
	}
	for _, k := range []string{"Task-ID", "Request-ID", "Agent-ID"} {
		if v := c.req.Header.Get(k); v != "" {
			r.Header.Set(k, v)
		}
	}
	if c.taskID != "" && !r.Header.Has("Task-ID") {
		r.Header.Set("Task-ID", c.taskID)
	}
	if r.Status == 464 && !r.Header.Has("RCNS-Attempt-Id") {
		h.recordAttempt(c, r)
	}
}

// recordAttempt gives a 464 that did not come from a gate evaluation (a
// presented contract refused contract-not-yours or contract-revoked) its
// own RCNS-Attempt-Id, so that every 464 carries one (wire notes 4) and
// INSPECT target=rcns-attempt can read it back.
func (h *Host) recordAttempt(c *call, r *wire.Response) {
	if c.agent == nil {
		return
	}
	var body struct {
		Error struct {
			Reason string `json:"reason"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &body)
	attempt := "att_" + uuid.NewString()
	if _, err := h.db.ExecContext(context.Background(), `INSERT INTO rcns_attempts (attempt_id, agent_id, method, path, status, reason, synthesis_id, at) VALUES (?,?,?,?,?,?,?,?)`,
		attempt, c.agent.AgentID, c.req.Method, c.req.Path, r.Status, body.Error.Reason, nullStr(presented(c.req)), c.now.UnixNano()); err != nil {
		h.log.Error("agtp: recording a 464 attempt", "err", err)
		return
	}
	r.Header.Set("RCNS-Attempt-Id", attempt)
}

func jsonResponse(status int, body any) *wire.Response {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"status":500}`)
		status = 500
	}
	hd := wire.Header{}
	hd.Set("Content-Type", wire.MediaType)
	return &wire.Response{Status: status, Header: hd, Body: b}
}

// refuse builds the error envelope: {"status", "error": {"code", "reason",
// "explanation", ...extra}}.
func (h *Host) refuse(status int, reason, explanation string, extra map[string]any) *wire.Response {
	e := map[string]any{"code": status, "reason": reason, "explanation": explanation}
	for k, v := range extra {
		e[k] = v
	}
	return jsonResponse(status, map[string]any{"status": status, "error": e})
}

func refuseStatic(status int, reason, explanation string) *wire.Response {
	return (*Host)(nil).refuse(status, reason, explanation, nil)
}

func (h *Host) internal(err error) *wire.Response {
	h.log.Error("agtp: internal error", "err", err)
	return h.refuse(500, "internal-error", "the host could not complete this request", nil)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// rateLimiter is a per-agent sliding one-minute window over gate
// evaluations.
type rateLimiter struct {
	mu    sync.Mutex
	limit int
	seen  map[string][]time.Time
}

func newRateLimiter(limit int) *rateLimiter {
	return &rateLimiter{limit: limit, seen: map[string][]time.Time{}}
}

// allow records an evaluation at now unless the agent is at its ceiling; it
// returns the wait until the oldest evaluation leaves the window.
func (r *rateLimiter) allow(agent string, now time.Time) (bool, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.seen[agent]
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(w) && !w[i].After(cut) {
		i++
	}
	w = w[i:]
	if len(w) >= r.limit {
		r.seen[agent] = w
		return false, w[0].Sub(cut)
	}
	r.seen[agent] = append(w, now)
	return true, 0
}

// keyedMutex serialises work per key (here: per Agent-ID and
// Idempotency-Key) so concurrent replays see the first response.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
