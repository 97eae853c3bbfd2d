package agtp

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	wire "github.com/parley-conformance/parley/wire/agtp"
)

// PROPOSE: explicit runtime contract negotiation (agtp-rcns.txt, "Purpose"
// to the status code table). A proposal is evaluated in the order the text
// gives (method, path, semantic block, schemas, authority including every
// composed step, capability envelope, policy), and the first failing check
// answers. An approved proposal becomes a contract with negotiation_origin
// "propose": session-scoped (released when the proposing AGTP session, the
// connection, ends) or, when persistence is asked for and the operator
// allows it, a regular catalog endpoint. Pairs the operator marked for
// review answer 261 and wait in a durable queue for a CONFIRM by an
// inspect:all holder; the agent polls QUERY /proposals/{proposal_id}.

// Proposal states.
const (
	proposalPending   = "pending"
	proposalApproved  = "approved"
	proposalRejected  = "rejected"
	proposalWithdrawn = "withdrawn" // its session ended before a decision
	proposalExpired   = "expired"   // review_timeout_seconds passed
)

// persistentExpiry is the expiry stored for a synthesis taken into the
// catalog: it never expires by TTL.
var persistentExpiry = time.Unix(0, math.MaxInt64).UTC()

// proposal is a parsed PROPOSE body.
type proposal struct {
	Form       string         `json:"form"` // wrapped | legacy
	Endpoint   map[string]any `json:"endpoint"`
	Persistent bool           `json:"persistent"`
}

func (p *proposal) str(k string) string { s, _ := p.Endpoint[k].(string); return s }

// parseProposal reads the two mutually exclusive body forms: the wrapped
// form (parameters.endpoint) and the legacy form (parameters.name beside the
// endpoint fields).
func (h *Host) parseProposal(c *call) (*proposal, *wire.Response) {
	ep, wrapped := c.params["endpoint"]
	_, legacy := c.params["name"]
	switch {
	case wrapped && legacy:
		return nil, h.refuse(400, "ambiguous-body", "a proposal carries either endpoint (wrapped form) or name (legacy form), never both", nil)
	case wrapped:
		m, ok := ep.(map[string]any)
		if !ok {
			return nil, h.refuse(400, "malformed-proposal", "endpoint must be an object", nil)
		}
		p := &proposal{Form: "wrapped", Endpoint: m}
		p.Persistent, _ = c.params["persistent"].(bool)
		return p, nil
	case legacy:
		if n, ok := c.params["name"].(string); !ok || strings.TrimSpace(n) == "" {
			return nil, h.refuse(400, "malformed-proposal", "the legacy form's name must be a non-empty string", nil)
		}
		m := map[string]any{}
		for k, v := range c.params {
			switch k {
			case "session_id", "persistent", "requested_duration":
			default:
				m[k] = v
			}
		}
		p := &proposal{Form: "legacy", Endpoint: m}
		p.Persistent, _ = c.params["persistent"].(bool)
		return p, nil
	}
	return nil, h.refuse(400, "malformed-proposal", "PROPOSE needs the endpoint definition: parameters.endpoint (wrapped form) or parameters.name with the endpoint fields (legacy form)", nil)
}

// composition is how the server would build a pair from its capabilities.
type composition struct {
	rec     *Recipe // nil: a passthrough
	steps   []string
	desc    string
	status  int
	scopes  []string // every composed primitive's scopes, sorted
	missing string   // a step naming an unregistered primitive
}

// composeFor finds the first recipe (else passthrough) whose pattern covers
// the pair; nil when nothing composes it.
func (h *Host) composeFor(method, path string) *composition {
	h.recMu.RLock()
	var cp *composition
	for i := range h.recipes {
		if h.recipes[i].Method == method && pathMatches(h.recipes[i].Path, path) {
			r := h.recipes[i]
			cp = &composition{rec: &r, steps: r.Steps, desc: r.Description, status: r.SuccessStatus}
			break
		}
	}
	h.recMu.RUnlock()
	if cp == nil {
		for _, pt := range h.cfg.Policies.Passthroughs {
			if pt.Method == method && pathMatches(pt.Path, path) {
				cp = &composition{steps: []string{pt.Primitive}, desc: "passthrough to " + pt.Primitive, status: pt.SuccessStatus}
				break
			}
		}
	}
	if cp == nil {
		return nil
	}
	if cp.status == 0 {
		cp.status = 200
	}
	seen := map[string]bool{}
	for _, s := range cp.steps {
		prim, ok := h.prims[s]
		if !ok {
			if cp.missing == "" {
				cp.missing = s
			}
			continue
		}
		for _, t := range prim.Scopes {
			if !seen[t] {
				seen[t] = true
				cp.scopes = append(cp.scopes, t)
			}
		}
	}
	sort.Strings(cp.scopes)
	return cp
}

func (cp *composition) lineage() map[string]any {
	if cp.rec == nil {
		return nil
	}
	return map[string]any{"recipe_name": cp.rec.Name, "recipe_version": cp.rec.Version}
}

var impactTiers = setOf("informational", "reversible", "irreversible")

// semanticProblem checks the semantic block: an object with non-empty
// string intent, actor and outcome; impact_tier, is_idempotent and
// confidence_guarantee, when present, of their kinds.
func semanticProblem(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return "the proposal has no semantic block object"
	}
	for _, f := range []string{"intent", "actor", "outcome"} {
		if s, ok := m[f].(string); !ok || strings.TrimSpace(s) == "" {
			return "semantic." + f + " is required and must be a non-empty string"
		}
	}
	if v, ok := m["impact_tier"]; ok {
		if s, _ := v.(string); !impactTiers[s] {
			return "semantic.impact_tier must be informational, reversible or irreversible"
		}
	}
	if v, ok := m["is_idempotent"]; ok {
		if _, ok := v.(bool); !ok {
			return "semantic.is_idempotent must be a boolean"
		}
	}
	if v, ok := m["confidence_guarantee"]; ok {
		if f, ok := v.(float64); !ok || f < 0 || f > 1 {
			return "semantic.confidence_guarantee must be a number from 0 to 1"
		}
	}
	return ""
}

// schemaProblem compiles v as a self-contained JSON Schema (draft 2020-12
// unless it names another draft). Nothing is loaded from outside: a $ref to
// another document makes the schema invalid here.
func schemaProblem(v any) string {
	switch v.(type) {
	case map[string]any, bool:
	default:
		return "a JSON Schema is an object or a boolean"
	}
	raw, _ := json.Marshal(v)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err.Error()
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "https://proposal.invalid/schema.json"
	if err := comp.AddResource(loc, doc); err != nil {
		return err.Error()
	}
	if _, err := comp.Compile(loc); err != nil {
		return err.Error()
	}
	return ""
}

// verbSegment is a path segment that names a method: AGTP paths name
// resources, the method is the verb.
func (h *Host) verbSegment(path string) string {
	for _, seg := range strings.Split(path, "/") {
		if seg != "" && !strings.HasPrefix(seg, "{") && h.catalog[strings.ToUpper(seg)] {
			return seg
		}
	}
	return ""
}

// declaredScopes reads the proposal's authority_scope: a list of tokens or
// one comma-separated string.
func declaredScopes(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return parseClaim(t)
	case []any:
		var out []string
		for _, x := range t {
			s, ok := x.(string)
			if !ok || !scopeRe.MatchString(s) {
				return nil, fmt.Errorf("authority_scope entry %v is not a scope token", x)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errors.New("authority_scope must be a list of scope tokens")
}

// plan is a proposal that passed every automatic check.
type plan struct {
	cp     *composition
	scopes []string // declared and composed, sorted, deduplicated
	review bool
}

// evaluateProposal runs the evaluation in the text's order; the first
// failing check answers.
func (h *Host) evaluateProposal(c *call, p *proposal) (*plan, *wire.Response) {
	m, path := p.str("method"), p.str("path")
	// 1. Method conformance.
	if !methodRe.MatchString(m) || !h.catalog[m] {
		return nil, h.refuse(459, "method-violation", fmt.Sprintf("the proposed method %q is neither in the method catalog nor in this server's policies.methods", m), nil)
	}
	// 2. Path conformance.
	if len(path) > 1024 || !pathRe.MatchString(path) {
		return nil, h.refuse(460, "endpoint-violation", fmt.Sprintf("the proposed path %q does not satisfy the path grammar (/segment... of lower-case segments or {name})", path), nil)
	}
	if v := h.verbSegment(path); v != "" {
		return nil, h.refuse(460, "endpoint-violation", fmt.Sprintf("the proposed path names a method (%q): paths name resources", v), nil)
	}
	// 3. Semantic block conformance.
	if why := semanticProblem(p.Endpoint["semantic"]); why != "" {
		return nil, h.refuse(400, "invalid-semantic-block", why, nil)
	}
	// 4. Schema conformance.
	for _, f := range []string{"input_schema", "output_schema"} {
		if v, ok := p.Endpoint[f]; ok {
			if why := schemaProblem(v); why != "" {
				return nil, h.refuse(400, "invalid-schema", f+" is not a valid JSON Schema: "+why, map[string]any{"field": f})
			}
		}
	}
	// 5. Authority sufficiency: the negotiation itself, the proposal's
	// declared requirements, and every step the synthesis would compose
	// (authority is preserved through composition; nothing runs first).
	declared, err := declaredScopes(p.Endpoint["authority_scope"])
	if err != nil {
		return nil, h.refuse(400, "invalid-authority-scope", err.Error(), nil)
	}
	cp := h.composeFor(m, path)
	needed := append([]string{scopeNegotiate}, declared...)
	if cp != nil {
		needed = append(needed, cp.scopes...)
	}
	if tok, obt, ok := c.auth.lack(needed); !ok {
		return nil, h.scopeRefusal(tok, obt)
	}
	// 6. Capability envelope.
	if floorMethods[m] || cp == nil || cp.missing != "" {
		return nil, h.refuse(463, "composition-impossible", fmt.Sprintf("this server cannot compose %s %s from its registered primitives", m, path), nil)
	}
	// 7. Policy acceptance.
	pol := h.cfg.Policies
	switch {
	case !pol.RCNS.Enabled:
		return nil, h.refuse(463, "policy-refused", "runtime contract negotiation is disabled on this server", map[string]any{"detail": "rcns-disabled"})
	case c.agent.TrustTier > pol.RCNS.MinTrustTier:
		return nil, h.refuse(463, "policy-refused", fmt.Sprintf("trust tier %d is less trusted than this server's minimum %d", c.agent.TrustTier, pol.RCNS.MinTrustTier), map[string]any{"detail": "trust-tier-insufficient"})
	case h.hasStatic(m, path):
		return nil, h.refuse(463, "policy-refused", m+" "+path+" is a registered endpoint already", map[string]any{"detail": "already-registered"})
	case matchRules(h.refused, m, path):
		return nil, h.refuse(463, "policy-refused", "this server's policy does not permit synthesizing "+m+" "+path, nil)
	}
	set := map[string]bool{}
	var scopes []string
	for _, t := range append(append([]string(nil), declared...), cp.scopes...) {
		if !set[t] {
			set[t] = true
			scopes = append(scopes, t)
		}
	}
	sort.Strings(scopes)
	return &plan{cp: cp, scopes: scopes, review: matchRules(h.review, m, path)}, nil
}

func (h *Host) hasStatic(method, path string) bool {
	for _, e := range h.cfg.Endpoints {
		if e.Method == method && pathMatches(path, e.Path) {
			return true
		}
	}
	return false
}

// propose serves PROPOSE.
func (h *Host) propose(ctx context.Context, c *call) *wire.Response {
	p, r := h.parseProposal(c)
	if r != nil {
		return r
	}
	pl, r := h.evaluateProposal(c, p)
	if r != nil {
		return r
	}
	if pl.review {
		return h.enqueue(ctx, c, p)
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return h.internal(err)
	}
	defer tx.Rollback()
	resp, err := h.instantiate(ctx, tx, c.agent.AgentID, c.session, c.auth, p, c.now, "")
	if err != nil {
		return h.internal(err)
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	if resp.Status == 263 {
		h.attribute(c, resp)
	}
	return resp
}

// instantiate synthesizes an evaluated proposal: it captures the recipe
// version in effect now and stores the contract. The composition is looked
// up again (for a reviewed proposal the policy may have changed since it
// was queued) and its authority checked against the proposer's.
func (h *Host) instantiate(ctx context.Context, q querier, agentID, session string, auth authority, p *proposal, now time.Time, proposalID string) (*wire.Response, error) {
	m, path := p.str("method"), p.str("path")
	cp := h.composeFor(m, path)
	if cp == nil || cp.missing != "" {
		return h.refuse(463, "composition-impossible", fmt.Sprintf("this server can no longer compose %s %s", m, path), nil), nil
	}
	declared, _ := declaredScopes(p.Endpoint["authority_scope"])
	set := map[string]bool{}
	var scopes []string
	for _, t := range append(declared, cp.scopes...) {
		if !set[t] {
			set[t] = true
			scopes = append(scopes, t)
		}
	}
	sort.Strings(scopes)
	if tok, obt, ok := auth.lack(scopes); !ok {
		return h.scopeRefusal(tok, obt), nil
	}
	persistence := "not-requested"
	persistent := false
	if p.Persistent {
		persistence = "refused"
		if h.cfg.Policies.Propose.AllowPersistent {
			taken, err := listContracts(ctx, q, `WHERE persistent = 1 AND state = 'active' AND method = ? AND path = ?`, m, path)
			if err != nil {
				return nil, err
			}
			if len(taken) == 0 {
				persistence, persistent = "honoured", true
			}
		}
	}
	ep := map[string]any{"method": m, "path": path, "description": cp.desc, "composed_of": cp.steps,
		"authority_scope": scopes, "success_status": cp.status}
	for _, f := range []string{"name", "description", "semantic", "input_schema", "output_schema"} {
		if v, ok := p.Endpoint[f]; ok {
			ep[f] = v
		}
	}
	epJSON, _ := json.Marshal(ep)
	k := &contract{ID: "syn_" + uuid.NewString(), AgentID: agentID, Method: m, Path: path, State: stateActive, Origin: "propose",
		Endpoint: epJSON, Steps: cp.steps, Scopes: scopes, SuccessStatus: cp.status, CreatedAt: now,
		ExpiresAt: now.Add(time.Duration(h.cfg.Policies.RCNS.ContractTTLSeconds) * time.Second), Persistent: persistent}
	if persistent {
		k.ExpiresAt = persistentExpiry
	} else {
		k.SessionKey = nullStr(session)
	}
	lin := cp.lineage()
	if lin != nil {
		k.RecipeName = nullStr(cp.rec.Name)
		k.RecipeVersion = sql.NullString{String: cp.rec.Version, Valid: true}
	}
	k.Hash = contractHash(epJSON, lin)
	if err := insertContract(ctx, q, k); err != nil {
		return nil, err
	}
	body := map[string]any{"status": 263, "method": m, "path": path, "synthesis_id": k.ID, "endpoint": k.Endpoint,
		"recipe_lineage": lineageOf(k), "contract_hash": k.Hash, "expires_at": expiresView(k),
		"negotiation_origin": k.Origin, "persistent": persistent, "persistence": persistence, "session_scoped": !persistent}
	if proposalID != "" {
		body["proposal_id"] = proposalID
	}
	h.log.Info("agtp: proposal approved", "agent", agentID, "method", m, "path", path, "synthesis_id", k.ID, "persistent", persistent)
	return jsonResponse(263, body), nil
}

func expiresView(k *contract) any {
	if k.Persistent {
		return nil
	}
	return k.ExpiresAt.Format(time.RFC3339Nano)
}

// enqueue puts a proposal that passed the automatic checks into the
// operator's review queue and answers 261.
func (h *Host) enqueue(ctx context.Context, c *call, p *proposal) *wire.Response {
	id := "prop_" + uuid.NewString()
	pb, _ := json.Marshal(p)
	ab, _ := json.Marshal(map[string]any{"granted": c.auth.granted, "effective": c.auth.effective})
	if _, err := h.db.ExecContext(ctx, `INSERT INTO proposals (proposal_id, agent_id, session_key, method, path, proposal, authority, state, status, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		id, c.agent.AgentID, nullStr(c.session), p.str("method"), p.str("path"), string(pb), string(ab), proposalPending, 261, c.now.UnixNano()); err != nil {
		return h.internal(err)
	}
	h.log.Info("agtp: proposal queued for operator review", "proposal_id", id, "agent", c.agent.AgentID, "method", p.str("method"), "path", p.str("path"))
	return jsonResponse(261, h.pendingBody(id, p.str("method"), p.str("path"), c.now))
}

func (h *Host) pendingBody(id, method, path string, at time.Time) map[string]any {
	return map[string]any{"status": 261, "proposal_id": id, "state": proposalPending, "method": method, "path": path,
		"submitted_at": at.Format(time.RFC3339Nano), "poll": map[string]any{"method": "QUERY", "target": "/proposals/" + id}}
}

type storedProposal struct {
	id, agent, method, path, state string
	session                        sql.NullString
	status                         int
	prop, auth                     string
	response                       sql.NullString
	created                        int64
}

func getProposal(ctx context.Context, q querier, id string) (*storedProposal, error) {
	var s storedProposal
	err := q.QueryRowContext(ctx, `SELECT proposal_id, agent_id, session_key, method, path, proposal, authority, state, status, response, created_at FROM proposals WHERE proposal_id = ?`, id).
		Scan(&s.id, &s.agent, &s.session, &s.method, &s.path, &s.prop, &s.auth, &s.state, &s.status, &s.response, &s.created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &s, err
}

// queryProposal serves QUERY /proposals/{proposal_id}: 261 while the
// proposal waits, then its terminal answer (263, or the refusal) with the
// proposal_id and state added.
func (h *Host) queryProposal(ctx context.Context, c *call, id string) *wire.Response {
	if err := h.expireReviews(ctx); err != nil {
		return h.internal(err)
	}
	sp, err := getProposal(ctx, h.db, id)
	if err != nil {
		return h.internal(err)
	}
	if sp == nil || (sp.agent != c.agent.AgentID && !h.holds(c, scopeInspectAll)) {
		return h.refuse(404, "proposal-not-found", "no proposal of yours has this id", nil)
	}
	if sp.state == proposalPending {
		return jsonResponse(261, h.pendingBody(sp.id, sp.method, sp.path, time.Unix(0, sp.created).UTC()))
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(sp.response.String), &body)
	if body == nil {
		body = map[string]any{"status": sp.status}
	}
	body["proposal_id"], body["state"] = sp.id, sp.state
	r := jsonResponse(sp.status, body)
	if r.Status >= 200 && r.Status < 300 {
		h.attribute(c, r)
	}
	return r
}

// confirmProposal is the operator's review decision: CONFIRM
// target_id=<proposal_id> status=approved|rejected, by an inspect:all
// holder.
func (h *Host) confirmProposal(ctx context.Context, c *call, id string) *wire.Response {
	if !h.holds(c, scopeInspectAll) {
		return h.scopeRefusal(scopeInspectAll, anyCovers(c.auth.granted, scopeInspectAll))
	}
	decision := c.param("status")
	if decision != proposalApproved && decision != proposalRejected {
		return h.refuse(400, "invalid-parameter", "status must be approved or rejected", nil)
	}
	if err := h.expireReviews(ctx); err != nil {
		return h.internal(err)
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return h.internal(err)
	}
	defer tx.Rollback()
	sp, err := getProposal(ctx, tx, id)
	if err != nil {
		return h.internal(err)
	}
	if sp == nil {
		return h.refuse(404, "proposal-not-found", "no proposal has this id", nil)
	}
	if sp.state != proposalPending {
		return h.refuse(409, "proposal-decided", "this proposal is already "+sp.state, map[string]any{"state": sp.state})
	}
	var resp *wire.Response
	state := proposalRejected
	if decision == proposalApproved {
		var p proposal
		var a struct{ Granted, Effective []string }
		if err := json.Unmarshal([]byte(sp.prop), &p); err != nil {
			return h.internal(err)
		}
		if err := json.Unmarshal([]byte(sp.auth), &a); err != nil {
			return h.internal(err)
		}
		resp, err = h.instantiate(ctx, tx, sp.agent, sp.session.String, authority{granted: a.Granted, effective: a.Effective}, &p, c.now, sp.id)
		if err != nil {
			return h.internal(err)
		}
		if resp.Status == 263 {
			state = proposalApproved
		}
	} else {
		explanation := "the operator declined this proposal in review"
		if r := c.param("reason"); r != "" {
			explanation += ": " + r
		}
		resp = h.refuse(463, "policy-refused", explanation, map[string]any{"detail": "review-rejected"})
	}
	if err := decideProposal(ctx, tx, sp.id, state, resp, c.agent.AgentID, c.now); err != nil {
		return h.internal(err)
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	return h.success(c, 200, map[string]any{"proposal_id": sp.id, "state": state, "proposal_status": resp.Status}, "A", nil)
}

func decideProposal(ctx context.Context, q querier, id, state string, resp *wire.Response, by string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE proposals SET state = ?, status = ?, response = ?, decided_by = ?, decided_at = ? WHERE proposal_id = ? AND state = 'pending'`,
		state, resp.Status, string(resp.Body), by, now.UnixNano(), id)
	return err
}

// expireReviews refuses proposals left undecided past
// review_timeout_seconds.
func (h *Host) expireReviews(ctx context.Context) error {
	now := h.now()
	cut := now.Add(-time.Duration(h.cfg.Policies.Propose.ReviewTimeoutSeconds) * time.Second).UnixNano()
	resp := h.refuse(463, "policy-refused", "no operator decided this proposal in time", map[string]any{"detail": "review-timeout"})
	_, err := h.db.ExecContext(ctx, `UPDATE proposals SET state = ?, status = ?, response = ?, decided_by = 'review-timeout', decided_at = ? WHERE state = 'pending' AND created_at <= ?`,
		proposalExpired, resp.Status, string(resp.Body), now.UnixNano(), cut)
	return err
}

// endSession releases the session-scoped syntheses of an AGTP session that
// ended (rcns_release reason session-ended) and withdraws its proposals
// still waiting for review. An empty key ends every session (at start-up,
// no session of an earlier process is alive).
func (h *Host) endSession(ctx context.Context, key string) error {
	now := h.now()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	where, args := `WHERE session_key IS NOT NULL AND state IN ('pending','active')`, []any{}
	if key != "" {
		where, args = `WHERE session_key = ? AND state IN ('pending','active')`, []any{key}
	}
	ks, err := listContracts(ctx, tx, where, args...)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := release(ctx, tx, k, stateReleased, "session-ended", now, nil); err != nil {
			return err
		}
	}
	resp := h.refuse(463, "policy-refused", "the proposing session ended before a decision", map[string]any{"detail": "session-ended"})
	pw, pargs := `WHERE state = 'pending' AND session_key IS NOT NULL`, []any{}
	if key != "" {
		pw, pargs = `WHERE state = 'pending' AND session_key = ?`, []any{key}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE proposals SET state = ?, status = ?, response = ?, decided_by = 'session-ended', decided_at = ? `+pw,
		append([]any{proposalWithdrawn, resp.Status, string(resp.Body), now.UnixNano()}, pargs...)...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(ks) > 0 {
		h.log.Info("agtp: session ended; session-scoped syntheses released", "session", key, "released", len(ks))
	}
	return nil
}

// persistedFor is the catalog endpoint a honoured persistent proposal
// added for the pair, if any.
func (h *Host) persistedFor(ctx context.Context, method, path string) (*contract, error) {
	ks, err := listContracts(ctx, h.db, `WHERE persistent = 1 AND state = 'active' AND method = ? ORDER BY created_at`, method)
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		if pathMatches(k.Path, path) {
			return k, nil
		}
	}
	return nil, nil
}

// runPersisted serves a persisted endpoint as a regular (Tier B) one: the
// caller's authority must cover its scopes, and its Attribution-Record
// carries no contract fields.
func (h *Host) runPersisted(ctx context.Context, c *call, k *contract) *wire.Response {
	if tok, obt, ok := c.auth.lack(k.Scopes); !ok {
		return h.scopeRefusal(tok, obt)
	}
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return h.internal(err)
	}
	defer tx.Rollback()
	var out []map[string]any
	for _, s := range k.Steps {
		res, err := runPrimitive(ctx, tx, h.prims[s], c.params)
		if r := h.stepFailure(err); r != nil {
			return r
		}
		out = append(out, map[string]any{"primitive": s, "output": res})
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	return h.success(c, k.SuccessStatus, map[string]any{"steps": out}, "B", nil)
}

// contractServes reports whether contract k serves a request for path: a
// gate synthesis serves exactly its pair; a proposed endpoint may be a
// path template.
func contractServes(k *contract, method, path string) bool {
	if k.Method != method {
		return false
	}
	if k.Origin == "propose" {
		return pathMatches(k.Path, path)
	}
	return k.Path == path
}
