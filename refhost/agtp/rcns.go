package agtp

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	wire "github.com/parley-conformance/parley/wire/agtp"
)

const scopeNegotiate = "rcns:negotiate"

// gate evaluates the four locks for an unregistered pair. Lock 2 (the
// caller's opt-in) is checked first: a caller that never asked never learns
// that RCNS exists. Every evaluation past locks 2 and 1 counts against the
// per-agent RCNS rate limit.
func (h *Host) gate(ctx context.Context, c *call) *wire.Response {
	if c.req.Header.Get("Allow-RCNS") != "true" {
		return h.unregistered(c)
	}
	attempt := "att_" + uuid.NewString()
	o := h.evaluate(ctx, c, h.cfg.Policies.RCNS)
	if _, err := h.db.ExecContext(ctx, `INSERT INTO rcns_attempts (attempt_id, agent_id, method, path, status, reason, synthesis_id, at) VALUES (?,?,?,?,?,?,?,?)`,
		attempt, c.agent.AgentID, c.req.Method, c.req.Path, o.resp.Status, o.reason, nullStr(o.sid), c.now.UnixNano()); err != nil {
		return h.internal(err)
	}
	// Carried on every gate outcome, not only 464, so any evaluation can be
	// inspected later.
	o.resp.Header.Set("RCNS-Attempt-Id", attempt)
	return o.resp
}

// outcome is one gate evaluation: the answer, the reason recorded for
// INSPECT target=rcns-attempt, and the contract it produced, if any.
type outcome struct {
	resp   *wire.Response
	reason string
	sid    string
}

func (h *Host) refusal(status int, reason, explanation string, extra map[string]any) outcome {
	return outcome{resp: h.refuse(status, reason, explanation, extra), reason: reason}
}

func (h *Host) scopeOutcome(token string, obtainable bool) outcome {
	o := outcome{resp: h.scopeRefusal(token, obtainable), reason: "scope-exceeded"}
	if obtainable {
		o.reason = "scope-required"
	}
	return o
}

func nullStr(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func (h *Host) evaluate(ctx context.Context, c *call, rc RCNS) outcome {
	if !rc.Enabled {
		return h.refusal(464, "rcns-disabled", "runtime contract negotiation is disabled on this server", nil)
	}
	if ok, wait := h.rl.allow(c.agent.AgentID, c.now); !ok {
		// scope sits at top level (as the spec words it) and in the error
		// object beside the reason.
		r := jsonResponse(429, map[string]any{"status": 429, "scope": "rcns", "error": map[string]any{
			"code": 429, "reason": "rate-limited", "scope": "rcns", "limit_per_minute": rc.RateLimitPerMinute,
			"explanation": fmt.Sprintf("more than %d RCNS gate evaluations in a minute", rc.RateLimitPerMinute)}})
		r.Header.Set("Retry-After", fmt.Sprint(max(int(math.Ceil(wait.Seconds())), 1)))
		return outcome{resp: r, reason: "rate-limited"}
	}
	if !anyCovers(c.auth.effective, scopeNegotiate) {
		return h.scopeOutcome(scopeNegotiate, anyCovers(c.auth.granted, scopeNegotiate))
	}
	if c.agent.TrustTier > rc.MinTrustTier {
		return h.refusal(464, "trust-tier-insufficient",
			fmt.Sprintf("trust tier %d is less trusted than this server's minimum %d", c.agent.TrustTier, rc.MinTrustTier), nil)
	}
	k, o := h.synthesize(c, "rcns-gate")
	if k == nil {
		return o
	}
	if rc.Mode == ModeConfirmFirst {
		k.State = statePending
		if err := insertContract(ctx, h.db, k); err != nil {
			return outcome{resp: h.internal(err), reason: "synthesis-error"}
		}
		return outcome{resp: jsonResponse(461, h.preview(k)), reason: "contract-available", sid: k.ID}
	}
	k.State = stateActive
	if err := insertContract(ctx, h.db, k); err != nil {
		return outcome{resp: h.internal(err), reason: "synthesis-error"}
	}
	return outcome{resp: h.invokeContract(ctx, c, k.ID), reason: "synthesized", sid: k.ID}
}

// synthesize builds a contract for the request's pair from the first
// matching recipe (else passthrough). Authority is checked against every
// composed primitive before anything executes.
func (h *Host) synthesize(c *call, origin string) (*contract, outcome) {
	m, p := c.req.Method, c.req.Path
	h.recMu.RLock()
	var rec *Recipe
	for i := range h.recipes {
		if h.recipes[i].Method == m && pathMatches(h.recipes[i].Path, p) {
			r := h.recipes[i]
			rec = &r
			break
		}
	}
	h.recMu.RUnlock()
	var steps []string
	var desc string
	status := 200
	var lineage map[string]any
	if rec != nil {
		steps, desc, status = rec.Steps, rec.Description, rec.SuccessStatus
		lineage = map[string]any{"recipe_name": rec.Name, "recipe_version": rec.Version}
	} else {
		for _, pt := range h.cfg.Policies.Passthroughs {
			if pt.Method == m && pathMatches(pt.Path, p) {
				steps, status = []string{pt.Primitive}, pt.SuccessStatus
				desc = "passthrough to " + pt.Primitive
				break
			}
		}
	}
	if steps == nil {
		return nil, h.refusal(464, "composition-impossible", "no recipe or passthrough can compose "+m+" "+p, nil)
	}
	var scopes []string
	seen := map[string]bool{}
	for _, s := range steps {
		prim, ok := h.prims[s]
		if !ok {
			return nil, h.refusal(464, "synthesis-error", "the recipe names a primitive that is not registered: "+s, nil)
		}
		for _, t := range prim.Scopes {
			if !seen[t] {
				seen[t] = true
				scopes = append(scopes, t)
			}
		}
	}
	sort.Strings(scopes)
	if tok, obt, ok := c.auth.lack(scopes); !ok {
		return nil, h.scopeOutcome(tok, obt)
	}
	if status == 0 {
		status = 200
	}
	ep, _ := json.Marshal(map[string]any{"method": m, "path": p, "description": desc, "composed_of": steps,
		"authority_scope": scopes, "success_status": status})
	k := &contract{ID: "syn_" + uuid.NewString(), AgentID: c.agent.AgentID, Method: m, Path: p, Origin: origin,
		Endpoint: ep, Steps: steps, Scopes: scopes, SuccessStatus: status, CreatedAt: c.now,
		ExpiresAt: c.now.Add(time.Duration(h.cfg.Policies.RCNS.ContractTTLSeconds) * time.Second)}
	if lineage != nil {
		k.RecipeName = nullStr(rec.Name)
		k.RecipeVersion = sql.NullString{String: rec.Version, Valid: true}
	}
	k.Hash = contractHash(ep, lineage)
	return k, outcome{}
}

func pathMatches(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], "{") && qs[i] != "" {
			continue
		}
		if ps[i] != qs[i] {
			return false
		}
	}
	return true
}

func lineageOf(k *contract) any {
	if !k.RecipeName.Valid {
		return nil
	}
	return map[string]any{"recipe_name": k.RecipeName.String, "recipe_version": k.RecipeVersion.String}
}

// preview is the 461 body.
func (h *Host) preview(k *contract) map[string]any {
	return map[string]any{"status": 461, "synthesis_id": k.ID, "method": k.Method, "path": k.Path,
		"endpoint": k.Endpoint, "recipe_lineage": lineageOf(k), "contract_hash": k.Hash,
		"expires_at": k.ExpiresAt.Format(time.RFC3339Nano), "negotiation_origin": k.Origin}
}

// contractView is a contract as INSPECT and DISCOVER show it.
func contractView(k *contract) map[string]any {
	v := map[string]any{"synthesis_id": k.ID, "agent_id": k.AgentID, "method": k.Method, "path": k.Path,
		"state": k.State, "negotiation_origin": k.Origin, "endpoint": k.Endpoint, "recipe_lineage": lineageOf(k),
		"contract_hash": k.Hash, "created_at": k.CreatedAt.Format(time.RFC3339Nano),
		"expires_at": expiresView(k), "persistent": k.Persistent}
	if k.ReleasedAt.Valid {
		v["released_at"] = time.Unix(0, k.ReleasedAt.Int64).UTC().Format(time.RFC3339Nano)
		v["release_reason"] = k.ReleaseReason.String
	}
	return v
}

// invokeContract serves a request under contract sid, enforcing its
// bindings (originating Agent-ID, liveness, pair) and executing its captured
// steps. Binding checks and execution share one transaction so that a
// concurrent release or sweep cannot interleave.
func (h *Host) invokeContract(ctx context.Context, c *call, sid string) *wire.Response {
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return h.internal(err)
	}
	defer tx.Rollback()
	k, err := getContract(ctx, tx, sid)
	if err != nil {
		return h.internal(err)
	}
	if k == nil {
		return h.refuse(404, "contract-not-found", "no contract has this synthesis_id", nil)
	}
	if k.AgentID != c.agent.AgentID {
		return h.refuse(464, "contract-not-yours", "this contract is bound to another Agent-ID", nil)
	}
	switch k.State {
	case stateReleased, stateRevoked, stateExpired:
		return h.refuse(464, "contract-revoked", "this contract was "+k.State, map[string]any{"state": k.State})
	}
	if !c.now.Before(k.ExpiresAt) {
		if err := release(ctx, tx, k, stateExpired, "ttl-expired", c.now, nil); err != nil {
			return h.internal(err)
		}
		if err := tx.Commit(); err != nil {
			return h.internal(err)
		}
		return h.refuse(464, "contract-revoked", "this contract expired", map[string]any{"state": stateExpired})
	}
	if !contractServes(k, c.req.Method, c.req.Path) {
		return h.refuse(404, "contract-pair-mismatch", fmt.Sprintf("this contract serves %s %s", k.Method, k.Path), nil)
	}
	if tok, obt, ok := c.auth.lack(k.Scopes); !ok {
		return h.scopeRefusal(tok, obt)
	}
	if k.State == statePending {
		if _, err := tx.ExecContext(ctx, `UPDATE contracts SET state = 'active' WHERE synthesis_id = ? AND state = 'pending'`, k.ID); err != nil {
			return h.internal(err)
		}
	}
	ext := map[string]any{"synthesis_id": k.ID, "contract_hash": k.Hash, "negotiation_origin": k.Origin}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT steps`); err != nil {
		return h.internal(err)
	}
	var out []map[string]any
	var fail *wire.Response
	for _, s := range k.Steps {
		res, err := runPrimitive(ctx, tx, h.prims[s], c.params)
		if err != nil {
			fail = h.stepFailure(err)
			break
		}
		out = append(out, map[string]any{"primitive": s, "output": res})
	}
	if fail != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO steps`); err != nil {
			return h.internal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE steps`); err != nil {
		return h.internal(err)
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	var r *wire.Response
	if fail != nil {
		r = fail
	} else {
		r = h.success(c, k.SuccessStatus, map[string]any{"steps": out, "recipe_lineage": lineageOf(k)}, "C", ext)
	}
	r.Header.Set("Contract-Synthesized", k.ID)
	return r
}

// idempotent answers a request carrying Idempotency-Key: the first response
// for (Agent-ID, key) is stored and replayed to the same agent; other agents'
// keys are independent. A key reused for a different request is refused.
func (h *Host) idempotent(ctx context.Context, c *call, key string) *wire.Response {
	if len(key) > 255 {
		return h.refuse(400, "malformed-idempotency-key", "Idempotency-Key is limited to 255 bytes", nil)
	}
	unlock := h.idem.lock(c.agent.AgentID + "\x00" + key)
	defer unlock()
	fp := sha256.New()
	fmt.Fprintf(fp, "%s\x00%s\x00%s\x00", c.req.Method, c.req.Target, presented(c.req))
	fp.Write(c.req.Body)
	fpHex := hex.EncodeToString(fp.Sum(nil))
	var (
		stored, hdrs string
		status       int
		body         []byte
	)
	cutoff := c.now.Add(-time.Duration(h.cfg.Policies.IdempotencyTTLSeconds) * time.Second).UnixNano()
	err := h.db.QueryRowContext(ctx, `SELECT fingerprint, status, headers, body FROM idempotency WHERE agent_id = ? AND key = ? AND at >= ?`,
		c.agent.AgentID, key, cutoff).Scan(&stored, &status, &hdrs, &body)
	switch {
	case err == nil && stored != fpHex:
		return h.refuse(400, "idempotency-key-mismatch", "this Idempotency-Key was used for a different request", nil)
	case err == nil:
		hd := wire.Header{}
		_ = json.Unmarshal([]byte(hdrs), &hd)
		hd.Set("Idempotent-Replay", "true")
		return &wire.Response{Status: status, Header: hd, Body: body}
	case err != sql.ErrNoRows:
		return h.internal(err)
	}
	r := h.dispatch(ctx, c)
	if r.Status == 429 || r.Status == 408 || r.Status >= 500 {
		return r // transient: a retry should be evaluated afresh
	}
	h.finish(c, r)
	hb, _ := json.Marshal(r.Header)
	if _, err := h.db.ExecContext(ctx, `INSERT OR REPLACE INTO idempotency (agent_id, key, fingerprint, status, headers, body, at) VALUES (?,?,?,?,?,?,?)`,
		c.agent.AgentID, key, fpHex, r.Status, string(hb), r.Body, c.now.UnixNano()); err != nil {
		h.log.Error("agtp: storing idempotent response", "err", err)
	}
	return r
}
