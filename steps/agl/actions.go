package agl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

// action is a proposal or dispatch body as a model adapter would send it.
func (s *state) action(op string, args any, grant string) map[string]any {
	return map[string]any{"execution_id": s.exec, "principal": s.me.principal, "agent_id": s.me.agent,
		"operation": op, "arguments": args, "grant_token": grant}
}

func (s *state) grant() string {
	if s.grantOverride != "" {
		return s.grantOverride
	}
	return s.me.grantToken
}

func (s *state) draftBody(owner, from string, to []string, body string) map[string]any {
	return map[string]any{"owner": owner, "payload": map[string]any{"from": from, "to": to,
		"subject": "Quarterly numbers", "body": body}}
}

func (s *state) createDraft(ctx context.Context, from, to string) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	r, err := s.do(ctx, http.MethodPost, api+"/resources/email-drafts", roleNone, s.draftBody(s.me.principal, from, []string{to}, "See attached."))
	m, err := got(r, err).want(preDraft, 201)
	if err != nil {
		return err
	}
	s.draftID, s.latestHandle = str(m, "resource_id"), str(m, "handle")
	if s.draftID == "" || s.latestHandle == "" {
		return steps.Precondition(preDraft, &steps.Failure{Msg: "the draft carries no resource_id or handle: " + r.String(), Exchange: r})
	}
	return nil
}

// editDraft makes a new revision; the approved proposal keeps naming the
// old handle.
func (s *state) editDraft(ctx context.Context) (*steps.Response, error) {
	n, err := s.revision(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.do(ctx, http.MethodPut, api+"/resources/"+s.draftID, roleNone, map[string]any{
		"owner": s.me.principal, "expected_revision": n,
		"payload": map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": "Edited: see the corrected figures."}})
	if err != nil {
		return nil, err
	}
	if r.Status == 200 {
		if m, err := r.JSON(); err == nil {
			s.latestHandle = str(m, "handle")
		}
	}
	return r, nil
}

// revision reads the draft's current revision.
func (s *state) revision(ctx context.Context) (json.Number, error) {
	r, cur, err := s.read(ctx, api+"/resources/"+s.draftID, roleNone)
	if err != nil {
		return "", err
	}
	rev, _ := steps.Lookup(cur, "revision")
	n, ok := rev.(json.Number)
	if _, err := n.Int64(); !ok || err != nil {
		return "", &steps.Failure{Msg: "the draft carries no integer revision: " + r.String(), Exchange: r}
	}
	return n, nil
}

func (s *state) propose(ctx context.Context, op string, args any, grant string) (*steps.Response, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	r, err := s.do(ctx, http.MethodPost, api+"/proposals", roleNone, s.action(op, args, grant))
	if err != nil {
		return nil, err
	}
	s.noteProposal(r, op, args)
	return r, nil
}

// noteProposal keeps an accepted proposal; lastProposal remembers every
// attempt, so that a step that needs the proposal can say it was refused.
func (s *state) noteProposal(r *steps.Response, op string, args any) {
	s.mu.Lock()
	s.lastProposal, s.lastProposalOp = r, op
	s.mu.Unlock()
	if r.Status != 201 {
		return
	}
	m, err := r.JSON()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prop = m
	s.props = append(s.props, m)
	s.opID = str(m, "operation_id")
	s.propOp = op
	if a, ok := args.(map[string]any); ok {
		if h, ok := a["draft"].(string); ok {
			s.propHandle = h
		} else {
			s.transfer = a
		}
	}
}

// proposalNeeded says why a step that needs the last proposal cannot go on:
// the host refused it, or accepted it without naming it.
func (s *state) proposalNeeded() error {
	pre := preSendProposed
	if s.lastProposalOp == s.transferOp {
		pre = preTransferProposed
	}
	r := s.lastProposal
	switch {
	case r == nil:
		return steps.Fault("no proposal was made")
	case r.Status != 201:
		return steps.Precondition(pre, &steps.Failure{Msg: "the proposal the scenario needs was refused: " + r.String(), Exchange: r})
	case s.prop == nil || str(s.prop, "proposal_id") == "" || str(s.prop, "operation_id") == "":
		return steps.Precondition(pre, &steps.Failure{Msg: "the accepted proposal names no proposal_id or operation_id: " + r.String(), Exchange: r})
	}
	return nil
}

func (s *state) requestApproval(ctx context.Context, ttl int) error {
	if err := s.proposalNeeded(); err != nil {
		return err
	}
	r, err := s.do(ctx, http.MethodPost, api+"/proposals/"+str(s.prop, "proposal_id")+"/approval-requests", roleNone,
		map[string]any{"ttl_seconds": ttl})
	m, err := got(r, err).want(preApprovalRequested, 201)
	if err != nil {
		return err
	}
	s.requestID = str(m, "request_id")
	s.shown = m
	s.askedTTL = ttl
	if s.requestID == "" {
		return steps.Precondition(preApprovalRequested, &steps.Failure{Msg: "the approval request names no request_id: " + r.String(), Exchange: r})
	}
	return nil
}

func (s *state) decide(ctx context.Context, role, decision string, edit func(b map[string]any)) (*steps.Response, error) {
	if s.requestID == "" {
		return nil, steps.Fault("no approval request")
	}
	_, req, err := s.read(ctx, api+"/approval-requests/"+s.requestID, roleNone)
	if err != nil {
		return nil, err
	}
	if role == roleResolver && decision == "granted" {
		// The approved action is now this request's: an older permit must
		// not stand in for the one this decision should yield.
		s.permitID, s.permitToken, s.decision = "", "", nil
	}
	body := map[string]any{"approver": "carol", "role": str(req, "role"), "decision": decision, "digest": str(req, "proposal.digest")}
	if edit != nil {
		edit(body)
	}
	r, err := s.do(ctx, http.MethodPost, api+"/approval-requests/"+s.requestID+"/decision", role, body)
	if err != nil {
		return nil, err
	}
	s.decisionResp = r
	if m, err := r.JSON(); err == nil && r.Status/100 == 2 {
		s.decision = m
		if id := str(m, "permit.permit_id"); id != "" {
			s.permitID, s.permitToken = id, str(m, "permit.permit_token")
			steps.From(ctx).Secret(s.permitToken)
		}
	}
	return r, nil
}

// permitNeeded says why a step that needs the permit cannot go on: the
// resolver's granted decision did not yield one.
func (s *state) permitNeeded() error {
	if s.permitID != "" && s.permitToken != "" {
		return nil
	}
	r := s.decisionResp
	if r == nil {
		return steps.Fault("no decision was submitted")
	}
	return steps.Precondition(preApproved, &steps.Failure{Msg: "the resolver's granted decision yielded no permit (id and token): " + r.String(), Exchange: r})
}

func (s *state) approveSend(ctx context.Context, to string) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	s.lastTo = to
	if err := s.createDraft(ctx, s.me.mailbox, to); err != nil {
		return err
	}
	if _, err := got(s.propose(ctx, s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant())).want(preSendProposed, 201); err != nil {
		return err
	}
	return s.approveProposal(ctx)
}

func (s *state) approveProposal(ctx context.Context) error {
	if err := s.proposalNeeded(); err != nil {
		return err
	}
	ttl := 600
	if s.permitTTL > 0 {
		ttl, s.permitTTL = s.permitTTL, 0
	}
	if err := s.requestApproval(ctx, ttl); err != nil {
		return err
	}
	if _, err := got(s.decide(ctx, roleResolver, "granted", nil)).want(preApproved, 201); err != nil {
		return err
	}
	return s.permitNeeded()
}

func (s *state) transferArgs(amount any, recipient string) map[string]any {
	return map[string]any{"account": s.me.account, "recipient": recipient, "amount": amount}
}

// dispatchBody is the body of a dispatch of the approved action.
type dispatchMods struct {
	unknownOp, badArgs, noGrant bool
}

// approvedBody is the body of a dispatch of the approved action, with what
// the scenario arranged to get wrong; it needs the permit the resolver's
// granted decision should have yielded.
func (s *state) approvedBody() (map[string]any, error) {
	if err := s.permitNeeded(); err != nil {
		return nil, err
	}
	mods := s.pendingMods
	op := s.sendOp
	var args any = map[string]any{"draft": s.propHandle}
	if (s.propHandle == "" || s.propOp == s.transferOp) && s.transfer != nil {
		op, args = s.transferOp, s.transfer
	}
	grant := s.grant()
	if mods.unknownOp {
		op = s.opName("mail.unregistered_operation")
	}
	if mods.badArgs {
		args = map[string]any{"draft": 5}
	}
	if mods.noGrant {
		grant = ""
	}
	b := s.action(op, args, grant)
	b["permit_token"] = s.permitToken
	return b, nil
}

// dispatch sends a dispatch to the first or second host and records it.
func (s *state) dispatch(ctx context.Context, second bool, body map[string]any) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	r, err := s.call(ctx, second, http.MethodPost, api+"/dispatch", roleNone, body, true)
	if err != nil {
		if s.crashArmed && !second {
			// The host was told to die mid-dispatch; no answer is the answer.
			s.crashed, s.lastErr = true, err
			return nil
		}
		return err
	}
	if s.crashArmed && !second && noBindingAnswer(r) {
		// A gateway in front of the dead host may answer for it.
		s.crashed, s.lastErr = true, steps.Fail("no answer from the host: %s", r)
		return nil
	}
	s.noteOperation(r)
	return nil
}

// noBindingAnswer reports a response that did not come from the binding: a
// gateway's 502 or 504 without the binding's JSON error object.
func noBindingAnswer(r *steps.Response) bool {
	if r.Status != http.StatusBadGateway && r.Status != http.StatusGatewayTimeout {
		return false
	}
	m, err := r.JSON()
	return err != nil || str(m, "error.code") == ""
}

func (s *state) noteOperation(r *steps.Response) {
	if r.Status != 200 {
		return
	}
	if m, err := r.JSON(); err == nil && str(m, "operation_id") != "" {
		s.mu.Lock()
		s.opID = str(m, "operation_id")
		s.mu.Unlock()
	}
}

// concurrently fires n copies of a request at once (at the second host for
// the odd ones when alternate is set) and keeps every answer.
func (s *state) concurrently(ctx context.Context, n int, alternate bool, path string, body any) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if alternate {
		if _, err := s.secondHost(ctx); err != nil {
			return err
		}
	}
	s.results = make([]*steps.Response, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			s.results[i], errs[i] = s.call(ctx, alternate && i%2 == 1, http.MethodPost, path, roleNone, body, false)
		}()
	}
	close(gate)
	wg.Wait()
	return first(errs...)
}

// first returns the first error of several exchanges made at once.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *state) seamFault(ctx context.Context, boundary, action string, extra map[string]any) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	w := steps.From(ctx)
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	if !h.Config.Seams() {
		return steps.Fault(`a fault needs "the AGL test seams are enabled" among the Given steps`)
	}
	body := map[string]any{"boundary": boundary, "action": action, "operation": s.sendOp, "count": 1}
	for k, v := range extra {
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return steps.Fault("cannot encode the fault: %v", err)
	}
	// An absent seam blocks (World.Seam); a seam that answers is the host's.
	r, err := w.Seam(ctx, http.MethodPost, seamPath+"/faults", raw, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	return w.Assert(r.Status == http.StatusCreated, "the host's fault seam refused %s/%s: %s", boundary, action, r)
}

// operationNeeded says why a step that needs the operation's id cannot go
// on: no proposal or dispatch the host accepted named one.
func (s *state) operationNeeded(ctx context.Context) error {
	if s.opID != "" {
		return nil
	}
	return steps.Precondition(preOperationNamed, steps.Fail("no proposal or dispatch the host accepted named its operation_id; the last answer was %v", steps.From(ctx).Last()))
}

func (s *state) reconcile(ctx context.Context, second bool, role string, body map[string]any) error {
	if err := s.operationNeeded(ctx); err != nil {
		return err
	}
	_, err := s.call(ctx, second, http.MethodPost, api+"/operations/"+s.opID+"/reconcile", role, body, true)
	return err
}

var conditionPart = `(?:the operation is unknown to the host|the arguments are malformed|no grant is given|the agent's effect ceiling is empty|the permit was revoked)`

func registerActions(c *steps.Catalog) {
	// Drafts.
	c.Setup(preDraft, `^the principal drafts an email to "([^"]*)"(?: without cc or priority)?$`, func(ctx context.Context, to string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		return s.createDraft(ctx, s.me.mailbox, to)
	})
	c.Setup(preDraft, `^the principal drafts an email from another mailbox to "([^"]*)"$`, func(ctx context.Context, to string) error {
		return st(ctx).createDraft(ctx, "someone-else@example.com", to)
	})
	c.When(`^the principal edits the draft$`, func(ctx context.Context) error {
		_, err := st(ctx).editDraft(ctx)
		return err
	})
	c.Setup(preDraftEdited, `^the draft was edited$`, func(ctx context.Context) error {
		_, err := got(st(ctx).editDraft(ctx)).want(preDraftEdited, 200)
		return err
	})
	c.Setup(preDraftEdited, `^the send names the draft's edited revision$`, func(ctx context.Context) error {
		s := st(ctx)
		if _, err := got(s.editDraft(ctx)).want(preDraftEdited, 200); err != nil {
			return err
		}
		s.propHandle = s.latestHandle
		return nil
	})

	// Proposals and approvals.
	c.When(`^the agent proposes sending the draft$`, func(ctx context.Context) error {
		s := st(ctx)
		_, err := s.propose(ctx, s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant())
		return err
	})
	c.When(`^the agent proposes sending (a handle it made up|the draft's resource id instead of its handle|another principal's draft handle)$`, func(ctx context.Context, which string) error {
		s := st(ctx)
		var handle string
		switch which {
		case "a handle it made up":
			handle = random("hdl_")
		case "the draft's resource id instead of its handle":
			handle = s.draftID
		default:
			r, err := s.do(ctx, http.MethodPost, api+"/resources/email-drafts", roleNone, s.draftBody("mallory-"+s.exec, s.me.mailbox, []string{"bob@example.com"}, "Not yours."))
			m, err := got(r, err).want(preDraft, 201)
			if err != nil {
				return err
			}
			if handle = str(m, "handle"); handle == "" {
				return steps.Precondition(preDraft, &steps.Failure{Msg: "another principal's draft carries no handle: " + r.String(), Exchange: r})
			}
		}
		_, err := s.propose(ctx, s.sendOp, map[string]any{"draft": handle}, s.grant())
		return err
	})
	c.When(`^the agent proposes sending the draft (\d+) times at once$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		fresh := func(ctx context.Context) error { return s.createDraft(ctx, s.me.mailbox, "bob@example.com") }
		return s.contend(ctx, "proposers", fresh, func(ctx context.Context) ([]*steps.Response, *steps.Response, error) {
			err := s.concurrently(ctx, n, false, api+"/proposals", s.action(s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant()))
			return s.results, nil, err
		})
	})
	c.Setup(preApprovalRequested, `^approval of the proposal is requested(?: for (\d+) seconds?)?$`, func(ctx context.Context, ttl string) error {
		n := 600
		if ttl != "" {
			if _, err := fmt.Sscan(ttl, &n); err != nil {
				return steps.Fault("approval ttl %q: %v", ttl, err)
			}
		}
		return st(ctx).requestApproval(ctx, n)
	})
	c.When(`^the resolver (grants|denies) the approval$`, func(ctx context.Context, verb string) error {
		d := map[string]string{"grants": "granted", "denies": "denied"}[verb]
		_, err := st(ctx).decide(ctx, roleResolver, d, nil)
		return err
	})
	c.When(`^(the agent, with no credentials,|the agent, presenting its grant token,|the operator|the resolver, for an approver without the role,|the resolver, quoting another digest,) submits a granted decision for the request$`, func(ctx context.Context, who string) error {
		s := st(ctx)
		role, edit := roleResolver, func(map[string]any) {}
		switch who {
		case "the agent, with no credentials,":
			role = roleNone
		case "the agent, presenting its grant token,":
			role = s.me.grantToken
		case "the operator":
			role = roleOperator
		case "the resolver, for an approver without the role,":
			edit = func(b map[string]any) { b["role"] = "intern" }
		case "the resolver, quoting another digest,":
			edit = func(b map[string]any) { b["digest"] = "sha256:" + strings.Repeat("ab", 32) }
		}
		_, err := s.decide(ctx, role, "granted", edit)
		return err
	})
	c.Setup(preApproved, `^the principal has an approved send of a draft to "([^"]*)"(?: whose permit expires in (\d+) seconds)?$`, func(ctx context.Context, to, ttl string) error {
		s := st(ctx)
		s.permitTTL, _ = strconv.Atoi(ttl)
		return s.approveSend(ctx, to)
	})
	// A permit that must outlive the suite's own steps before it expires
	// (a dispatch must reach its wait for capacity first) lasts seconds of
	// real time on a host whose clock the suite cannot move, and minutes on
	// one whose clock it moves past the expiry: seconds of real time are a
	// race a loaded machine can lose.
	c.Setup(preApproved, `^the principal has an approved send of a draft to "([^"]*)" whose permit lasts (\d+) seconds, or (\d+) where the suite moves the host's clock$`, func(ctx context.Context, to string, real, moved int) error {
		s := st(ctx)
		s.permitTTL = real
		if s.clockSeam {
			s.permitTTL = moved
		}
		return s.approveSend(ctx, to)
	})
	c.Setup(preApproved, `^the principal has an approved transfer of (\d+) to "([^"]*)"(?: whose permit expires in (\d+) seconds)?$`, func(ctx context.Context, amount int, to, ttl string) error {
		s := st(ctx)
		s.permitTTL, _ = strconv.Atoi(ttl)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		if _, err := got(s.propose(ctx, s.transferOp, s.transferArgs(amount, to), s.grant())).want(preTransferProposed, 201); err != nil {
			return err
		}
		return s.approveProposal(ctx)
	})
	c.When(`^the agent proposes a transfer of (\d+) to "([^"]*)"(?: without a currency)?$`, func(ctx context.Context, amount int, to string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		_, err := s.propose(ctx, s.transferOp, s.transferArgs(amount, to), s.grant())
		return err
	})
	c.When(`^the agent proposes the same transfer again with its members reordered and the amount written "([^"]*)"$`, func(ctx context.Context, amount string) error {
		s := st(ctx)
		if s.lastProposal == nil {
			return steps.Fault("no earlier transfer proposal")
		}
		if len(s.props) == 0 {
			return steps.Precondition(preTransferProposed, &steps.Failure{Msg: "the first transfer proposal was not accepted: " + s.lastProposal.String(), Exchange: s.lastProposal})
		}
		first, _ := steps.Lookup(s.props[0], "snapshot.arguments")
		args, _ := first.(map[string]any)
		// Written by hand so that member order and number spelling differ.
		raw := fmt.Sprintf(`{"execution_id":%q,"principal":%q,"agent_id":%q,"operation":%q,"grant_token":%q,"arguments":{"amount":%s,"recipient":%q,"account":%q}}`,
			s.exec, s.me.principal, s.me.agent, s.transferOp, s.grant(), amount, str(args, "recipient"), str(args, "account"))
		r, err := s.do(ctx, http.MethodPost, api+"/proposals", roleNone, []byte(raw))
		if err != nil {
			return err
		}
		s.noteProposal(r, s.transferOp, nil)
		return nil
	})

	// Dispatch.
	c.When(`^the agent dispatches the approved (?:send|transfer)$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved transfer unchanged$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved send at the second host$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		return s.dispatch(ctx, true, b)
	})
	c.When(`^the agent dispatches the approved send presenting (a grant token it made up|the grant's public id instead of its token|no grant at all)$`, func(ctx context.Context, which string) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		b["grant_token"] = map[string]string{"a grant token it made up": random("agt_"),
			"the grant's public id instead of its token": s.me.grantID, "no grant at all": ""}[which]
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved send presenting the permit id as its token$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		b["permit_token"] = s.permitID
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved send with a permit token it made up$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		b["permit_token"] = random("apt_")
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved (?:send|transfer) from a branch of a race$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		b["context"] = map[string]any{"race": true}
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the send of the draft without a permit$`, func(ctx context.Context) error {
		s := st(ctx)
		return s.dispatch(ctx, false, s.action(s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant()))
	})
	c.When(`^the agent dispatches the send of the draft with a granted decision it wrote itself$`, func(ctx context.Context) error {
		s := st(ctx)
		b := s.action(s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant())
		b["decision"] = map[string]any{"decision": "granted", "approver": "carol", "role": "operator", "digest": str(s.prop, "digest")}
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the edited draft with the earlier permit$`, func(ctx context.Context) error {
		s := st(ctx)
		b := s.action(s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant())
		b["permit_token"] = s.permitToken
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved transfer with the (amount|recipient|currency) changed to "([^"]*)"$`, func(ctx context.Context, member, value string) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		args := map[string]any{}
		for k, v := range s.transfer {
			args[k] = v
		}
		if member == "amount" {
			args[member] = json.Number(value)
		} else {
			args[member] = value
		}
		b["arguments"] = args
		return s.dispatch(ctx, false, b)
	})
	c.When(`^the agent dispatches the approved send (\d+) times at once$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		return s.contend(ctx, "claimers", s.freshSend, s.dispatchAtOnce(n, false))
	})
	c.When(`^the agent dispatches the approved send at both hosts at once, (\d+) times each$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		return s.contend(ctx, "claimers", s.freshSend, s.dispatchAtOnce(2*n, true))
	})
	c.When(`^the agent starts dispatching the approved send$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		body, err := s.approvedBody()
		if err != nil {
			return err
		}
		s.async = make(chan asyncResult, 1)
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Add(-1)
			r, err := s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, body, false)
			s.async <- asyncResult{r, err}
		}()
		return nil
	})
	c.When(`^the dispatch finishes$`, func(ctx context.Context) error {
		s := st(ctx)
		if s.async == nil {
			return steps.Fault("no dispatch was started")
		}
		res := <-s.async
		if res.err != nil {
			return res.err
		}
		steps.From(ctx).SetLast(res.r)
		s.noteOperation(res.r)
		return nil
	})
	c.When(`^the agent dispatches the approved send while the principal edits the draft$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		return s.contend(ctx, "claimer and editor", s.freshSend, s.dispatchWhileEditing)
	})

	// Conditions a dispatch meets (several at once for the step-order rows).
	c.Setup(preConditions, `^(`+conditionPart+`(?:(?:, | and )`+conditionPart+`)*)$`, func(ctx context.Context, list string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		var mods dispatchMods
		for _, part := range splitConditions(list) {
			switch part {
			case "the operation is unknown to the host":
				mods.unknownOp = true
			case "the arguments are malformed":
				mods.badArgs = true
			case "no grant is given":
				mods.noGrant = true
			case "the agent's effect ceiling is empty":
				if err := s.putAgent(ctx, s.me, []string{s.sendOp, s.transferOp}, []string{}); err != nil {
					return err
				}
			case "the permit was revoked":
				if err := s.permitNeeded(); err != nil {
					return err
				}
				if _, err := got(s.do(ctx, http.MethodPost, api+"/permits/"+s.permitID+"/revoke", roleResolver, nil)).want(prePermitRevoked, 200); err != nil {
					return err
				}
			}
		}
		s.pendingMods = mods
		return nil
	})
	c.When(`^the resolver revokes the permit$`, func(ctx context.Context) error {
		s := st(ctx)
		_, err := s.do(ctx, http.MethodPost, api+"/permits/"+s.permitID+"/revoke", roleResolver, nil)
		return err
	})
	c.When(`^the permit has expired$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.permitNeeded(); err != nil {
			return err
		}
		// The permit must carry its expiry, and expire within the TTL the
		// approval request asked for.
		at := str(s.decision, "permit.expires_at")
		exp, err := time.Parse(time.RFC3339Nano, at)
		if err := w.Assert(err == nil, "the permit's expires_at %q is not an RFC 3339 time: %v", at, s.decisionResp); err != nil {
			return err
		}
		// Measured on the host's clock (from the permit's issued_at), which
		// a host lent to scenarios one at a time may have had moved ahead by
		// an earlier one; the suite's clock stands in for a host that does
		// not say when it issued the permit.
		from := time.Now()
		if issued, err := time.Parse(time.RFC3339Nano, str(s.decision, "permit.issued_at")); err == nil {
			from = issued
		}
		d := exp.Sub(from) + 150*time.Millisecond
		// At most 5 s, as for the TTLs of seconds it was written for, or 3 s
		// more than a longer TTL asked.
		asked := time.Duration(s.askedTTL) * time.Second
		if err := w.Assert(d <= max(5*time.Second, asked+3*time.Second), "the permit expires at %s, %s after it was issued, though its approval request asked for a TTL of %s", at, d.Round(time.Millisecond), asked); err != nil {
			return err
		}
		if d <= 0 {
			return nil
		}
		// Where the host runs with seams and has the clock seam,
		// the host's clock moves past the expiry instead of the suite
		// waiting for it.
		return w.PassTime(ctx, d, seamPath+"/clock", mustJSON(map[string]any{"advance_ms": d.Milliseconds()}), func(r *steps.Response) error {
			return okAnswer(w, r, "agl/seam-clock.json", "the clock seam answered")
		})
	}).Waits(1200 * time.Millisecond)
	c.Setup(preDispatched, `^the permit was already used$`, func(ctx context.Context) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		if err := s.dispatch(ctx, false, b); err != nil {
			return err
		}
		_, err = got(steps.From(ctx).Last(), nil).want(preDispatched, 200)
		return err
	})
	c.Setup(preUnknown, `^the permit was used for a send that ended Unknown$`, func(ctx context.Context) error {
		s := st(ctx)
		s.mail.fake.Inject(fakemail.Fault{Mode: fakemail.FaultFailAfterEffect, Count: 1})
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		if err := s.dispatch(ctx, false, b); err != nil {
			return err
		}
		r := steps.From(ctx).Last()
		m, err := got(r, nil).want(preUnknown, 200)
		if err == nil && str(m, "state") != "Unknown" {
			err = steps.Precondition(preUnknown, &steps.Failure{Msg: "the send whose destination failed after the effect did not end Unknown: " + r.String(), Exchange: r})
		}
		return err
	})
	c.Given(`^the destination will fail after taking effect on the next (\d+) messages$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if s.mail == nil {
			return steps.Fault("describe the AGL host before its destination")
		}
		s.mail.fake.Inject(fakemail.Fault{Mode: fakemail.FaultFailAfterEffect, Count: n})
		return nil
	})
	c.Given(`^the destination will (reject the next message before any effect|fail after taking effect on the next message|answer unreadable JSON after taking effect on the next message|hang after taking effect on the next message|hang without taking effect on the next message)$`, func(ctx context.Context, what string) error {
		s := st(ctx)
		mode := map[string]string{
			"reject the next message before any effect":                      fakemail.FaultReject,
			"fail after taking effect on the next message":                   fakemail.FaultFailAfterEffect,
			"answer unreadable JSON after taking effect on the next message": fakemail.FaultGarbage,
			"hang after taking effect on the next message":                   fakemail.FaultHang,
			"hang without taking effect on the next message":                 fakemail.FaultHangNoEffect,
		}[what]
		if s.mail == nil {
			return steps.Fault("describe the AGL host before its destination")
		}
		s.mail.fake.Inject(fakemail.Fault{Mode: mode, Count: 1})
		return nil
	})
	c.When(`^the host will fail to persist the next (claim|outcome)$`, func(ctx context.Context, what string) error {
		return st(ctx).seamFault(ctx, map[string]string{"claim": "claim", "outcome": "completion"}[what], "fail", nil)
	})
	c.When(`^the first host will crash at the (external call, before sending|completion, after the effect)$`, func(ctx context.Context, where string) error {
		// The host that crashes is one of the scenario's own on the
		// store it shares with the fixture's host: a host other scenarios
		// use is never crashed. From here on it is "the first host", and
		// the fixture's host, which survives, "the second".
		s, w := st(ctx), steps.From(ctx)
		boundary := map[string]string{"external call, before sending": "external_call", "completion, after the effect": "completion"}[where]
		if err := s.ensure(ctx); err != nil {
			return err
		}
		if !s.shared {
			return steps.Fault("a crash needs a second host on the store (a Given step describes it)")
		}
		h, err := s.storeHost(ctx, "crashing", nil, nil)
		if err != nil {
			return err
		}
		raw := mustJSON(map[string]any{"boundary": boundary, "action": "halt", "operation": s.sendOp, "count": 1})
		r, err := w.Exchange(ctx, h.HTTP, http.MethodPost, seamPath+"/faults", raw, http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return err
		}
		switch r.Status {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			return steps.Block(verdict.CauseSeamAbsent, "the host answered %d at the fault seam: %s", r.Status, r)
		}
		if err := w.Assert(r.Status == http.StatusCreated, "the host's fault seam refused %s/halt: %s", boundary, r); err != nil {
			return err
		}
		s.crasher, s.crashArmed = h, true
		return nil
	})
	c.When(`^the operator reconciles the operation( at the second host)? by asking the destination$`, func(ctx context.Context, second string) error {
		return st(ctx).reconcile(ctx, second != "", roleOperator, map[string]any{"method": "receiver_lookup"})
	})
	c.When(`^the (operator|resolver) records that a human established the operation had (no effect|an effect)$`, func(ctx context.Context, who, what string) error {
		res := map[string]string{"no effect": "no_effect", "an effect": "completed"}[what]
		return st(ctx).reconcile(ctx, false, who, map[string]any{"method": "human", "resolution": res, "actor": "dave (ops on call)"})
	})

	// Contracts, agents and grants.
	c.When(`^the operator registers an email contract "([^"]*)" that quotes a made-up implementation fingerprint$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		c := s.emailContract(ctx, s.opName(name), "1", 1)
		c["implementation_fingerprint"] = "sha256:" + strings.Repeat("0", 64)
		_, err := s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, c)
		return err
	})
	c.When(`^the operator registers the email contract again at version "([^"]*)" allowing (\d+) attempts$`, func(ctx context.Context, version string, n int) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		_, err := s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, s.emailContract(ctx, s.sendOp, version, n))
		return err
	})
	c.When(`^the operator registers a transfer contract "([^"]*)" whose possible effects are "([^"]*)"$`, func(ctx context.Context, name, effects string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		_, err := s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, s.transferContract(ctx, s.opName(name), csv(effects)))
		return err
	})
	c.Setup(preAgent, `^the operator narrows the agent's tool set to "([^"]*)"$`, func(ctx context.Context, tools string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		var ops []string
		for _, t := range csv(tools) {
			ops = append(ops, s.opName(t))
		}
		return s.putAgent(ctx, s.me, ops, []string{"external_write", "email_send", "financial_write"})
	})
	c.Setup(preAgent, `^the operator sets the agent's effect ceiling to "([^"]*)"$`, func(ctx context.Context, ceiling string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		return s.putAgent(ctx, s.me, []string{s.sendOp, s.transferOp}, csv(ceiling))
	})
	c.When(`^(the agent, with no credentials,|the agent, presenting its own grant token,|the operator|the approval resolver) asks the host to issue a grant for the principal$`, func(ctx context.Context, who string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		role := map[string]string{"the agent, with no credentials,": roleNone, "the agent, presenting its own grant token,": s.me.grantToken,
			"the operator": roleOperator, "the approval resolver": roleResolver}[who]
		r, err := s.do(ctx, http.MethodPost, api+"/grants", role, s.grantBody(s.me.principal, []string{s.sendOp, s.transferOp}, []string{"*"}, []string{"*"}, nil))
		if err == nil {
			if m, jerr := r.JSON(); jerr == nil {
				steps.From(ctx).Secret(str(m, "grant_token")) // a grant the host should not have issued
			}
		}
		return err
	})
	c.When(`^the operator reads the principal's grant$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		_, err := s.do(ctx, http.MethodGet, api+"/grants/"+s.me.grantID, roleOperator, nil)
		return err
	})
	c.Setup(preScopedGrant, `^the principal's grant is replaced by one that (covers another account|covers only the email operation|was issued to another principal|expired an hour ago|becomes valid in an hour)$`, func(ctx context.Context, how string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		subject, ops, accounts := s.me.principal, []string{s.sendOp, s.transferOp}, []string{s.me.account}
		extra := map[string]any{}
		now := time.Now().UTC()
		switch how {
		case "covers another account":
			accounts = []string{"acct-someone-else"}
		case "covers only the email operation":
			ops = []string{s.sendOp}
		case "was issued to another principal":
			subject = "mallory-" + s.exec
		case "expired an hour ago":
			extra = map[string]any{"not_before": now.Add(-2 * time.Hour).Format(time.RFC3339), "expires_at": now.Add(-time.Hour).Format(time.RFC3339), "ttl_seconds": 0}
		case "becomes valid in an hour":
			extra = map[string]any{"not_before": now.Add(time.Hour).Format(time.RFC3339), "expires_at": now.Add(3 * time.Hour).Format(time.RFC3339), "ttl_seconds": 0}
		}
		b := s.grantBody(subject, ops, []string{s.me.mailbox}, accounts, extra)
		if b["ttl_seconds"] == 0 {
			delete(b, "ttl_seconds")
		}
		r, err := s.do(ctx, http.MethodPost, api+"/grants", roleAuthority, b)
		m, err := got(r, err).want(preScopedGrant, 201)
		if err != nil {
			return err
		}
		s.grantOverride = str(m, "grant_token")
		steps.From(ctx).Secret(s.grantOverride)
		if s.grantOverride == "" {
			return steps.Precondition(preScopedGrant, &steps.Failure{Msg: "the replacement grant carries no grant_token: " + r.String(), Exchange: r})
		}
		return nil
	})
	c.When(`^the principal delegates its grant to a helper (adding an operation|adding a mailbox|with every resource of a kind|expiring after the parent|for the transfer operation only, expiring sooner)$`, delegate)
	c.Setup(preDelegated, `^the principal has delegated its grant to a helper (for the transfer operation only, expiring sooner)$`, delegate)
	c.When(`^the helper's agent proposes (sending an email|a transfer of (\d+) to "([^"]*)") under the delegated grant$`, func(ctx context.Context, what, amount, to string) error {
		s := st(ctx)
		if s.helper == nil || s.helper.grantToken == "" {
			return steps.Fault("no delegated grant")
		}
		var op string
		var args any
		if what == "sending an email" {
			r, err := s.do(ctx, http.MethodPost, api+"/resources/email-drafts", roleNone, s.draftBody(s.helper.principal, s.me.mailbox, []string{"bob@example.com"}, "From the helper."))
			m, err := got(r, err).want(preDraft, 201)
			if err != nil {
				return err
			}
			if str(m, "handle") == "" {
				return steps.Precondition(preDraft, &steps.Failure{Msg: "the helper's draft carries no handle: " + r.String(), Exchange: r})
			}
			op, args = s.sendOp, map[string]any{"draft": str(m, "handle")}
		} else {
			op, args = s.transferOp, map[string]any{"account": s.me.account, "recipient": to, "amount": json.Number(amount)}
		}
		body := map[string]any{"execution_id": s.exec, "principal": s.helper.principal, "agent_id": s.helper.agent,
			"operation": op, "arguments": args, "grant_token": s.helper.grantToken}
		r, err := s.do(ctx, http.MethodPost, api+"/proposals", roleNone, body)
		if err != nil {
			return err
		}
		s.noteProposal(r, op, args)
		return nil
	})
	c.When(`^the helper's agent dispatches the approved transfer under the delegated grant$`, func(ctx context.Context) error {
		s := st(ctx)
		if s.helper == nil || s.helper.grantToken == "" || s.transfer == nil {
			return steps.Fault("no delegated grant or approved transfer")
		}
		if err := s.permitNeeded(); err != nil {
			return err
		}
		body := map[string]any{"execution_id": s.exec, "principal": s.helper.principal, "agent_id": s.helper.agent,
			"operation": s.transferOp, "arguments": s.transfer, "grant_token": s.helper.grantToken, "permit_token": s.permitToken}
		return s.dispatch(ctx, false, body)
	})
	c.When(`^the authorization service revokes the principal's grant$`, func(ctx context.Context) error {
		s := st(ctx)
		_, err := got(s.do(ctx, http.MethodPost, api+"/grants/"+s.me.grantID+"/revoke", roleAuthority, nil)).want(preGrantRevoked, 200)
		return err
	})
}

func splitConditions(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ", ") {
		for _, q := range strings.Split(p, " and ") {
			if q = strings.TrimSpace(q); q != "" {
				out = append(out, q)
			}
		}
	}
	return out
}

func csv(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// delegate asks, with the principal's grant token, for a grant delegated to
// a helper (whose agent is configured on first use).
func delegate(ctx context.Context, how string) error {
	s := st(ctx)
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if s.helper == nil {
		id := strings.TrimPrefix(s.exec, "exec-")
		s.helper = &actor{principal: "helper-" + id, agent: "helper-agent-" + id}
		if err := s.putAgent(ctx, *s.helper, []string{s.sendOp, s.transferOp}, []string{"external_write", "email_send", "financial_write"}); err != nil {
			return err
		}
	}
	ops, mailboxes, accounts := []string{s.transferOp}, []string(nil), []string{s.me.account}
	extra := map[string]any{"ttl_seconds": 600}
	switch how {
	case "adding an operation":
		ops = []string{s.transferOp, s.opName("mail.other_operation")}
	case "adding a mailbox":
		mailboxes = []string{"boss@example.com"}
	case "with every resource of a kind":
		accounts = []string{"*"}
	case "expiring after the parent":
		extra = map[string]any{"ttl_seconds": 7200}
	}
	r, err := s.do(ctx, http.MethodPost, api+"/grants/"+s.me.grantID+"/delegations", s.me.grantToken, s.grantBody(s.helper.principal, ops, mailboxes, accounts, extra))
	if err != nil {
		return err
	}
	if r.Status == 201 {
		if m, err := r.JSON(); err == nil {
			s.helper.grantID, s.helper.grantToken = str(m, "grant_id"), str(m, "grant_token")
			steps.From(ctx).Secret(s.helper.grantToken)
		}
	}
	if strings.HasPrefix(how, "for the transfer") && (r.Status != 201 || s.helper.grantToken == "") {
		// The narrower delegation is what later steps act under.
		return steps.Precondition(preDelegated, &steps.Failure{Msg: "the narrower delegation was refused or carries no grant_token: " + r.String(), Exchange: r})
	}
	return nil
}

// freshSend makes the next round's subject in a contention raced for real:
// a new approved send to the same recipient.
func (s *state) freshSend(ctx context.Context) error {
	if s.lastTo == "" {
		return steps.Fault("a contention round needs an approved send made earlier")
	}
	return s.approveSend(ctx, s.lastTo)
}

// dispatchAtOnce races n dispatches of the approved send (every other one
// at the second host when alternate is set).
func (s *state) dispatchAtOnce(n int, alternate bool) func(context.Context) ([]*steps.Response, *steps.Response, error) {
	return func(ctx context.Context) ([]*steps.Response, *steps.Response, error) {
		b, err := s.approvedBody()
		if err != nil {
			return nil, nil, err
		}
		err = s.concurrently(ctx, n, alternate, api+"/dispatch", b)
		return s.results, nil, err
	}
}

// dispatchWhileEditing races a dispatch of the approved send with an edit
// of its draft at the revision the send was approved at.
func (s *state) dispatchWhileEditing(ctx context.Context) ([]*steps.Response, *steps.Response, error) {
	rev, err := s.revision(ctx)
	if err != nil {
		return nil, nil, err
	}
	body, err := s.approvedBody()
	if err != nil {
		return nil, nil, err
	}
	edit := map[string]any{"owner": s.me.principal, "expected_revision": rev,
		"payload": map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": "Edited in a race."}}
	var wg sync.WaitGroup
	var derr, eerr error
	var d, e *steps.Response
	gate := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-gate
		d, derr = s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, body, false)
	}()
	go func() {
		defer wg.Done()
		<-gate
		e, eerr = s.call(ctx, false, http.MethodPut, api+"/resources/"+s.draftID, roleNone, edit, false)
	}()
	close(gate)
	wg.Wait()
	return []*steps.Response{d}, e, first(derr, eerr)
}
