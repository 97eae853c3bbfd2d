package agtp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	wire "github.com/parley-conformance/parley/wire/agtp"
)

const scopeInspectAll = "inspect:all"

// builtin serves the floor methods this host implements itself (Tier A).
func (h *Host) builtin(ctx context.Context, c *call) *wire.Response {
	switch c.req.Method {
	case "DISCOVER":
		return h.discover(ctx, c)
	case "PROPOSE":
		return h.propose(ctx, c)
	case "QUERY":
		if id, ok := strings.CutPrefix(c.req.Path, "/proposals/"); ok && id != "" && !strings.Contains(id, "/") {
			return h.queryProposal(ctx, c, id)
		}
	case "CONFIRM":
		if id := c.param("target_id"); strings.HasPrefix(id, "prop_") {
			return h.confirmProposal(ctx, c, id)
		}
	case "INSPECT":
		return h.inspect(ctx, c)
	case "SUSPEND":
		if sid := c.param("synthesis_id"); sid != "" {
			return h.suspendContract(ctx, c, sid)
		}
		if c.param("session_id") == "" {
			return h.refuse(400, "missing-parameter", "SUSPEND needs session_id or synthesis_id", nil)
		}
	case "REVOKE":
		switch c.param("target") {
		case "contract":
			return h.revokeContract(ctx, c, c.param("synthesis_id"))
		case "stale-contracts":
			return h.revokeStale(ctx, c)
		case "":
			if c.param("agent_id") == "" || c.param("reason") == "" {
				return h.refuse(400, "missing-parameter", "REVOKE needs agent_id and reason, or a target", nil)
			}
		default:
			return h.refuse(400, "invalid-parameter", "REVOKE target must be contract or stale-contracts", nil)
		}
	}
	return h.refuse(501, "not-implemented", c.req.Method+" is not implemented by this host in this form", nil)
}

func (h *Host) holds(c *call, token string) bool {
	return c.agent != nil && anyCovers(c.auth.effective, token)
}

func (h *Host) discover(ctx context.Context, c *call) *wire.Response {
	switch c.req.Path {
	case "/", "/methods":
		methods := make([]string, 0, len(h.catalog))
		for m := range h.catalog {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		eps := []map[string]any{}
		for _, e := range h.cfg.Endpoints {
			eps = append(eps, map[string]any{"method": e.Method, "path": e.Path, "tier": e.Tier, "description": e.Description,
				"authority_scope": h.prims[e.Primitive].Scopes})
		}
		persisted, err := listContracts(ctx, h.db, `WHERE persistent = 1 AND state = 'active' ORDER BY created_at, synthesis_id`)
		if err != nil {
			return h.internal(err)
		}
		for _, k := range persisted {
			var ep map[string]any
			_ = json.Unmarshal(k.Endpoint, &ep)
			eps = append(eps, map[string]any{"method": k.Method, "path": k.Path, "tier": "B", "description": ep["description"],
				"authority_scope": k.Scopes, "negotiation_origin": k.Origin, "synthesis_id": k.ID})
		}
		return h.success(c, 200, map[string]any{"server_id": h.cfg.ServerID, "methods": methods, "endpoints": eps}, "A", nil)
	case "/patterns":
		h.recMu.RLock()
		pats := []map[string]any{}
		for _, r := range h.recipes {
			pats = append(pats, map[string]any{"recipe_name": r.Name, "recipe_version": r.Version, "method": r.Method, "path": r.Path,
				"composed_of": r.Steps, "success_status": r.SuccessStatus})
		}
		h.recMu.RUnlock()
		for _, p := range h.cfg.Policies.Passthroughs {
			pats = append(pats, map[string]any{"recipe_name": nil, "recipe_version": nil, "method": p.Method, "path": p.Path,
				"composed_of": []string{p.Primitive}, "success_status": p.SuccessStatus})
		}
		return h.success(c, 200, map[string]any{"patterns": pats}, "A", nil)
	case "/contracts":
		if c.agent == nil {
			return h.refuse(262, "agent-id-required", "contracts are listed per agent", nil)
		}
		where, args := `WHERE state IN ('pending','active') AND agent_id = ?`, []any{c.agent.AgentID}
		if h.holds(c, scopeInspectAll) {
			where, args = `WHERE state IN ('pending','active')`, nil
		}
		ks, err := listContracts(ctx, h.db, where+` ORDER BY created_at, synthesis_id`, args...)
		if err != nil {
			return h.internal(err)
		}
		out := []map[string]any{}
		for _, k := range ks {
			out = append(out, contractView(k))
		}
		return h.success(c, 200, map[string]any{"contracts": out}, "A", nil)
	}
	return h.refuse(404, "not-found", "DISCOVER has no listing at this path", nil)
}

func (h *Host) inspect(ctx context.Context, c *call) *wire.Response {
	switch c.param("target") {
	case "contract":
		sid := c.param("synthesis_id")
		if sid == "" {
			return h.refuse(400, "missing-parameter", "INSPECT target=contract needs synthesis_id", nil)
		}
		k, err := getContract(ctx, h.db, sid)
		if err != nil {
			return h.internal(err)
		}
		if k == nil {
			return h.refuse(404, "contract-not-found", "no contract has this synthesis_id", nil)
		}
		if k.AgentID != c.agent.AgentID && !h.holds(c, scopeInspectAll) {
			return h.refuse(464, "contract-not-yours", "this contract is bound to another Agent-ID", nil)
		}
		return h.success(c, 200, contractView(k), "A", nil)
	case "rcns-attempt":
		id := c.param("attempt_id")
		var agent, method, path, reason string
		var sid sql.NullString
		var status int
		var at int64
		err := h.db.QueryRowContext(ctx, `SELECT agent_id, method, path, status, reason, synthesis_id, at FROM rcns_attempts WHERE attempt_id = ?`, id).
			Scan(&agent, &method, &path, &status, &reason, &sid, &at)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && agent != c.agent.AgentID && !h.holds(c, scopeInspectAll)) {
			return h.refuse(404, "attempt-not-found", "no gate evaluation of yours has this id", nil)
		}
		if err != nil {
			return h.internal(err)
		}
		v := map[string]any{"attempt_id": id, "agent_id": agent, "method": method, "path": path, "status": status,
			"reason": reason, "at": time.Unix(0, at).UTC().Format(time.RFC3339Nano)}
		if sid.Valid {
			v["synthesis_id"] = sid.String
		}
		return h.success(c, 200, v, "A", nil)
	case "lifecycle":
		agent := c.agent.AgentID
		if a := c.param("agent_id"); a != "" && a != agent {
			if !h.holds(c, scopeInspectAll) {
				return h.scopeRefusal(scopeInspectAll, anyCovers(c.auth.granted, scopeInspectAll))
			}
			agent = a
		}
		limit, _ := strconv.Atoi(c.param("limit"))
		evs, err := listEvents(ctx, h.db, agent, "", limit)
		if err != nil {
			return h.internal(err)
		}
		return h.success(c, 200, map[string]any{"agent_id": agent, "events": evs}, "A", nil)
	case "audit", "chain_head":
		return h.refuse(501, "not-implemented", "this host keeps no audit chain", nil)
	case "":
		return h.refuse(400, "missing-parameter", "INSPECT needs target", nil)
	}
	return h.refuse(400, "invalid-parameter", "unknown INSPECT target", nil)
}

// suspendContract is the caller release path: only the originator may
// release, and the release is recorded as rcns_release in its stream.
func (h *Host) suspendContract(ctx context.Context, c *call, sid string) *wire.Response {
	return h.releaseContract(ctx, c, sid, false, stateReleased, "caller-release")
}

// revokeContract is the revocation path: the originator or an inspect:all
// holder (the operator).
func (h *Host) revokeContract(ctx context.Context, c *call, sid string) *wire.Response {
	if sid == "" {
		return h.refuse(400, "missing-parameter", "REVOKE target=contract needs synthesis_id", nil)
	}
	return h.releaseContract(ctx, c, sid, true, stateRevoked, "revoked")
}

func (h *Host) releaseContract(ctx context.Context, c *call, sid string, operatorMay bool, state, reason string) *wire.Response {
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
	if k.AgentID != c.agent.AgentID && !(operatorMay && h.holds(c, scopeInspectAll)) {
		return h.refuse(403, "not-originator", "only the contract's originating agent may do this", nil)
	}
	if k.State != statePending && k.State != stateActive {
		return h.refuse(464, "contract-revoked", "this contract was already "+k.State, map[string]any{"state": k.State})
	}
	extra := map[string]any{"actor": c.agent.AgentID}
	if a := c.param("actor"); a != "" {
		extra["actor"] = a
	}
	if r := c.param("reason"); r != "" {
		extra["detail"] = r
	}
	if err := release(ctx, tx, k, state, reason, c.now, extra); err != nil {
		return h.internal(err)
	}
	if err := tx.Commit(); err != nil {
		return h.internal(err)
	}
	k.State = state
	return h.success(c, 200, map[string]any{"synthesis_id": sid, "state": state, "released": true}, "A", nil)
}

func (h *Host) revokeStale(ctx context.Context, c *call) *wire.Response {
	if !h.holds(c, scopeInspectAll) {
		return h.scopeRefusal(scopeInspectAll, anyCovers(c.auth.granted, scopeInspectAll))
	}
	mode := c.param("mode")
	if mode == "" {
		mode = h.cfg.Policies.RCNS.OnPolicyChange
	}
	if mode != SweepGrandfather && mode != SweepInvalidate {
		return h.refuse(400, "invalid-parameter", "mode must be grandfather or invalidate", nil)
	}
	actor := c.param("actor")
	if actor == "" {
		actor = c.agent.AgentID
	}
	res, err := h.Sweep(ctx, mode, actor)
	if err != nil {
		return h.internal(err)
	}
	return h.success(c, 200, res, "A", nil)
}

// SweepResult is the structured answer of the stale-contract sweep.
type SweepResult struct {
	Mode     string         `json:"mode"`
	Actor    string         `json:"actor"`
	Examined []SweepEntry   `json:"examined"`
	Skipped  []SweepEntry   `json:"skipped"`
	Counts   map[string]int `json:"counts"`
}

// SweepEntry is one contract the sweep looked at.
type SweepEntry struct {
	SynthesisID     string  `json:"synthesis_id"`
	AgentID         string  `json:"agent_id"`
	Method          string  `json:"method"`
	Path            string  `json:"path"`
	RecipeName      *string `json:"recipe_name"`
	CapturedVersion *string `json:"captured_version"`
	CurrentVersion  *string `json:"current_version"`
	Disposition     string  `json:"disposition"` // unchanged, grandfathered, evicted, skipped
	Reason          string  `json:"reason,omitempty"`
}

// Sweep compares every live contract's captured recipe version with the
// current policy. Grandfather reports drift; invalidate deletes drifted
// contracts (so they answer 404) and records rcns_release with reason
// policy-change-invalidation and the actor. Passthrough contracts are
// skipped; a removed recipe is drift with current_version null.
func (h *Host) Sweep(ctx context.Context, mode, actor string) (*SweepResult, error) {
	if err := h.expireDue(ctx); err != nil {
		return nil, err
	}
	now := h.now()
	h.recMu.RLock()
	current := map[string]string{}
	for _, r := range h.recipes {
		current[r.Name] = r.Version
	}
	h.recMu.RUnlock()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ks, err := listContracts(ctx, tx, `WHERE state IN ('pending','active') ORDER BY created_at, synthesis_id`)
	if err != nil {
		return nil, err
	}
	res := &SweepResult{Mode: mode, Actor: actor, Examined: []SweepEntry{}, Skipped: []SweepEntry{},
		Counts: map[string]int{"unchanged": 0, "grandfathered": 0, "evicted": 0, "skipped": 0}}
	for _, k := range ks {
		e := SweepEntry{SynthesisID: k.ID, AgentID: k.AgentID, Method: k.Method, Path: k.Path}
		if !k.RecipeName.Valid {
			e.Disposition, e.Reason = "skipped", "passthrough"
			res.Skipped = append(res.Skipped, e)
			res.Counts["skipped"]++
			continue
		}
		name, captured := k.RecipeName.String, k.RecipeVersion.String
		e.RecipeName, e.CapturedVersion = &name, &captured
		if cur, ok := current[name]; ok {
			e.CurrentVersion = &cur
		}
		switch {
		case e.CurrentVersion != nil && *e.CurrentVersion == captured:
			e.Disposition = "unchanged"
		case mode == SweepGrandfather:
			e.Disposition = "grandfathered"
		default:
			if _, err := tx.ExecContext(ctx, `DELETE FROM contracts WHERE synthesis_id = ?`, k.ID); err != nil {
				return nil, err
			}
			var cv any
			if e.CurrentVersion != nil {
				cv = *e.CurrentVersion
			}
			if err := emitRelease(ctx, tx, k, "policy-change-invalidation", now,
				map[string]any{"actor": actor, "current_version": cv}); err != nil {
				return nil, err
			}
			e.Disposition = "evicted"
		}
		res.Counts[e.Disposition]++
		res.Examined = append(res.Examined, e)
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	h.log.Info("agtp: stale-contract sweep", "mode", mode, "actor", actor, "counts", res.Counts)
	return res, nil
}
