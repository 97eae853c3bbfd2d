package agl

// Steps for dispatcher step 6 (admission: concurrency and budget scopes),
// cancellation, and parallel branches (map and race): spec sections 7 and 9.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
)

const (
	statusImpl = "email.status/v1"
)

// named is a dispatch the scenario started and will wait for by name.
type named struct {
	done chan asyncResult
	// answer is the host's answer, kept once answered is set, for steps
	// that must know the dispatch ended without waiting on done.
	answer    asyncResult
	answered  atomic.Bool
	opID      string
	permitID  string
	permitTok string
}

// ownScope says whether scope id is one the scenario opened.
func (s *state) ownScope(id string) bool {
	if id == s.rootScope {
		return id != ""
	}
	for _, sid := range s.scopes {
		if sid == id {
			return true
		}
	}
	return false
}

// approvedSend is one of several approved sends a scenario holds at once.
type approvedSend struct{ handle, permitID, permitToken, opID string }

// admissionState reads the host's step-6 seam for the scenario's email
// account: its own admission limit (other scenarios dispatch on the same
// host, each to its own account).
func (s *state) admissionState(ctx context.Context) (map[string]any, error) {
	w := steps.From(ctx)
	if s.mail == nil {
		return nil, steps.Fault("describe the AGL host first")
	}
	r, err := w.Seam(ctx, http.MethodGet, seamPath+"/admission?account="+url.QueryEscape(s.mail.account), nil, nil)
	if err != nil {
		return nil, err
	}
	if err := okAnswer(w, r, "agl/seam-admission.json", "the admission seam answered"); err != nil {
		return nil, err
	}
	return r.JSON()
}

// poll reads until ok holds. It gives up only after 250 reads 20 ms apart
// in a row (5 s on an idle machine, more on a busy one, see steps.Await)
// while nothing the scenario started is in flight; the waiting asserts
// nothing.
func poll(ctx context.Context, what string, read func() (bool, error)) error {
	s := st(ctx)
	return steps.Await(ctx, steps.Poll{What: what, Every: 20 * time.Millisecond, Rounds: 250, InFlight: func() bool { return s.inflight.Load() > 0 }},
		func() (bool, string, error) {
			ok, err := read()
			return ok, "", err
		})
}

// okAnswer asserts a read the step depends on answered 200 in its schema;
// what names the read in the failure.
func okAnswer(w *steps.World, r *steps.Response, schema, what string) error {
	if err := w.Assert(r.Status == http.StatusOK, "%s: %s", what, r); err != nil {
		return err
	}
	return w.ExpectSchema(schema, r.Body)
}

// waitPaused returns once the host's seam reports a pause armed at boundary
// has fired: a dispatch is held there. What the host says while it is held
// is only meaningful after that, however slowly the host got there.
func waitPaused(ctx context.Context, boundary string) error {
	w, op := steps.From(ctx), st(ctx).sendOp
	return poll(ctx, "no dispatch had reached the pause at "+boundary, func() (bool, error) {
		r, err := w.Seam(ctx, http.MethodGet, seamPath+"/faults", nil, nil)
		if err != nil {
			return false, err
		}
		m, err := r.JSON()
		if err != nil {
			return false, err
		}
		list, _ := m["faults"].([]any)
		for _, e := range list {
			f, _ := e.(map[string]any)
			// Only the scenario's own faults: others arm theirs on the
			// same host, each for its own operation.
			if n := intOf(f["fired"]); str(f, "boundary") == boundary && str(f, "operation") == op && n > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

func (s *state) openScope(ctx context.Context, path, role string, body map[string]any) (*steps.Response, error) {
	return s.do(ctx, http.MethodPost, api+path, role, body)
}

// scopeID resolves a scope name a step uses: "root" is the execution's
// budget, "none" names no scope at all.
func (s *state) scopeID(name string) (string, error) {
	switch name {
	case "none":
		return "", nil
	case "root":
		if s.rootScope == "" {
			return "", steps.Fault("the execution has no budget")
		}
		return s.rootScope, nil
	}
	id, ok := s.scopes[name]
	if !ok {
		return "", steps.Fault("no scope named %q", name)
	}
	return id, nil
}

func registerAdmission(c *steps.Catalog) {
	c.Given(`^the host admits (\d+) dispatch(?:es)? at a time and lets a dispatch wait (\d+) ms for capacity$`, func(ctx context.Context, n, ms int) error {
		// An account that takes one dispatch at a time, leased in place of
		// the scenario's email account: the fixture's narrow roster (a wait
		// that runs out within a scenario) or its patient one (a wait no
		// scenario outlasts, for acting while a dispatch waits).
		roster := map[int]string{8000: fixtures.AGLRosterEmailNarrow, 300000: fixtures.AGLRosterEmailPatient}[ms]
		if n != 1 || roster == "" {
			return steps.Fault("the narrow email accounts admit 1 dispatch at a time and let one wait 8000 ms, the patient ones 300000 ms; the scenario asks for %d and %d ms", n, ms)
		}
		s, w := st(ctx), steps.From(ctx)
		if !s.described || s.ready {
			return steps.Fault("an account's admission is chosen after the host is described and before the contracts are registered")
		}
		d, err := leaseDestination(w, roster)
		if err != nil {
			return err
		}
		s.mail = d
		return nil
	})
	c.When(`^the host will hold the next dispatch (in the claim|at the external call) until the suite releases it(?:, or pause (\d+) ms where it cannot hold)?$`, func(ctx context.Context, where, fallback string) error {
		ms := holdFallbackMS[holdBoundary[where]]
		if fallback != "" {
			n, err := strconv.Atoi(fallback)
			if err != nil {
				return steps.Fault("a pause of %q ms", fallback)
			}
			ms = n
		}
		return st(ctx).armHold(ctx, holdBoundary[where], ms)
	}).WaitsAsWritten(time.Millisecond) // the pause asked of a host that cannot hold: its scenario waits on purpose that long (or, holding, for the admission wait it outlasts), so its file starts first
	c.When(`^the suite releases the dispatch held (in the claim|at the external call)$`, func(ctx context.Context, where string) error {
		return st(ctx).releaseHold(ctx, holdBoundary[where])
	})
	c.When(`^the host will fail to persist the next (\d+) claims$`, func(ctx context.Context, n int) error {
		return st(ctx).seamFault(ctx, "claim", "fail", map[string]any{"count": n})
	})

	// Dispatches in flight, by name.
	c.When(`^the agent starts dispatching the approved send as "([^"]*)"$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		body, err := s.approvedBody()
		if err != nil {
			return err
		}
		if s.named == nil {
			s.named = map[string]*named{}
		}
		n := &named{done: make(chan asyncResult, 1), opID: s.opID, permitID: s.permitID, permitTok: s.permitToken}
		s.named[name], s.lastNamed = n, name
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Add(-1)
			r, err := s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, body, false)
			n.answer = asyncResult{r, err}
			n.answered.Store(true)
			n.done <- n.answer
		}()
		return nil
	})
	c.When(`^dispatch "([^"]*)" finishes$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		n, ok := s.named[name]
		if !ok {
			return steps.Fault("no dispatch named %q was started", name)
		}
		res := <-n.done
		if res.err != nil {
			return res.err
		}
		steps.From(ctx).SetLast(res.r)
		s.noteOperation(res.r)
		return nil
	})
	c.When(`^the host has a dispatch waiting for capacity$`, func(ctx context.Context) error {
		s := st(ctx)
		last := s.named[s.lastNamed]
		return poll(ctx, "no dispatch was waiting for capacity", func() (bool, error) {
			m, err := s.admissionState(ctx)
			if err != nil {
				return false, err
			}
			if intOf(m["waiting"]) >= 1 {
				return true, nil
			}
			// The dispatch started last is the one that should wait: if
			// the host has answered it already, it did not wait, and no
			// later read can show it waiting (while the other dispatch is
			// held, nothing else frees the slot).
			if last != nil && last.answered.Load() {
				if last.answer.err != nil {
					return false, last.answer.err
				}
				return false, steps.Fail("dispatch %q was answered without waiting for capacity (no read showed a dispatch waiting): %s", s.lastNamed, last.answer.r)
			}
			return false, nil
		})
	})
	c.When(`^the host has a dispatch paused (in the claim|at the external call)$`, func(ctx context.Context, where string) error {
		boundary := map[string]string{"in the claim": "claim", "at the external call": "external_call"}[where]
		return waitPaused(ctx, boundary)
	})
	c.Then(`^the host holds no admission slot and no budget reservation$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.admissionState(ctx)
		if err != nil {
			return err
		}
		// Reservations are by scope: the scenario's own scopes are the
		// ones it may speak for on a shared host.
		all, _ := m["reserved"].(map[string]any)
		res := map[string]any{}
		for id, n := range all {
			if s.ownScope(id) {
				res[id] = n
			}
		}
		return w.Assert(steps.Text(m["in_use"]) == "0" && steps.Text(m["waiting"]) == "0" && len(res) == 0,
			"with nothing in flight the host holds %v slot(s) of account %s, has %v waiting and reserves %v", m["in_use"], s.mail.account, m["waiting"], res)
	})
	c.Then(`^the host soon holds no admission slot for the account$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		var last map[string]any
		err := poll(ctx, "the host still holds a slot of the account or has a dispatch waiting", func() (bool, error) {
			m, err := s.admissionState(ctx)
			last = m
			return err == nil && steps.Text(m["in_use"]) == "0" && steps.Text(m["waiting"]) == "0", err
		})
		if err != nil {
			return err
		}
		return w.Assert(last != nil, "no admission figures were read")
	})
	c.Then(`^the destination was sent only dispatch "([^"]*)"'s message$`, func(ctx context.Context, name string) error {
		s, w := st(ctx), steps.From(ctx)
		n, ok := s.named[name]
		if !ok || n.opID == "" {
			return steps.Fault("no dispatch named %q with an operation", name)
		}
		w.Observe(nil)
		sent := s.mail.sends()
		if err := w.Assert(len(sent) == 1, "the destination was asked for %d send(s), want only dispatch %q's", len(sent), name); err != nil {
			return err
		}
		return w.Assert(sent[0].operation == n.opID, "the destination was asked to send operation %q, want dispatch %q's %q", sent[0].operation, name, n.opID)
	})
	c.When(`^the agent dispatches the approved send (\d+) times, one after another$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		s.results = nil
		for i := 0; i < n; i++ {
			b, err := s.approvedBody()
			if err != nil {
				return err
			}
			r, err := s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, b, true)
			if err != nil {
				return err
			}
			s.results = append(s.results, r)
		}
		return nil
	})
	c.Then(`^each of those dispatches was refused with status 500, code "persistence_failure" and no effect$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		for _, r := range s.results {
			m, _ := r.JSON()
			if err := w.Assert(r.Status == 500 && str(m, "error.code") == "persistence_failure" && str(m, "error.detail.effect") == "none" && m != nil,
				"a dispatch whose claim could not be persisted: %s", r); err != nil {
				return err
			}
		}
		return w.Assert(len(s.results) > 0, "no dispatch was made")
	})
	c.Then(`^the destination received (\d+) messages$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		return s.expectMessages(ctx, s.mail, "destination", n)
	})

	// The barrier: contenders meet before the transaction they race for.
	// A host without the barrier seam is raced for real, over many rounds
	// (contention.go).
	c.When(`^the hosts? holds? the next (\d+) (claimers|proposers) until all have arrived$`, func(ctx context.Context, n int, who string) error {
		return st(ctx).armBarrier(ctx, who, map[string][]string{"claimers": {"claim"}, "proposers": {"propose"}}[who], n)
	})
	c.When(`^the host holds the next claimer and editor until both have arrived$`, func(ctx context.Context) error {
		return st(ctx).armBarrier(ctx, "claimer and editor", []string{"claim", "edit"}, 2)
	})

	// Budget scopes.
	c.Setup(preBudget, `^the operator gives the execution a budget of (\d+) tool calls?$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		r, err := s.openScope(ctx, "/scopes", roleOperator, map[string]any{"execution_id": s.exec, "budget": map[string]any{"tool_calls": n}})
		m, err := got(r, err).want(preBudget, 201)
		if err != nil {
			return err
		}
		if s.rootScope = str(m, "scope_id"); s.rootScope == "" {
			return steps.Precondition(preBudget, steps.Fail("the execution's budget scope has no scope_id: %s", r))
		}
		return nil
	})
	c.When(`^the workflow opens a child scope of the execution's budget with (\d+) tool calls?$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if s.rootScope == "" {
			return steps.Fault("the execution has no budget")
		}
		_, err := s.openScope(ctx, "/scopes/"+s.rootScope+"/children", roleNone, map[string]any{"budget": map[string]any{"tool_calls": n}})
		return err
	})
	c.Setup(preBudget, `^the workflow opens two child scopes, "([^"]*)" and "([^"]*)", each with (\d+) tool calls$`, func(ctx context.Context, a, b string, n int) error {
		s := st(ctx)
		if s.rootScope == "" {
			return steps.Fault("the execution has no budget")
		}
		s.scopes = map[string]string{}
		for _, name := range []string{a, b} {
			r, err := s.openScope(ctx, "/scopes/"+s.rootScope+"/children", roleNone, map[string]any{"budget": map[string]any{"tool_calls": n}})
			m, err := got(r, err).want(preBudget, 201)
			if err != nil {
				return err
			}
			if s.scopes[name] = str(m, "scope_id"); s.scopes[name] == "" {
				return steps.Precondition(preBudget, steps.Fail("the child scope has no scope_id: %s", r))
			}
		}
		return nil
	})
	c.When(`^the agent dispatches an approved send in scope "([^"]*)"$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		id, err := s.scopeID(name)
		if err != nil {
			return err
		}
		if err := s.approveSend(ctx, "bob@example.com"); err != nil {
			return err
		}
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		if id != "" {
			b["scope_id"] = id
		}
		return s.dispatch(ctx, false, b)
	})
	c.Then(`^the execution's budget shows (\d+) tool calls? used$`, func(ctx context.Context, n int) error {
		s, w := st(ctx), steps.From(ctx)
		r, m, err := s.read(ctx, api+"/scopes/"+s.rootScope, roleNone)
		if err != nil {
			return err
		}
		if err := okAnswer(w, r, "agl/scope.json", "reading the execution's budget"); err != nil {
			return err
		}
		used, _ := steps.Lookup(m, "used.tool_calls")
		return w.Assert(steps.Text(used) == strconv.Itoa(n), "the execution's budget shows %s tool call(s) used, want %d: %s", steps.Text(used), n, r)
	})
	c.Then(`^the refusal names the execution's budget as the one spent$`, func(ctx context.Context) error {
		s := st(ctx)
		return steps.From(ctx).ExpectField("error.detail.scope_id", s.rootScope)
	})

	// Several approved sends at once, and parallel maps over them.
	c.Setup(preApproved, `^the principal has (\d+) approved sends of drafts to "([^"]*)"$`, func(ctx context.Context, n int, to string) error {
		s := st(ctx)
		s.approved = nil
		for i := 0; i < n; i++ {
			if err := s.approveSend(ctx, to); err != nil {
				return err
			}
			s.approved = append(s.approved, approvedSend{handle: s.propHandle, permitID: s.permitID, permitToken: s.permitToken, opID: s.opID})
		}
		return nil
	})
	c.When(`^the workflow maps branches over the approved sends, presenting the permits of sends "([^"]*)"$`, func(ctx context.Context, list string) error {
		s := st(ctx)
		var branches []any
		s.branchSends = nil
		for _, p := range csv(list) {
			i, err := strconv.Atoi(p)
			if err != nil || i < 1 || i > len(s.approved) {
				return steps.Fault("no approved send %q", p)
			}
			a := s.approved[i-1]
			s.branchSends = append(s.branchSends, a)
			branches = append(branches, map[string]any{"operation": s.sendOp, "arguments": map[string]any{"draft": a.handle}, "permit_token": a.permitToken})
		}
		_, err := s.do(ctx, http.MethodPost, api+"/parallel", roleNone, map[string]any{"mode": "map", "execution_id": s.exec,
			"principal": s.me.principal, "agent_id": s.me.agent, "grant_token": s.grant(), "branches": branches})
		return err
	})
	c.Then(`^no approved send's permit is consumed$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		for _, a := range s.approved {
			r, m, err := s.read(ctx, api+"/permits/"+a.permitID, roleNone)
			if err != nil {
				return err
			}
			if err := w.Assert(r.Status == http.StatusOK && str(m, "permit_id") == a.permitID && m["consumed_at"] == nil, "permit %s: %s", a.permitID, r); err != nil {
				return err
			}
		}
		return w.Assert(len(s.approved) > 0, "no approved sends")
	})
	c.Then(`^every branch completed under its own send's operation$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.ExpectStatus(http.StatusOK); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/parallel-result.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		results, _ := m["results"].([]any)
		if err := w.Assert(len(results) == len(s.branchSends), "the map answered %d results for %d branches", len(results), len(s.branchSends)); err != nil {
			return err
		}
		for i, e := range results {
			res, _ := e.(map[string]any)
			if err := w.Assert(steps.Text(res["index"]) == strconv.Itoa(i) && str(res, "operation.state") == "Completed" && str(res, "operation.operation_id") == s.branchSends[i].opID,
				"branch %d ended %v, want Completed as operation %s", i, res, s.branchSends[i].opID); err != nil {
				return err
			}
		}
		return nil
	})

	// A race of reads.
	c.Setup(preContracts, `^the email delivery-status read is registered and in the agent's tool set$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		contract := map[string]any{
			"qualified_name": s.statusOp, "contract_version": "1", "implementation": statusImpl,
			"implementation_fingerprint": s.implementationFingerprint(ctx, statusImpl),
			"input_type": map[string]any{"type": "object", "required": []string{"message_key"},
				"properties": map[string]any{"message_key": map[string]any{"type": "string", "minLength": 1}}},
			"authority_requirements": []any{}, "possible_effects": []string{"external_read"}, "protocol_preconditions": []any{},
			"approval_requirement": map[string]any{"required": false}, "idempotency_contract": map[string]any{"kind": "none"},
			"scheduling_contract": map[string]any{"max_attempts": 1}, "destination_account": s.mail.account,
		}
		if _, err := got(s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, contract)).want(preContracts, 201); err != nil {
			return err
		}
		if _, err := got(s.do(ctx, http.MethodPost, api+"/grants", roleAuthority, s.grantBody(s.me.principal, []string{s.sendOp, s.transferOp, s.statusOp},
			[]string{s.me.mailbox}, []string{s.me.account}, nil))).want(preGrant, 201); err != nil {
			return err
		}
		r := steps.From(ctx).Last()
		m, _ := r.JSON()
		if s.grantOverride = str(m, "grant_token"); s.grantOverride == "" {
			return steps.Precondition(preGrant, steps.Fail("the grant covering the read carries no grant_token: %s", r))
		}
		steps.From(ctx).Secret(s.grantOverride)
		return s.putAgent(ctx, s.me, []string{s.sendOp, s.transferOp, s.statusOp}, []string{"external_write", "email_send", "financial_write", "external_read"})
	})
	c.Given(`^the destination will hang on the next (\d+) lookups?$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if s.mail == nil {
			return steps.Fault("describe the AGL host before its destination")
		}
		s.mail.fake.Inject(fakemail.Fault{Mode: fakemail.FaultHangLookup, Count: n})
		return nil
	})
	c.When(`^the workflow races (\d+) reads of the delivery status$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		var branches []any
		for i := 0; i < n; i++ {
			branches = append(branches, map[string]any{"operation": s.statusOp, "arguments": map[string]any{"message_key": random("key-")}})
		}
		_, err := s.do(ctx, http.MethodPost, api+"/parallel", roleNone, map[string]any{"mode": "race", "execution_id": s.exec,
			"principal": s.me.principal, "agent_id": s.me.agent, "grant_token": s.grant(), "branches": branches})
		return err
	})
	c.Then(`^the race has one winner, which completed, and every other branch ended FailedNoEffect, cancelled$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.ExpectStatus(http.StatusOK); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/parallel-result.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		results, _ := m["results"].([]any)
		winner := steps.Text(m["winner"])
		s.calls = nil
		completed := 0
		for i, e := range results {
			res, _ := e.(map[string]any)
			s.calls = append(s.calls, str(res, "operation.operation_id"))
			if strconv.Itoa(i) == winner {
				completed++
				if err := w.Assert(str(res, "operation.state") == "Completed", "the winning branch %d ended %v", i, res); err != nil {
					return err
				}
				continue
			}
			if err := w.Assert(str(res, "operation.state") == "FailedNoEffect" && str(res, "operation.outcome.failure") == "cancelled",
				"losing branch %d ended %v, want its operation FailedNoEffect with failure cancelled", i, res); err != nil {
				return err
			}
		}
		return w.Assert(completed == 1 && len(results) > 1, "the race of %d branches named winner %s", len(results), winner)
	})
	c.Then(`^no operation of the execution is left Claimed$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, m, err := s.read(ctx, api+"/operations?execution_id="+s.exec, roleNone)
		if err != nil {
			return err
		}
		list, _ := m["operations"].([]any)
		seen := map[string]string{}
		for _, e := range list {
			op, _ := e.(map[string]any)
			seen[str(op, "operation_id")] = str(op, "state")
		}
		for _, id := range s.calls {
			st, ok := seen[id]
			if err := w.Assert(ok && st != "Claimed" && st != "Pending", "operation %s of the race is %q in the host's list: %s", id, st, r); err != nil {
				return err
			}
		}
		return w.Assert(len(s.calls) > 0, "the race ran no operation")
	})
	c.Then(`^every lookup the destination held was abandoned by the host$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		// The host's cancellation reaches the destination as a closed
		// connection, a moment after the race answered: wait for it.
		// 150 reads 20 ms apart in which no further lookup was abandoned
		// (3 s idle).
		var held, abandoned int
		_ = steps.Await(ctx, steps.Poll{What: "lookups held", Every: 20 * time.Millisecond, Rounds: 150}, func() (bool, string, error) {
			held, abandoned = 0, 0
			for _, r := range s.mail.fake.Requests() {
				if r.Fault == fakemail.FaultHangLookup {
					held++
					if r.Abandoned {
						abandoned++
					}
				}
			}
			return held > 0 && held == abandoned, fmt.Sprint(held, abandoned), nil
		})
		w.Observe(nil)
		return w.Assert(held > 0 && held == abandoned, "the destination held %d lookup(s); the host abandoned %d of them", held, abandoned)
	})

	// Cancellation.
	c.When(`^the agent cancels the operation(?: of dispatch "([^"]*)")?$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		id := s.opID
		if name != "" {
			n, ok := s.named[name]
			if !ok {
				return steps.Fault("no dispatch named %q", name)
			}
			id = n.opID
		}
		if id == "" {
			return steps.Precondition(preOperationNamed, steps.Fail("no proposal named the operation to cancel"))
		}
		_, err := s.do(ctx, http.MethodPost, api+"/operations/"+id+"/cancel", roleNone, map[string]any{"grant_token": s.grant()})
		return err
	})
	c.Then(`^the cancellation came (before|after) the claim$`, func(ctx context.Context, when string) error {
		w := steps.From(ctx)
		if err := w.ExpectStatus(http.StatusOK); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/cancel-result.json", r.Body); err != nil {
			return err
		}
		return w.ExpectField("phase", when+"_claim")
	})
}

// intOf reads an integer the host sent; anything else reads as 0.
func intOf(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}
