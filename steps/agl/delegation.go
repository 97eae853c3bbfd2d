package agl

// Steps for bounded delegation (spec 4.3, 13 Stage 3; profile
// agl-delegation; docs/agl-binding.md §14, docs/hosts/agl.md §7.1): grants
// with a use count, delegations and redelegations asking for more or less
// than their parent holds, and actions made end to end under a grant, so
// that a host may refuse a spent grant at the proposal or at the dispatch.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/parley-conformance/parley/steps"
)

const (
	preBoundedGrant      = "agl.precondition.bounded-grant"
	preBoundedDelegation = "agl.precondition.bounded-delegation"
)

func init() { preconditions = append(preconditions, preBoundedGrant, preBoundedDelegation) }

// delegationState is what the delegation steps keep beside the scenario's
// AGL state: the assistant a helper redelegates to, and the grant each
// delegation step was last issued.
type delegationState struct {
	assistant *actor
	issued    map[string]map[string]any // the 201 answer, by "helper" / "assistant"
}

func dst(ctx context.Context) *delegationState {
	return steps.From(ctx).State("agl-delegation", func() any {
		return &delegationState{issued: map[string]map[string]any{}}
	}).(*delegationState)
}

func registerDelegation(c *steps.Catalog) {
	c.Setup(preBoundedGrant, `^the principal's grant allows (\d+) uses?$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		b := s.grantBody(s.me.principal, []string{s.sendOp, s.transferOp}, []string{s.me.mailbox}, []string{s.me.account},
			map[string]any{"max_uses": n})
		r, err := s.do(ctx, http.MethodPost, api+"/grants", roleAuthority, b)
		m, err := got(r, err).want(preBoundedGrant, 201)
		if err != nil {
			return err
		}
		id, tok := str(m, "grant_id"), str(m, "grant_token")
		steps.From(ctx).Secret(tok)
		if id == "" || tok == "" || usesOf(m) != n {
			return steps.Precondition(preBoundedGrant, &steps.Failure{Msg: "the grant with a use count carries no grant_id, no grant_token or another max_uses: " + r.String(), Exchange: r})
		}
		s.me.grantID, s.me.grantToken = id, tok
		return nil
	})
	principalDelegates := func(ctx context.Context, how, uses string) error {
		s := st(ctx)
		if err := s.ensureHelper(ctx); err != nil {
			return err
		}
		ops, mailboxes, accounts := []string{s.transferOp}, []string(nil), []string{s.me.account}
		extra := map[string]any{"ttl_seconds": 600}
		switch {
		case how == "for an operation the principal lacks":
			ops = append(ops, s.opName("mail.other_operation"))
		case how == "for a mailbox the principal lacks":
			mailboxes = []string{"boss-" + s.id + "@example.com"}
		case how == "for every account":
			accounts = []string{"*"}
		case how == "expiring after the principal's grant":
			extra["ttl_seconds"] = 7200 // the principal's lasts 3600 s
		case how == "valid from an hour before the principal's grant":
			extra["not_before"] = time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
		case uses != "":
			n, _ := strconv.Atoi(uses)
			extra["max_uses"] = n
		}
		r, err := s.do(ctx, http.MethodPost, api+"/grants/"+s.me.grantID+"/delegations", s.me.grantToken,
			s.grantBody(s.helper.principal, ops, mailboxes, accounts, extra))
		if err != nil {
			return err
		}
		if r.Status == 201 {
			if m, err := r.JSON(); err == nil {
				s.helper.grantID, s.helper.grantToken = str(m, "grant_id"), str(m, "grant_token")
				steps.From(ctx).Secret(s.helper.grantToken)
				dst(ctx).issued["helper"] = m
			}
		}
		return nil
	}
	c.When(`^the principal delegates its grant to a helper (for an operation the principal lacks|for a mailbox the principal lacks|for every account|expiring after the principal's grant|valid from an hour before the principal's grant)$`, func(ctx context.Context, how string) error {
		return principalDelegates(ctx, how, "")
	})
	c.When(`^the principal delegates its bounded grant to a helper (with (\d+) uses?)$`, principalDelegates)
	c.Setup(preBoundedDelegation, `^the principal has delegated its bounded grant to a helper with (\d+) uses?$`, func(ctx context.Context, uses string) error {
		if err := principalDelegates(ctx, "", uses); err != nil {
			return err
		}
		s, w := st(ctx), steps.From(ctx)
		r := w.Last()
		if r == nil || r.Status != 201 || s.helper.grantToken == "" {
			return steps.Precondition(preBoundedDelegation, &steps.Failure{Msg: "the delegation with a use count was refused or carries no grant_token: " + r.String(), Exchange: r})
		}
		return nil
	})
	c.When(`^the helper redelegates its grant to an assistant (for the email operation too|for the principal's mailbox|expiring after the helper's grant|for the transfer operation only|with (\d+) uses?)$`, func(ctx context.Context, how, uses string) error {
		s, d := st(ctx), dst(ctx)
		if s.helper == nil || s.helper.grantToken == "" {
			return steps.Fault("no delegated grant")
		}
		if d.assistant == nil {
			d.assistant = &actor{principal: "assistant-" + s.id}
		}
		ops, mailboxes, accounts := []string{s.transferOp}, []string(nil), []string{s.me.account}
		extra := map[string]any{"ttl_seconds": 300}
		switch {
		case how == "for the email operation too":
			ops = append(ops, s.sendOp) // the principal's grant covers it; the helper's does not
		case how == "for the principal's mailbox":
			mailboxes = []string{s.me.mailbox}
		case how == "expiring after the helper's grant":
			extra["ttl_seconds"] = 1200 // the helper's lasts 600 s, the principal's 3600 s
		case uses != "":
			n, _ := strconv.Atoi(uses)
			extra["max_uses"] = n
		}
		r, err := s.do(ctx, http.MethodPost, api+"/grants/"+s.helper.grantID+"/delegations", s.helper.grantToken,
			s.grantBody(d.assistant.principal, ops, mailboxes, accounts, extra))
		if err != nil {
			return err
		}
		if r.Status == 201 {
			if m, err := r.JSON(); err == nil {
				d.assistant.grantID, d.assistant.grantToken = str(m, "grant_id"), str(m, "grant_token")
				steps.From(ctx).Secret(d.assistant.grantToken)
				d.issued["assistant"] = m
			}
		}
		return nil
	})
	c.Then(`^the refusal names the bound "([^"]*)"(?: of (the principal's|the helper's) grant)?$`, func(ctx context.Context, bound, whose string) error {
		s, w := st(ctx), steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		m, err := r.JSON()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status >= 400 && str(m, "error.detail.bound") == bound, "the refusal names bound %q, want %q: %s", str(m, "error.detail.bound"), bound, r); err != nil {
			return err
		}
		if whose == "" {
			return nil
		}
		want := s.me.grantID
		if whose == "the helper's" {
			if s.helper == nil {
				return steps.Fault("no helper")
			}
			want = s.helper.grantID
		}
		return w.Assert(str(m, "error.detail.grant_id") == want, "the refusal names grant %q as the one whose bound was met, want %s %q: %s", str(m, "error.detail.grant_id"), whose, want, r)
	})
	c.Then(`^the (delegated|assistant's) grant names the (principal's|helper's) grant as its parent(?:, allows (\d+) uses?)? and expires no later than it$`, func(ctx context.Context, child, parent, uses string) error {
		s, w, d := st(ctx), steps.From(ctx), dst(ctx)
		key, parentID := "helper", s.me.grantID
		if child == "assistant's" {
			key = "assistant"
			if s.helper == nil {
				return steps.Fault("no helper")
			}
			parentID = s.helper.grantID
		}
		issued := d.issued[key]
		if issued == nil {
			return steps.Fault("no %s grant was issued", key)
		}
		// What the delegation answered, and what the host reads back.
		r, got, err := s.read(ctx, api+"/grants/"+str(issued, "grant_id"), roleOperator)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 200, "reading the delegated grant: %s", r); err != nil {
			return err
		}
		_, p, err := s.read(ctx, api+"/grants/"+parentID, roleOperator)
		if err != nil {
			return err
		}
		for _, m := range []map[string]any{issued, got} {
			if err := w.Assert(str(m, "parent_grant_id") == parentID, "the grant names parent %q, want %q: %v", str(m, "parent_grant_id"), parentID, m); err != nil {
				return err
			}
			if n, err := strconv.Atoi(uses); err == nil {
				if err := w.Assert(usesOf(m) == n, "the grant allows %v uses, want %d", m["max_uses"], n); err != nil {
					return err
				}
			}
			ce, err1 := time.Parse(time.RFC3339Nano, str(m, "expires_at"))
			pe, err2 := time.Parse(time.RFC3339Nano, str(p, "expires_at"))
			if err := w.Assert(err1 == nil && err2 == nil && !ce.After(pe), "the grant expires %s, its parent %s", str(m, "expires_at"), str(p, "expires_at")); err != nil {
				return err
			}
		}
		return nil
	})
	// The helper's transfer approved first and dispatched later, so that
	// what changes in between (a revocation) is checked at the dispatch.
	c.Given(`^the helper has an approved transfer of (\d+) to "([^"]*)" under the delegated grant$`, func(ctx context.Context, amount, to string) error {
		s := st(ctx)
		if s.helper == nil || s.helper.grantToken == "" {
			return steps.Fault("no delegated grant")
		}
		body := helperTransfer(s, amount, to)
		r, err := s.do(ctx, http.MethodPost, api+"/proposals", roleNone, body)
		if err != nil {
			return err
		}
		s.noteProposal(r, s.transferOp, body["arguments"])
		if err := s.approveProposal(ctx); err != nil {
			return err
		}
		body["permit_token"] = s.permitToken
		s.helperDispatch = body
		return nil
	})
	c.When(`^the helper dispatches its approved transfer$`, func(ctx context.Context) error {
		s := st(ctx)
		if s.helperDispatch == nil {
			return steps.Fault("the helper has no approved transfer")
		}
		return s.dispatch(ctx, false, s.helperDispatch)
	})
	c.When(`^the helper makes an approved transfer of (\d+) to "([^"]*)" under the delegated grant$`, func(ctx context.Context, amount, to string) error {
		s := st(ctx)
		if s.helper == nil || s.helper.grantToken == "" {
			return steps.Fault("no delegated grant")
		}
		body := helperTransfer(s, amount, to)
		args := body["arguments"]
		r, err := s.do(ctx, http.MethodPost, api+"/proposals", roleNone, body)
		if err != nil {
			return err
		}
		s.noteProposal(r, s.transferOp, args)
		if r.Status != 201 {
			return nil // refused at the proposal: the refusal is the answer
		}
		if err := s.approveProposal(ctx); err != nil {
			return err
		}
		body["permit_token"] = s.permitToken
		return s.dispatch(ctx, false, body)
	})
	c.When(`^the principal makes an approved send to "([^"]*)" under its grant$`, func(ctx context.Context, to string) error {
		s := st(ctx)
		if err := s.createDraft(ctx, s.me.mailbox, to); err != nil {
			return err
		}
		r, err := s.propose(ctx, s.sendOp, map[string]any{"draft": s.latestHandle}, s.me.grantToken)
		if err != nil {
			return err
		}
		if r.Status != 201 {
			return nil // refused at the proposal: the refusal is the answer
		}
		if err := s.approveProposal(ctx); err != nil {
			return err
		}
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		return s.dispatch(ctx, false, b)
	})
	c.Then(`^the audit trail of the operation records one claim, by the helper under the delegated grant$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if s.helper == nil || s.opID == "" {
			return steps.Fault("no helper or no operation")
		}
		recs, _, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		claims := events(recs, "claimed")
		if err := w.Assert(len(claims) == 1, "the operation's audit trail has %d claim(s), want 1: %v", len(claims), recs); err != nil {
			return err
		}
		return w.Assert(str(claims[0], "principal") == s.helper.principal && str(claims[0], "grant_id") == s.helper.grantID,
			"the claim names principal %q and grant %q, want the helper %q under its delegated grant %q",
			str(claims[0], "principal"), str(claims[0], "grant_id"), s.helper.principal, s.helper.grantID)
	})
}

// ensureHelper configures the helper's agent on first use, as delegate does.
func (s *state) ensureHelper(ctx context.Context) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if s.helper != nil {
		return nil
	}
	s.helper = &actor{principal: "helper-" + s.id, agent: "helper-agent-" + s.id}
	return s.putAgent(ctx, *s.helper, []string{s.sendOp, s.transferOp}, []string{"external_write", "email_send", "financial_write"})
}

// usesOf reads a grant's max_uses (-1 when it has none or not a number).
func usesOf(m map[string]any) int {
	if n, ok := m["max_uses"].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return int(i)
		}
	}
	return -1
}

// helperTransfer is the body of the helper's proposal of a transfer from
// the principal's account under the delegated grant.
func helperTransfer(s *state, amount, to string) map[string]any {
	args := map[string]any{"account": s.me.account, "recipient": to, "amount": json.Number(amount)}
	return map[string]any{"execution_id": s.exec, "principal": s.helper.principal, "agent_id": s.helper.agent,
		"operation": s.transferOp, "arguments": args, "grant_token": s.helper.grantToken}
}
