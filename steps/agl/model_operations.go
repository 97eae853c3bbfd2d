package agl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"pgregory.net/rapid"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/operations"
	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
)

// The operations model (agl.model.operations): seeded random sequences of
// proposals, approval requests, decisions, dispatches (once, again, with a
// changed action), edits of a draft, destination faults that make a send
// end without effect or Unknown, reconciliations, revocations of a permit
// or of the grant, budget exhaustion, and reads of permits, operations and
// the budget, one execution per sequence; each answer checked against models/operations
// and the effects counted at the scenario's fake destination, a failing
// sequence shrunk (docs/models.md).

// OperationsModelID is the requirement the operations model witnesses.
const OperationsModelID = "agl.model.operations"

// Kinds of disagreement (rapid keeps a shrunk sequence only when it fails
// the same way).
const (
	opsFailPropose   = "a proposal answer the model does not allow"
	opsFailApproval  = "an approval answer the model does not allow"
	opsFailDispatch  = "a dispatch answer the model does not allow"
	opsFailRevoke    = "a revocation answer the model does not allow"
	opsFailEdit      = "an edit answer the model does not allow"
	opsFailReconcile = "a reconciliation answer the model does not allow"
	opsFailRead      = "a read the model does not allow"
	opsFailEffects   = "effects at the destination the model does not allow"
)

// opsAction is what the driver knows of one action of the sequence beside
// the model's account of it.
type opsAction struct {
	*operations.Action
	draft, handle, proposal, operation string
	request, role, digest              string
	permitID, permitToken              string
}

type opsDriver struct {
	ctx context.Context
	s   *state
	w   *steps.World
	rec models.Recorder

	// the sequence's own execution, grant and budget
	exec, grantID, grantToken, scope string
	m                                *operations.Model
	actions                          []*opsAction
	effects0                         int
}

func registerOperationsModel(c *steps.Catalog) {
	c.When(`^the suite runs seeded random sequences of proposals, approvals, dispatches, revocations and reconciliations against the model of operations$`, func(ctx context.Context) error {
		return runOperationsModel(ctx)
	})
	c.Then(`^every answer agreed with the model of permits and operations$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		v, err := w.Get("operations-model")
		if err != nil {
			return steps.Fault("no model run: the When step must run the sequences first")
		}
		if v != "" {
			return w.Assert(false, "%s", v)
		}
		n, _ := w.Get("operations-model-checked")
		return w.Assert(n != "" && n != "0", "the model checked no answer of the host")
	})
}

func runOperationsModel(ctx context.Context) error {
	s, w := st(ctx), steps.From(ctx)
	// The host and the scenario's contracts, agent and principal come
	// first: a host that refuses them fails here as every scenario on it
	// does, not as a disagreement the model would shrink.
	if err := s.ensure(ctx); err != nil {
		return err
	}
	settings, err := models.CurrentIn(ctx)
	if err != nil {
		return steps.Fault("%v", err)
	}
	d := &opsDriver{ctx: ctx, s: s, w: w}
	res, err := models.Check(models.Options{Settings: settings, ShrinkTime: 10 * time.Second}, d.sequence)
	if err != nil {
		return steps.Fault("%v", err)
	}
	if err := d.rec.Aborted(); err != nil {
		return err
	}
	if d.rec.Count() == 0 && !res.Failed {
		return steps.Fault("the operations model checked no answer")
	}
	detail := ""
	if res.Failed {
		detail = d.rec.Report("the host disagreed with the model of permits and operations",
			"each with a fresh execution, grant and budget; actions numbered as proposed", OperationsModelID, res, settings)
	}
	w.Set("operations-model", detail)
	w.Set("operations-model-checked", fmt.Sprint(d.rec.Count()))
	return nil
}

func (d *opsDriver) op(t *rapid.T, format string, a ...any) { d.rec.Op(t, format, a...) }

// stop ends the sequence on an error: a host's failure fails it, anything
// else aborts the run.
func (d *opsDriver) stop(t *rapid.T, kind string, err error) {
	var f *steps.Failure
	if errors.As(err, &f) {
		d.rec.Fail(kind, "%s", f.Msg)
	}
	d.rec.Abort(t, err)
}

// exchange makes one call of the sequence; what names it in the trace
// when the call gets no answer.
func (d *opsDriver) exchange(t *rapid.T, kind, what, method, path, role string, body any) (*steps.Response, map[string]any) {
	r, err := d.s.call(d.ctx, false, method, path, role, body, false)
	if err != nil {
		d.op(t, "%s: no answer", what)
		d.stop(t, kind, err)
	}
	m, _ := r.JSON()
	return r, m
}

func answerOf(r *steps.Response, m map[string]any) operations.Answer {
	if r.Status/100 == 2 {
		return operations.Answer{Status: r.Status}
	}
	return operations.Answer{Status: r.Status, Code: str(m, "error.code")}
}

// expect fails the sequence when the answer is outside allowed.
func (d *opsDriver) expect(kind, what string, r *steps.Response, got operations.Answer, allowed []operations.Answer) {
	if !operations.Contains(allowed, got) {
		d.rec.Fail(kind, "%s: %s; the model allows %s", what, r, operations.Join(allowed))
	}
	d.rec.Checked()
}

// checkEffects holds the destination to the model's count of effects.
func (d *opsDriver) checkEffects(what string) {
	n := d.s.mail.fake.Count() - d.effects0
	if n != d.m.Effects {
		d.rec.Fail(opsFailEffects, "after %s the destination has received %d messages in this sequence; the model counts %d", what, n, d.m.Effects)
	}
	d.rec.Checked()
}

func (d *opsDriver) body(handle string) map[string]any {
	return map[string]any{"execution_id": d.exec, "principal": d.s.me.principal, "agent_id": d.s.me.agent,
		"operation": d.s.sendOp, "arguments": map[string]any{"draft": handle}, "grant_token": d.grantToken}
}

// begin gives the sequence an execution of its own: a grant for the
// principal and a root budget scope of budget tool calls. The scenario's
// own grant is never revoked, so that sequences do not disturb each other.
func (d *opsDriver) begin(t *rapid.T, budget int) {
	s := d.s
	d.exec, d.actions = random("exec-model-"), nil
	d.m = operations.New(budget)
	s.mail.fake.Disarm()
	d.effects0 = s.mail.fake.Count()
	d.op(t, "a fresh execution with a budget of %d tool calls under a fresh grant", budget)
	r, g := d.exchange(t, opsFailPropose, "the grant", http.MethodPost, api+"/grants", roleAuthority,
		s.grantBody(s.me.principal, []string{s.sendOp}, []string{s.me.mailbox}, nil, nil))
	d.grantID, d.grantToken = str(g, "grant_id"), str(g, "grant_token")
	if r.Status != http.StatusCreated || d.grantID == "" || d.grantToken == "" {
		d.rec.Fail(opsFailPropose, "issuing the sequence's grant: %s, want 201 with its id and token", r)
	}
	d.w.Secret(d.grantToken)
	r, sc := d.exchange(t, opsFailPropose, "the budget", http.MethodPost, api+"/scopes", roleOperator,
		map[string]any{"execution_id": d.exec, "budget": map[string]any{"tool_calls": budget}})
	if d.scope = str(sc, "scope_id"); r.Status != http.StatusCreated || d.scope == "" {
		d.rec.Fail(opsFailPropose, "opening the execution's budget: %s, want 201 with its scope_id", r)
	}
}

// opsSteps is the number of operations a sequence draws at least, and
// opsMore how many more it may draw.
const opsSteps, opsMore = 12, 28

func (d *opsDriver) sequence(t *rapid.T) {
	d.rec.Begin(t)
	defer d.rec.Recover(t)
	d.begin(t, rapid.IntRange(1, 3).Draw(t, "budget"))
	// pick draws one of the actions keep admits, nil when none does (the
	// operation then does nothing: a sequence is a fixed number of draws,
	// not rapid's Repeat, whose sequences the first checks of a small
	// budget leave nearly empty).
	pick := func(t *rapid.T, what string, keep func(*opsAction) bool) *opsAction {
		var in []*opsAction
		for _, a := range d.actions {
			if keep(a) {
				in = append(in, a)
			}
		}
		if len(in) == 0 {
			return nil
		}
		return rapid.SampledFrom(in).Draw(t, what)
	}
	everyAction := func(*opsAction) bool { return true }
	permitted := func(a *opsAction) bool { return a.Permit }
	unrequested := func(a *opsAction) bool { return a.Request == operations.NoRequest && !a.Edited }
	// Weights (operations drawn alike, so a heavier one is listed more
	// than once): proposals and approvals enough to keep two or three
	// actions with permits, dispatches most, the revocations seldom,
	// since each ends what its sequence can still do. Shrinking draws
	// toward the first.
	propose := func(t *rapid.T) {
		if len(d.actions) < 3 {
			d.propose(t)
		}
	}
	approve := func(t *rapid.T) {
		a := pick(t, "approve", unrequested)
		if a == nil && len(d.actions) < 3 && !d.m.GrantRevoked {
			d.propose(t)
			a = pick(t, "approve", unrequested)
		}
		if a != nil {
			d.requestApproval(t, a)
			if a.Request != operations.NoRequest {
				d.decide(t, a, rapid.IntRange(0, 4).Draw(t, "grant") > 0)
			}
		}
	}
	dispatch := func(t *rapid.T) {
		if a := pick(t, "dispatch", permitted); a != nil {
			d.dispatch(t, a)
		}
	}
	reconcile := func(t *rapid.T) {
		if a := pick(t, "reconcile", func(a *opsAction) bool { return a.Consumed }); a != nil && rapid.IntRange(0, 3).Draw(t, "unclaimed") > 0 {
			d.reconcile(t, a, rapid.SampledFrom([]string{operations.Lookup, operations.HumanEffect, operations.HumanNoEffect}).Draw(t, "method"))
		} else if a := pick(t, "reconcile", everyAction); a != nil {
			d.reconcile(t, a, rapid.SampledFrom([]string{operations.Lookup, operations.HumanEffect, operations.HumanNoEffect}).Draw(t, "method"))
		}
	}
	ops := []func(*rapid.T){
		approve, dispatch, propose, approve, dispatch, dispatch, reconcile, reconcile,
		func(t *rapid.T) { // request approval only
			if a := pick(t, "request approval", unrequested); a != nil {
				d.requestApproval(t, a)
			}
		},
		func(t *rapid.T) { // decide, perhaps again
			if a := pick(t, "decide", func(a *opsAction) bool { return a.Request != operations.NoRequest }); a != nil {
				d.decide(t, a, rapid.IntRange(0, 3).Draw(t, "grant") > 0)
			}
		},
		func(t *rapid.T) { // a changed action
			a := pick(t, "dispatch", permitted)
			if a == nil {
				return
			}
			if b := pick(t, "present the draft of", func(b *opsAction) bool { return b != a }); b != nil {
				d.dispatchChanged(t, a, b)
			}
		},
		func(t *rapid.T) { // the destination's next send
			if len(d.m.Fault) == 0 {
				d.arm(t, rapid.SampledFrom([]string{operations.FaultFail, operations.FaultFail, operations.FaultReject}).Draw(t, "fault"))
			}
		},
		func(t *rapid.T) {
			if a := pick(t, "revoke", func(a *opsAction) bool { return a.Permit && !a.PermitRevoked }); a != nil && rapid.IntRange(0, 2).Draw(t, "now") == 0 {
				d.revokePermit(t, a)
			}
		},
		func(t *rapid.T) { // an edit of an action's draft
			if a := pick(t, "edit", everyAction); a != nil {
				d.edit(t, a)
			}
		},
		func(t *rapid.T) {
			if !d.m.GrantRevoked && rapid.IntRange(0, 4).Draw(t, "now") == 0 {
				d.revokeGrant(t)
			}
		},
		func(t *rapid.T) {
			switch rapid.SampledFrom([]string{"permit", "operation", "budget"}).Draw(t, "read") {
			case "permit":
				if a := pick(t, "read", permitted); a != nil {
					d.readPermit(t, a)
				}
			case "operation":
				if a := pick(t, "read", everyAction); a != nil {
					d.readOperation(t, a)
				}
			default:
				d.readBudget(t)
			}
		},
	}
	n := rapid.IntRange(opsSteps, opsSteps+opsMore).Draw(t, "length")
	for range n {
		ops[rapid.IntRange(0, len(ops)-1).Draw(t, "operation")](t)
	}
}

func (d *opsDriver) propose(t *rapid.T) {
	s := d.s
	n := len(d.actions) + 1
	what := fmt.Sprintf("propose action %d (a new draft to bob@example.com)", n)
	r, m := d.exchange(t, opsFailPropose, what, http.MethodPost, api+"/resources/email-drafts", roleNone,
		s.draftBody(s.me.principal, s.me.mailbox, []string{"bob@example.com"}, fmt.Sprintf("Model action %d.", n)))
	draft, handle := str(m, "resource_id"), str(m, "handle")
	if r.Status != http.StatusCreated || draft == "" || handle == "" {
		d.op(t, "%s: draft %d", what, r.Status)
		d.rec.Fail(opsFailPropose, "%s: creating its draft: %s, want 201 with resource_id and handle", what, r)
	}
	r, p := d.exchange(t, opsFailPropose, what, http.MethodPost, api+"/proposals", roleNone, d.body(handle))
	got := answerOf(r, p)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailPropose, what, r, got, d.m.ProposeAllowed())
	if r.Status != http.StatusCreated {
		return
	}
	a := &opsAction{Action: d.m.Propose(), draft: draft, handle: handle, proposal: str(p, "proposal_id"), operation: str(p, "operation_id")}
	if a.proposal == "" || a.operation == "" {
		d.rec.Fail(opsFailPropose, "%s: the proposal names no proposal_id or operation_id: %s", what, r)
	}
	d.actions = append(d.actions, a)
}

func (d *opsDriver) requestApproval(t *rapid.T, a *opsAction) {
	what := fmt.Sprintf("request approval of action %d", a.Index+1)
	r, m := d.exchange(t, opsFailApproval, what, http.MethodPost, api+"/proposals/"+a.proposal+"/approval-requests", roleNone, map[string]any{"ttl_seconds": 600})
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailApproval, what, r, got, d.m.RequestAllowed())
	if r.Status != http.StatusCreated {
		return
	}
	a.request, a.role, a.digest = str(m, "request_id"), str(m, "role"), str(m, "proposal.digest")
	if a.request == "" || a.role == "" || a.digest == "" {
		d.rec.Fail(opsFailApproval, "%s: %s, want 201 with request_id, role and the proposal's digest", what, r)
	}
	d.m.RequestApproval(a.Action)
}

func (d *opsDriver) decide(t *rapid.T, a *opsAction, grant bool) {
	verb, decision := "denies", "denied"
	if grant {
		verb, decision = "grants", "granted"
	}
	what := fmt.Sprintf("the resolver %s action %d's request", verb, a.Index+1)
	r, m := d.exchange(t, opsFailApproval, what, http.MethodPost, api+"/approval-requests/"+a.request+"/decision", roleResolver,
		map[string]any{"approver": "carol", "role": a.role, "decision": decision, "digest": a.digest})
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailApproval, what, r, got, d.m.DecideAllowed(a.Action, grant))
	if r.Status/100 != 2 {
		return
	}
	if grant {
		a.permitID, a.permitToken = str(m, "permit.permit_id"), str(m, "permit.permit_token")
		if a.permitID == "" || a.permitToken == "" {
			d.rec.Fail(opsFailApproval, "%s: the granted decision carries no permit id and token: %s", what, r)
		}
		d.w.Secret(a.permitToken)
	}
	d.m.Decide(a.Action, grant)
}

func (d *opsDriver) dispatch(t *rapid.T, a *opsAction) {
	what := fmt.Sprintf("dispatch action %d with its permit", a.Index+1)
	denials, state := d.m.DispatchAllowed(a.Action)
	b := d.body(a.handle)
	b["permit_token"] = a.permitToken
	r, m := d.exchange(t, opsFailDispatch, what, http.MethodPost, api+"/dispatch", roleNone, b)
	got := answerOf(r, m)
	d.opAnswer(t, what, r, m, got)
	if denials != nil {
		d.expect(opsFailDispatch, what, r, got, denials)
	} else {
		if r.Status != http.StatusOK || str(m, "state") != state || str(m, "operation_id") != a.operation {
			d.rec.Fail(opsFailDispatch, "%s: %s; the model allows 200 %s for operation %s (the proposal's)", what, r, state, a.operation)
		}
		d.rec.Checked()
		d.m.Dispatch(a.Action)
	}
	d.checkEffects(what)
}

// opAnswer records an operation with its answer: the state a success
// reports, else the refusal.
func (d *opsDriver) opAnswer(t *rapid.T, what string, r *steps.Response, m map[string]any, got operations.Answer) {
	if r.Status == http.StatusOK {
		d.op(t, "%s: 200 %s", what, str(m, "state"))
		return
	}
	d.op(t, "%s: %s", what, got)
}

func (d *opsDriver) dispatchChanged(t *rapid.T, a, other *opsAction) {
	what := fmt.Sprintf("dispatch action %d's permit with action %d's draft", a.Index+1, other.Index+1)
	b := d.body(other.handle)
	b["permit_token"] = a.permitToken
	r, m := d.exchange(t, opsFailDispatch, what, http.MethodPost, api+"/dispatch", roleNone, b)
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailDispatch, what, r, got, d.m.ChangedAllowed(a.Action, other.Action))
	d.checkEffects(what)
}

func (d *opsDriver) arm(t *rapid.T, fault string) {
	mode := map[string]string{operations.FaultFail: fakemail.FaultFailAfterEffect, operations.FaultReject: fakemail.FaultReject}[fault]
	desc := map[string]string{operations.FaultFail: "fail after taking effect", operations.FaultReject: "reject before any effect"}[fault]
	d.op(t, "the destination will %s on its next message", desc)
	d.s.mail.fake.Inject(fakemail.Fault{Mode: mode, Count: 1})
	d.m.Arm(fault)
}

func (d *opsDriver) reconcile(t *rapid.T, a *opsAction, method string) {
	role, body := roleOperator, map[string]any{"method": "receiver_lookup"}
	what := fmt.Sprintf("the operator reconciles action %d by asking the destination", a.Index+1)
	switch method {
	case operations.HumanEffect:
		role, body = roleResolver, map[string]any{"method": "human", "resolution": "completed", "actor": "dave (ops on call)"}
		what = fmt.Sprintf("the resolver records that action %d had an effect", a.Index+1)
	case operations.HumanNoEffect:
		role, body = roleResolver, map[string]any{"method": "human", "resolution": "no_effect", "actor": "dave (ops on call)"}
		what = fmt.Sprintf("the resolver records that action %d had no effect", a.Index+1)
	}
	refusal, state := d.m.ReconcileAllowed(a.Action, method)
	r, m := d.exchange(t, opsFailReconcile, what, http.MethodPost, api+"/operations/"+a.operation+"/reconcile", role, body)
	got := answerOf(r, m)
	d.opAnswer(t, what, r, m, got)
	if refusal != nil {
		d.expect(opsFailReconcile, what, r, got, refusal)
	} else {
		if r.Status != http.StatusOK || str(m, "state") != state {
			d.rec.Fail(opsFailReconcile, "%s: %s; the model allows 200 %s", what, r, state)
		}
		d.rec.Checked()
		d.m.Reconcile(a.Action, method)
	}
	d.checkEffects(what)
}

func (d *opsDriver) edit(t *rapid.T, a *opsAction) {
	s := d.s
	what := fmt.Sprintf("the principal edits action %d's draft expecting revision %d", a.Index+1, a.Revision)
	b := s.draftBody(s.me.principal, s.me.mailbox, []string{"bob@example.com"}, fmt.Sprintf("Model action %d, revision %d.", a.Index+1, a.Revision+1))
	b["expected_revision"] = a.Revision
	r, m := d.exchange(t, opsFailEdit, what, http.MethodPut, api+"/resources/"+a.draft, roleNone, b)
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailEdit, what, r, got, d.m.EditAllowed(a.Action))
	if r.Status == http.StatusOK {
		if rev, _ := steps.Lookup(m, "revision"); intOf(rev) != int64(a.Revision+1) {
			d.rec.Fail(opsFailEdit, "%s: %s; the model's next revision is %d", what, r, a.Revision+1)
		}
		d.m.Edit(a.Action)
	}
}

func (d *opsDriver) revokePermit(t *rapid.T, a *opsAction) {
	what := fmt.Sprintf("the resolver revokes action %d's permit", a.Index+1)
	r, m := d.exchange(t, opsFailRevoke, what, http.MethodPost, api+"/permits/"+a.permitID+"/revoke", roleResolver, nil)
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailRevoke, what, r, got, []operations.Answer{operations.OK})
	d.m.RevokePermit(a.Action)
}

func (d *opsDriver) revokeGrant(t *rapid.T) {
	what := "the authorization service revokes the execution's grant"
	r, m := d.exchange(t, opsFailRevoke, what, http.MethodPost, api+"/grants/"+d.grantID+"/revoke", roleAuthority, nil)
	got := answerOf(r, m)
	d.op(t, "%s: %s", what, got)
	d.expect(opsFailRevoke, what, r, got, []operations.Answer{operations.OK})
	d.m.RevokeGrant()
}

func (d *opsDriver) readPermit(t *rapid.T, a *opsAction) {
	what := fmt.Sprintf("read action %d's permit", a.Index+1)
	r, m := d.exchange(t, opsFailRead, what, http.MethodGet, api+"/permits/"+a.permitID, roleNone, nil)
	want := d.m.ReadPermit(a.Action)
	gotRead := operations.PermitRead{Revoked: m["revoked_at"] != nil, Consumed: m["consumed_at"] != nil}
	d.op(t, "%s: %d revoked %v, consumed %v", what, r.Status, gotRead.Revoked, gotRead.Consumed)
	if r.Status != http.StatusOK || str(m, "permit_id") != a.permitID || gotRead != want {
		d.rec.Fail(opsFailRead, "%s: %s; the model says revoked %v, consumed %v", what, r, want.Revoked, want.Consumed)
	}
	if want.Consumed && str(m, "consumed_by_operation") != a.operation {
		d.rec.Fail(opsFailRead, "%s: %s; the permit was consumed by operation %s", what, r, a.operation)
	}
	d.rec.Checked()
}

func (d *opsDriver) readOperation(t *rapid.T, a *opsAction) {
	what := fmt.Sprintf("read action %d's operation", a.Index+1)
	r, m := d.exchange(t, opsFailRead, what, http.MethodGet, api+"/operations/"+a.operation, roleNone, nil)
	state, awaiting := d.m.ReadOperation(a.Action)
	gotAwaiting, _ := m["awaiting_reconciliation"].(bool)
	d.op(t, "%s: %d %s", what, r.Status, str(m, "state"))
	if r.Status != http.StatusOK || str(m, "state") != state || gotAwaiting != awaiting {
		d.rec.Fail(opsFailRead, "%s: %s; the model says %s, awaiting reconciliation %v", what, r, state, awaiting)
	}
	d.rec.Checked()
}

func (d *opsDriver) readBudget(t *rapid.T) {
	what := "read the execution's budget"
	r, m := d.exchange(t, opsFailRead, what, http.MethodGet, api+"/scopes/"+d.scope, roleNone, nil)
	used, _ := steps.Lookup(m, "used.tool_calls")
	d.op(t, "%s: %d used %v", what, r.Status, used)
	if r.Status != http.StatusOK || intOf(used) != int64(d.m.Used) {
		d.rec.Fail(opsFailRead, "%s: %s; the model has charged %d tool calls (a charge is never refunded)", what, r, d.m.Used)
	}
	d.rec.Checked()
}
