package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Dispatcher step 6 (spec 7, 9): admission reserves concurrency and budget
// before anything is claimed, waits if it must, and rechecks authorization
// after the wait. A reservation is released when the claim fails; a charge
// made by the claim is never refunded.
//
// Budgets live in scopes. The operator gives an execution a root scope with
// a budget of tool calls; a workflow may open child scopes under it, each no
// larger than its parent. A dispatch is charged to the scope it names (or the
// execution's root scope when it names none) and to every ancestor of that
// scope: a child can neither exceed nor escape its parent, even summed over
// siblings. The charge is made inside the claim transaction under a
// compare-and-swap on each scope's count, so it holds across hosts sharing a
// store; the reservation that precedes it is this host's own.

// flight is one dispatch in progress, so that it can be cancelled: before its
// claim commits (it stops and nothing is claimed) or after (the handler's
// call is abandoned and the outcome is what that leaves).
type flight struct {
	mu         sync.Mutex
	opID       string
	claimed    bool
	cancelled  bool
	pre        context.Context // until the claim: the request's context, cancellable
	preCancel  context.CancelFunc
	exec       context.Context // after the claim: outlives the client, cancellable
	execCancel context.CancelFunc
	decided    chan struct{} // closed once the claim committed or the dispatch ended without one
	once       sync.Once
}

func (h *Host) newFlight(ctx context.Context) *flight {
	f := &flight{decided: make(chan struct{})}
	f.pre, f.preCancel = context.WithCancel(ctx)
	f.exec, f.execCancel = context.WithCancel(context.WithoutCancel(ctx))
	return f
}

// track files the flight under its operation id, once that is known.
func (h *Host) track(f *flight, opID string) {
	f.mu.Lock()
	f.opID = opID
	f.mu.Unlock()
	h.flightMu.Lock()
	if h.flights == nil {
		h.flights = map[string]*flight{}
	}
	h.flights[opID] = f
	h.flightMu.Unlock()
}

// decide records whether the claim committed.
func (f *flight) decide(claimed bool) {
	f.mu.Lock()
	f.claimed = f.claimed || claimed
	f.mu.Unlock()
	f.once.Do(func() { close(f.decided) })
}

func (f *flight) wasCancelled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

// cancel stops the flight wherever it is and says where that was.
func (f *flight) cancel() (claimed bool) {
	f.mu.Lock()
	f.cancelled = true
	f.mu.Unlock()
	f.preCancel()
	f.execCancel()
	select {
	case <-f.decided:
	case <-time.After(10 * time.Second):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimed
}

// land ends a flight.
func (h *Host) land(f *flight) {
	f.decide(false)
	f.preCancel()
	f.execCancel()
	f.mu.Lock()
	id := f.opID
	f.mu.Unlock()
	if id == "" {
		return
	}
	h.flightMu.Lock()
	if h.flights[id] == f {
		delete(h.flights, id)
	}
	h.flightMu.Unlock()
}

// cancelledDenial is the answer to a dispatch cancelled before its claim.
func cancelledDenial(step int, opID string) *Denial {
	d := deny(409, "cancelled", "cancelled", step, "the dispatch was cancelled before its claim: nothing was claimed or sent, and the permit is still usable")
	if opID != "" {
		d.Detail = map[string]any{"operation_id": opID}
	}
	return d
}

// gate is a destination account's own admission limit (step 6): a
// destination that takes few messages at once limits the dispatches to it
// that may be past admission, before the host's own limit applies.
type gate struct {
	account string
	slots   chan struct{}
	waiting atomic.Int64
	wait    time.Duration
}

// gates builds the limits of every account of the host's destinations that
// declares one.
func gates(cfg Config) map[string]*gate {
	out := map[string]*gate{}
	for _, d := range []Destination{cfg.Email, cfg.Webhook} {
		for _, a := range append([]Destination{d}, d.Accounts...) {
			if a.MaxConcurrentDispatches <= 0 {
				continue
			}
			wait := a.AdmissionWaitMS
			if wait <= 0 {
				wait = cfg.AdmissionWaitMS
			}
			out[a.key()] = &gate{account: a.Account, slots: make(chan struct{}, a.MaxConcurrentDispatches), wait: time.Duration(wait) * time.Millisecond}
		}
	}
	return out
}

// gateOf is the admission limit of the account ev's operation goes to, if
// it has one.
func (h *Host) gateOf(ev *evaluation) *gate {
	d, ok := h.destination(ev.impl, &ev.contract.OperationContract)
	if !ok {
		return nil
	}
	return h.gates[d.key()]
}

// admission holds what step 6 reserved for one dispatch.
type admission struct {
	h        *Host
	gate     *gate // the account slot held, if any
	slot     bool
	chain    []string // scope ids charged, innermost first
	reserved bool
}

// releaseBudget gives back the reservation (after the claim charged it, or
// when no claim happened).
func (a *admission) releaseBudget() {
	if !a.reserved {
		return
	}
	a.reserved = false
	a.h.admMu.Lock()
	for _, id := range a.chain {
		a.h.reserved[id]--
		if a.h.reserved[id] <= 0 {
			delete(a.h.reserved, id)
		}
	}
	a.h.admMu.Unlock()
}

func (a *admission) release() {
	a.releaseBudget()
	if a.slot {
		a.slot = false
		<-a.h.admitSlots
	}
	if a.gate != nil {
		<-a.gate.slots
		a.gate = nil
	}
}

// scopeRow is a budget scope.
type scopeRow struct {
	ID, ExecutionID, ParentID string
	ToolCalls, Used           int64
	CreatedAt                 int64
}

func (s *scopeRow) view() map[string]any {
	return map[string]any{"scope_id": s.ID, "execution_id": s.ExecutionID, "parent_scope_id": nullStr(s.ParentID),
		"budget": map[string]any{"tool_calls": s.ToolCalls}, "used": map[string]any{"tool_calls": s.Used},
		"created_at": msTime(s.CreatedAt)}
}

func (h *Host) loadScope(ctx context.Context, q querier, id string) (*scopeRow, error) {
	s := &scopeRow{}
	var parent sql.NullString
	err := q.QueryRowContext(ctx, `SELECT id, execution_id, parent_id, tool_calls, used, created_at FROM scopes WHERE id=?`, id).
		Scan(&s.ID, &s.ExecutionID, &parent, &s.ToolCalls, &s.Used, &s.CreatedAt)
	s.ParentID = parent.String
	return s, err
}

// scopeChain resolves the scopes a dispatch is charged to: the one it names
// and its ancestors, or the execution's root scope. None when the execution
// has no budget.
var sqlRootScope = hot(`SELECT id FROM scopes WHERE execution_id=? AND parent_id IS NULL`)

func (h *Host) scopeChain(ctx context.Context, execID, scopeID string) ([]*scopeRow, *Denial, error) {
	if scopeID == "" {
		var root string
		err := h.st.row(ctx, h.st.db, sqlRootScope, execID).Scan(&root)
		if isNoRows(err) {
			return nil, nil, nil
		} else if err != nil {
			return nil, nil, err
		}
		scopeID = root
	}
	var chain []*scopeRow
	for id, depth := scopeID, 0; id != "" && depth < 32; depth++ {
		s, err := h.loadScope(ctx, h.st.db, id)
		if isNoRows(err) {
			return nil, deny(422, "unknown_scope", "schema_error", 6, "no budget scope %q", id), nil
		} else if err != nil {
			return nil, nil, err
		}
		if s.ExecutionID != execID {
			return nil, deny(403, "scope_mismatch", "authorization_denied", 6, "scope %s belongs to another execution", s.ID), nil
		}
		chain = append(chain, s)
		id = s.ParentID
	}
	return chain, nil, nil
}

// admit is step 6: a concurrency slot (waiting at most admission_wait_ms,
// or until the dispatch is cancelled), then one tool call reserved in every
// scope of the chain.
func (h *Host) admit(f *flight, chain []*scopeRow, g *gate) (*admission, *Denial, error) {
	a := &admission{h: h}
	h.waiting.Add(1)
	if g != nil {
		// The account's own slot first: a dispatch waiting for its
		// destination holds none of the host's.
		g.waiting.Add(1)
		wait := time.NewTimer(g.wait)
		select {
		case g.slots <- struct{}{}:
			a.gate = g
		case <-wait.C:
		case <-f.pre.Done():
		}
		wait.Stop()
		g.waiting.Add(-1)
		if a.gate == nil {
			h.waiting.Add(-1)
			if f.wasCancelled() {
				return nil, cancelledDenial(6, f.opID), nil
			}
			if f.pre.Err() != nil {
				return nil, nil, f.pre.Err()
			}
			d := deny(429, "capacity_unavailable", "capacity", 6, "destination account %s took no more dispatches in time; nothing was claimed", g.account)
			d.Retryable = true
			return nil, d, nil
		}
	}
	wait := time.NewTimer(time.Duration(h.cfg.AdmissionWaitMS) * time.Millisecond)
	select {
	case h.admitSlots <- struct{}{}:
		a.slot = true
	case <-wait.C:
	case <-f.pre.Done():
	}
	wait.Stop()
	h.waiting.Add(-1)
	if !a.slot {
		a.release()
	}
	switch {
	case a.slot:
	case f.wasCancelled():
		return nil, cancelledDenial(6, f.opID), nil
	case f.pre.Err() != nil:
		return nil, nil, f.pre.Err()
	default:
		d := deny(429, "capacity_unavailable", "capacity", 6, "no dispatch capacity became free in time; nothing was claimed")
		d.Retryable = true
		return nil, d, nil
	}
	if len(chain) == 0 {
		return a, nil, nil
	}
	h.admMu.Lock()
	defer h.admMu.Unlock()
	for _, s := range chain {
		if s.Used+int64(h.reserved[s.ID]) >= s.ToolCalls {
			a.release()
			d := deny(403, "budget_exhausted", "capacity", 6, "budget scope %s has spent its %d tool calls", s.ID, s.ToolCalls)
			d.Detail = map[string]any{"scope_id": s.ID, "budget": s.ToolCalls, "used": s.Used}
			return nil, d, nil
		}
	}
	for _, s := range chain {
		a.chain = append(a.chain, s.ID)
		h.reserved[s.ID]++
	}
	a.reserved = true
	return a, nil, nil
}

// charge spends one tool call in every scope of the chain, inside the claim
// transaction: the compare-and-swap refuses a budget another host spent
// first.
func (h *Host) charge(tx *sql.Tx, chain []string) error {
	for _, id := range chain {
		res, err := tx.Exec(`UPDATE scopes SET used=used+1 WHERE id=? AND used < tool_calls`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			d := deny(403, "budget_exhausted", "capacity", 7, "budget scope %s was spent while this dispatch waited", id)
			d.Detail = map[string]any{"scope_id": id}
			return errAbort{d}
		}
	}
	return nil
}

type scopeBody struct {
	ExecutionID string `json:"execution_id,omitempty"`
	Budget      struct {
		ToolCalls int64 `json:"tool_calls"`
	} `json:"budget"`
}

// hCreateScope: the operator gives an execution its root budget scope. An
// execution has one root: a second would be a way around the first.
func (h *Host) hCreateScope(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var b scopeBody
	if d := decode(r, &b); d != nil {
		writeDenial(w, d)
		return
	}
	if b.ExecutionID == "" || b.Budget.ToolCalls < 0 {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "execution_id and a budget of tool_calls (0 or more) are required"))
		return
	}
	s := &scopeRow{ID: newID("scope_"), ExecutionID: b.ExecutionID, ToolCalls: b.Budget.ToolCalls, CreatedAt: h.nowMS()}
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM scopes WHERE execution_id=? AND parent_id IS NULL`, s.ExecutionID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errAbort{deny(409, "scope_exists", "request", 0, "execution %s already has its budget scope; open child scopes under it", s.ExecutionID)}
		}
		if _, err := tx.Exec(`INSERT INTO scopes(id,execution_id,parent_id,tool_calls,used,created_at) VALUES(?,?,NULL,?,0,?)`,
			s.ID, s.ExecutionID, s.ToolCalls, s.CreatedAt); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "scope_opened", ExecutionID: s.ExecutionID, Detail: "root scope " + s.ID})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, s.view())
}

// hOpenChildScope: a workflow opens a nested scope. It may be as large as
// its parent, never larger; what it spends is spent in the parent too.
func (h *Host) hOpenChildScope(w http.ResponseWriter, r *http.Request) {
	var b scopeBody
	if d := decode(r, &b); d != nil {
		writeDenial(w, d)
		return
	}
	var s *scopeRow
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		parent, err := h.loadScope(r.Context(), tx, r.PathValue("id"))
		if err != nil {
			return err
		}
		if b.ExecutionID != "" && b.ExecutionID != parent.ExecutionID {
			return errAbort{deny(403, "scope_mismatch", "authorization_denied", 0, "scope %s belongs to another execution", parent.ID)}
		}
		if b.Budget.ToolCalls < 0 || b.Budget.ToolCalls > parent.ToolCalls {
			d := deny(403, "budget_exceeds_parent", "capacity", 0, "a child scope may have at most its parent's %d tool calls", parent.ToolCalls)
			d.Detail = map[string]any{"parent_scope_id": parent.ID, "parent_budget": parent.ToolCalls}
			return errAbort{d}
		}
		s = &scopeRow{ID: newID("scope_"), ExecutionID: parent.ExecutionID, ParentID: parent.ID, ToolCalls: b.Budget.ToolCalls, CreatedAt: h.nowMS()}
		if _, err := tx.Exec(`INSERT INTO scopes(id,execution_id,parent_id,tool_calls,used,created_at) VALUES(?,?,?,?,0,?)`,
			s.ID, s.ExecutionID, s.ParentID, s.ToolCalls, s.CreatedAt); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "scope_opened", ExecutionID: s.ExecutionID, Detail: "child scope " + s.ID + " of " + parent.ID})
	})
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such scope"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, s.view())
}

func (h *Host) hGetScope(w http.ResponseWriter, r *http.Request) {
	s, err := h.loadScope(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such scope"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, s.view())
}

type cancelBody struct {
	GrantToken string `json:"grant_token"`
}

// hCancel cancels the dispatch of an operation that is in flight on this
// host. Before the claim commits the dispatch stops and nothing is claimed;
// after it, the handler's call is abandoned: a write whose call had started
// is Unknown and its permit stays consumed.
func (h *Host) hCancel(w http.ResponseWriter, r *http.Request) {
	var b cancelBody
	if d := decode(r, &b); d != nil {
		writeDenial(w, d)
		return
	}
	id := r.PathValue("id")
	op, err := h.loadOperation(r.Context(), h.st.db, id)
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such operation"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	g, err := h.grantByToken(r.Context(), h.st.db, b.GrantToken)
	if err != nil || g.Subject != op.Principal {
		writeDenial(w, deny(403, "authority_missing", "authorization_denied", 0, "only a grant of the operation's principal cancels it"))
		return
	}
	h.flightMu.Lock()
	f := h.flights[id]
	h.flightMu.Unlock()
	if f == nil {
		writeDenial(w, deny(409, "nothing_to_cancel", "request", 0, "no dispatch of operation %s is in flight on this host", id))
		return
	}
	phase := "before_claim"
	if f.cancel() {
		phase = "after_claim"
	}
	writeJSON(w, 200, map[string]any{"operation_id": id, "cancelled": true, "phase": phase})
}

// hAdmissionSeam reports step 6's state: for a suite that must know a
// dispatch is waiting for capacity before it acts.
//
// With ?account=NAME it reports that destination account's own limit
// instead of the host's (capacity, in_use, waiting), with the host's
// reservations; an account without a limit of its own is 404.
func (h *Host) hAdmissionSeam(w http.ResponseWriter, r *http.Request) {
	h.admMu.Lock()
	res := map[string]any{}
	for k, v := range h.reserved {
		res[k] = v
	}
	h.admMu.Unlock()
	if name := r.URL.Query().Get("account"); name != "" {
		for _, g := range h.gates {
			if g.account == name {
				writeJSON(w, 200, map[string]any{"account": name, "capacity": cap(g.slots), "in_use": len(g.slots), "waiting": g.waiting.Load(), "reserved": res})
				return
			}
		}
		writeDenial(w, deny(404, "not_found", "request", 0, "account %q has no admission limit of its own on this host", name))
		return
	}
	writeJSON(w, 200, map[string]any{"capacity": cap(h.admitSlots), "in_use": len(h.admitSlots), "waiting": h.waiting.Load(), "reserved": res})
}

// parallel branches (spec 9).
type parallelBranch struct {
	Operation   string          `json:"operation"`
	Arguments   json.RawMessage `json:"arguments"`
	PermitToken string          `json:"permit_token,omitempty"`
}

type parallelRequest struct {
	Mode        string           `json:"mode"`
	ExecutionID string           `json:"execution_id"`
	Principal   string           `json:"principal"`
	AgentID     string           `json:"agent_id"`
	GrantToken  string           `json:"grant_token"`
	ScopeID     string           `json:"scope_id,omitempty"`
	Branches    []parallelBranch `json:"branches"`
}

// hParallel runs branches of a workflow at once: a map (every branch runs)
// or a race (the first branch to complete wins and the others are
// cancelled). Every branch goes through the whole dispatcher. Branches
// receive disjoint permits: a map whose branches share one is refused whole
// before anything runs, and no protected write may join a race.
func (h *Host) hParallel(w http.ResponseWriter, r *http.Request) {
	var req parallelRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if (req.Mode != "map" && req.Mode != "race") || len(req.Branches) == 0 || len(req.Branches) > 32 {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "mode must be map or race, with 1 to 32 branches"))
		return
	}
	seen := map[string]int{}
	for i, b := range req.Branches {
		if b.PermitToken == "" {
			continue
		}
		if j, dup := seen[b.PermitToken]; dup {
			d := deny(403, "permit_shared_across_branches", "authorization_denied", 0,
				"branches %d and %d present one permit: a permit is affine, and parallel branches receive disjoint permits", j, i)
			d.Detail = map[string]any{"branches": []int{j, i}}
			writeDenial(w, d)
			return
		}
		seen[b.PermitToken] = i
	}
	if req.Mode == "race" {
		for _, b := range req.Branches {
			c, err := h.loadContract(r.Context(), h.st.db, b.Operation)
			if err == nil && contains(c.PossibleEffects, "external_write") {
				writeDenial(w, deny(403, "unsupported_protected_race", "authorization_denied", 4,
					"%s is a protected external write and cannot run inside a race: cancelling the loser cannot retract its effect", b.Operation))
				return
			} else if err != nil && !isNoRows(err) {
				h.fail(w, err)
				return
			}
		}
	}
	n := len(req.Branches)
	results := make([]map[string]any, n)
	flights := make([]*flight, n)
	for i := range flights {
		flights[i] = h.newFlight(r.Context())
	}
	var winner atomic.Int64
	winner.Store(-1)
	var wg sync.WaitGroup
	for i, b := range req.Branches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dr := &dispatchRequest{actionRequest: actionRequest{ExecutionID: req.ExecutionID, Principal: req.Principal, AgentID: req.AgentID,
				Operation: b.Operation, Arguments: b.Arguments, GrantToken: req.GrantToken},
				PermitToken: b.PermitToken, ScopeID: req.ScopeID, Context: ExecContext{Race: req.Mode == "race"}}
			defer h.land(flights[i])
			op, d, err := h.dispatchFlight(dr, flights[i])
			res := map[string]any{"index": i}
			switch {
			case d != nil:
				h.auditDenial(dr, d)
				res["status"], res["error"] = d.Status, d
			case err != nil:
				h.log.Error("agl: parallel branch failed", "err", err)
				res["status"], res["error"] = 500, deny(500, "persistence_failure", "persistence_failure", 0, "the operation store could not complete the branch")
			default:
				res["status"], res["operation"] = 200, op.view()
				if req.Mode == "race" && op.State == "Completed" && winner.CompareAndSwap(-1, int64(i)) {
					for j, f := range flights {
						if j != i {
							go f.cancel()
						}
					}
				}
			}
			results[i] = res
		}()
	}
	wg.Wait()
	out := map[string]any{"mode": req.Mode, "results": results}
	if req.Mode == "race" {
		out["winner"] = nil
		if wi := winner.Load(); wi >= 0 {
			out["winner"] = wi
		}
	}
	writeJSON(w, 200, out)
}

// errCancelled marks a claim transaction aborted by a cancellation.
var errCancelled = errors.New("agl: dispatch cancelled")
