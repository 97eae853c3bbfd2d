package agl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

// networkStatuses are what a client library takes for a transient network
// or capacity problem and retries.
var networkStatuses = map[int]bool{408: true, 429: true, 502: true, 503: true, 504: true}

// refusal checks the last response is a denial with the given status and
// code (and category, when given), in the binding's error shape.
func refusal(ctx context.Context, status int, code, category string) error {
	w := steps.From(ctx)
	r, err := w.LastResponse()
	if err != nil {
		return err
	}
	if err := w.Assert(r.Status == status, "expected a refusal with status %d: %s", status, r); err != nil {
		return err
	}
	if err := w.ExpectSchema("agl/error.json", r.Body); err != nil {
		return err
	}
	if code != "" {
		if err := w.ExpectField("error.code", code); err != nil {
			return err
		}
	}
	if category != "" {
		if err := w.ExpectField("error.category", category); err != nil {
			return err
		}
	}
	return nil
}

func notRetryable(ctx context.Context) error {
	w := steps.From(ctx)
	r, err := w.LastResponse()
	if err != nil {
		return err
	}
	if err := w.Assert(!networkStatuses[r.Status], "a policy denial answered with %d, which clients treat as a transient network error: %s", r.Status, r); err != nil {
		return err
	}
	if err := w.Assert(r.Header.Get("Retry-After") == "", "a policy denial carries Retry-After: %s", r); err != nil {
		return err
	}
	return w.ExpectField("error.retryable", "false")
}

// effects reads what a fake destination the suite runs received: an
// observation of what the host did.
func effects(w *steps.World, d *destination) []fakemail.Effect {
	w.Observe(nil)
	if d == nil {
		return nil
	}
	return d.fake.Effects()
}

func (s *state) expectMessages(ctx context.Context, d *destination, what string, n int) error {
	w := steps.From(ctx)
	if err := s.leaseCheck(w); err != nil {
		return err
	}
	if d == nil && what != "second destination" {
		return steps.Fault("no %s was described", what)
	}
	e := effects(w, d)
	return w.Assert(len(e) == n, "the %s received %d message(s), want %d: %v", what, len(e), n, e)
}

func (s *state) operation(ctx context.Context) (map[string]any, error) {
	w := steps.From(ctx)
	if err := s.operationNeeded(ctx); err != nil {
		return nil, err
	}
	r, m, err := s.read(ctx, api+"/operations/"+s.opID, roleNone)
	if err != nil {
		return nil, err
	}
	if err := w.Assert(r.Status == 200, "reading the operation: %s", r); err != nil {
		return nil, err
	}
	if err := w.ExpectSchema("agl/operation.json", r.Body); err != nil {
		return nil, err
	}
	return m, w.Assert(str(m, "operation_id") == s.opID, "asked for operation %s, got %s", s.opID, r)
}

func (s *state) resource(ctx context.Context) (map[string]any, error) {
	w := steps.From(ctx)
	r, m, err := s.read(ctx, api+"/resources/"+s.draftID, roleNone)
	if err != nil {
		return nil, err
	}
	if err := w.Assert(r.Status == 200, "reading the draft: %s", r); err != nil {
		return nil, err
	}
	return m, w.Assert(str(m, "resource_id") == s.draftID, "asked for draft %s, got %s", s.draftID, r)
}

func (s *state) permit(ctx context.Context) (map[string]any, error) {
	w := steps.From(ctx)
	if err := s.permitNeeded(); err != nil {
		return nil, err
	}
	r, m, err := s.read(ctx, api+"/permits/"+s.permitID, roleNone)
	if err != nil {
		return nil, err
	}
	if err := w.Assert(r.Status == 200 && str(m, "permit_id") == s.permitID, "reading the permit: %s", r); err != nil {
		return nil, err
	}
	return m, w.Assert(!strings.Contains(string(r.Body), s.permitToken), "reading the permit reveals its token: %s", r)
}

// auditOf reads the audit trail of the operation (or all of it), in order,
// and keeps only records that are about it: the suite re-checks the filter.
func (s *state) auditOf(ctx context.Context, opID string) ([]map[string]any, *steps.Response, error) {
	w := steps.From(ctx)
	// The scenario's share of the trail: its operation's records, or its
	// execution's (other scenarios write theirs to the same host).
	path := api + "/audit?execution_id=" + url.QueryEscape(s.exec)
	if opID != "" {
		path = api + "/audit?operation_id=" + url.QueryEscape(opID)
	}
	r, m, err := s.read(ctx, path, roleOperator)
	if err != nil {
		return nil, r, err
	}
	if err := w.Assert(r.Status == 200, "reading the audit trail: %s", r); err != nil {
		return nil, r, err
	}
	list, _ := m["records"].([]any)
	var out []map[string]any
	var last float64 = -1
	for _, e := range list {
		rec, _ := e.(map[string]any)
		if rec == nil || (opID != "" && str(rec, "operation_id") != opID) {
			continue
		}
		n, _ := rec["seq"].(json.Number)
		seq, serr := n.Float64()
		if err := w.Assert(serr == nil && seq > last, "audit records out of order or without a numeric seq: %v after %v", rec["seq"], last); err != nil {
			return nil, r, err
		}
		last = seq
		out = append(out, rec)
	}
	return out, r, nil
}

func events(recs []map[string]any, event string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if str(r, "event") == event {
			out = append(out, r)
		}
	}
	return out
}

func registerChecks(c *steps.Catalog) {
	c.Then(`^the action is refused with status (\d+), code "([^"]*)" and category "([^"]*)"$`, func(ctx context.Context, status int, code, cat string) error {
		if err := refusal(ctx, status, code, cat); err != nil {
			return err
		}
		return notRetryable(ctx)
	})
	c.Then(`^the action is refused at step (\d+) with code "([^"]*)"$`, func(ctx context.Context, step int, code string) error {
		w := steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status >= 400, "expected a refusal: %s", r); err != nil {
			return err
		}
		if err := w.ExpectField("error.code", code); err != nil {
			return err
		}
		return w.ExpectField("error.step", fmt.Sprint(step))
	})
	c.Then(`^the response is refused with status (\d+) and code "([^"]*)"$`, func(ctx context.Context, status int, code string) error {
		return refusal(ctx, status, code, "")
	})
	c.Then(`^the refusal is not dressed as a network error and is not retryable$`, notRetryable)
	c.Then(`^the refusal names "([^"]*)" as the member that differs$`, func(ctx context.Context, member string) error {
		w := steps.From(ctx)
		v, ok, err := w.Field("error.detail.differs")
		if err != nil {
			return err
		}
		list, _ := v.([]any)
		return w.Assert(ok && slices.Contains(list, any(member)), "the refusal does not name %q among the differing members: %v", member, v)
	})
	c.Then(`^the refusal says no effect happened$`, func(ctx context.Context) error {
		return steps.From(ctx).ExpectField("error.detail.effect", "none")
	})

	// The destinations, as the suite counts them.
	c.Then(`^the destination received (no message|exactly one message)$`, func(ctx context.Context, what string) error {
		s, w := st(ctx), steps.From(ctx)
		want := map[string]int{"no message": 0, "exactly one message": 1}[what]
		if per, ok := s.perRoundMessages(); ok {
			// Raced for real over rounds: each round's own subject.
			if err := s.leaseCheck(w); err != nil {
				return err
			}
			w.Observe(nil)
			for i, n := range per {
				if err := w.Assert(n == want, "in contention round %d of %d the destination received %d message(s), want %d", i+1, len(per), n, want); err != nil {
					return err
				}
			}
			return s.expectMessages(ctx, s.mail, "destination", want*len(per))
		}
		return s.expectMessages(ctx, s.mail, "destination", want)
	})
	c.Then(`^neither destination received a message$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.expectMessages(ctx, s.mail, "first destination", 0); err != nil {
			return err
		}
		return s.expectMessages(ctx, s.mail2, "second destination", 0)
	})
	c.Then(`^the destination received exactly one message, (with the edited body|carrying the operation id|keyed by the operation id)$`, func(ctx context.Context, how string) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.expectMessages(ctx, s.mail, "destination", 1); err != nil {
			return err
		}
		e := effects(w, s.mail)[0]
		switch how {
		case "with the edited body":
			return w.Assert(strings.Contains(string(e.Body), "Edited: see the corrected figures."), "the message sent is not the edited revision: %s", e.Body)
		case "carrying the operation id":
			return w.Assert(s.opID != "" && e.OperationID == s.opID, "the message carries operation %q, the dispatch answered %q", e.OperationID, s.opID)
		default:
			return w.Assert(s.opID != "" && e.Key == s.opID, "the message's idempotency key is %q, the operation is %q", e.Key, s.opID)
		}
	})
	c.Then(`^the destination was sent the message (\d+) times?, every time with the operation id as idempotency key$`, func(ctx context.Context, n int) error {
		s, w := st(ctx), steps.From(ctx)
		w.Observe(nil)
		sent := s.mail.sends()
		if err := w.Assert(len(sent) == n, "the destination was sent %d request(s), want %d", len(sent), n); err != nil {
			return err
		}
		for _, r := range sent {
			if err := w.Assert(r.key == s.opID && r.operation == s.opID, "a send carried key %q for operation %q, want %q", r.key, r.operation, s.opID); err != nil {
				return err
			}
		}
		return nil
	})
	// A host may stop retrying before the budget, or never retry (section 8
	// permits retries, it does not require them): the attempts it made are
	// at most the budget, each one a send under the operation's key.
	c.Then(`^the operation made at most (\d+) attempts?, and the destination was sent the message once per attempt, every time with the operation id as idempotency key$`, func(ctx context.Context, n int) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		a, err := strconv.Atoi(steps.Text(m["attempt"]))
		if err := w.Assert(err == nil && a >= 1 && a <= n, "the operation made %v attempt(s), want 1 to %d", m["attempt"], n); err != nil {
			return err
		}
		w.Observe(nil)
		sent := s.mail.sends()
		if err := w.Assert(len(sent) == a, "the destination was sent %d request(s), the operation says it made %d attempt(s)", len(sent), a); err != nil {
			return err
		}
		for _, r := range sent {
			if err := w.Assert(r.key == s.opID && r.operation == s.opID, "a send carried key %q for operation %q, want %q", r.key, r.operation, s.opID); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the ledger received no transfer$`, func(ctx context.Context) error {
		s := st(ctx)
		return s.expectMessages(ctx, s.ledger, "ledger", 0)
	})
	c.Then(`^the ledger received exactly one transfer of (\d+) to "([^"]*)"$`, func(ctx context.Context, amount, to string) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.expectMessages(ctx, s.ledger, "ledger", 1); err != nil {
			return err
		}
		v, err := decodeJSON(effects(w, s.ledger)[0].Body)
		if err != nil {
			return err
		}
		args, _ := steps.Lookup(v, "payload")
		return w.Assert(steps.Text(mapGet(args, "amount")) == amount && steps.Text(mapGet(args, "recipient")) == to && steps.Text(mapGet(args, "currency")) == "EUR",
			"the ledger was sent %v, want %s to %s in EUR", args, amount, to)
	})
	c.Then(`^the message the destination received carries exactly the draft the approver was shown$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.expectMessages(ctx, s.mail, "destination", 1); err != nil {
			return err
		}
		sent, err := decodeJSON(effects(w, s.mail)[0].Body)
		if err != nil {
			return err
		}
		got, _ := steps.Lookup(sent, "payload")
		want, ok := steps.Lookup(s.shown, "proposal.snapshot.arguments")
		if err := w.Assert(ok, "the approval request showed the approver no snapshot arguments: %v", s.shown); err != nil {
			return err
		}
		a, _ := canonicalize(got)
		b, _ := canonicalize(want)
		return w.Assert(a != nil && string(a) == string(b), "the destination received\n%s\nbut the approver was shown\n%s", a, b)
	})
	c.Then(`^the permit binds the digest of the snapshot the approver was shown$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		shown := str(s.shown, "proposal.digest")
		if err := w.Assert(shown != "" && str(s.decision, "permit.binds.digest") == shown, "the permit binds %q, the approver was shown %q", str(s.decision, "permit.binds.digest"), shown); err != nil {
			return err
		}
		snap, _ := steps.Lookup(s.shown, "proposal.snapshot")
		enc, err := canonicalize(snap)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(enc)
		return w.Assert("sha256:"+hex.EncodeToString(sum[:]) == shown, "the digest shown is not the SHA-256 of the snapshot shown")
	})

	// Operations, drafts, permits, requests.
	c.Then(`^the dispatch completed$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		if err := w.ExpectStatus(200); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/operation.json", r.Body); err != nil {
			return err
		}
		return w.ExpectField("state", "Completed")
	})
	c.Then(`^the operation is "([^"]*)"( and awaits reconciliation)?$`, func(ctx context.Context, state, awaits string) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(str(m, "state") == state, "the operation is %q, want %q", str(m, "state"), state); err != nil {
			return err
		}
		if awaits != "" {
			return w.Assert(m["awaiting_reconciliation"] == true, "the Unknown operation does not say it awaits reconciliation: %v", m)
		}
		return nil
	})
	c.Then(`^the operation made (\d+) attempts?$`, func(ctx context.Context, n int) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		return w.Assert(steps.Text(m["attempt"]) == fmt.Sprint(n), "the operation made %v attempt(s), want %d", m["attempt"], n)
	})
	c.Then(`^the operation keeps the id the proposal gave it, and the permit names it$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		first := ""
		if len(s.props) > 0 {
			first = str(s.props[0], "operation_id")
		}
		if err := w.Assert(first != "" && first == s.opID, "the proposal named operation %q, the dispatch ran %q", first, s.opID); err != nil {
			return err
		}
		p, err := s.permit(ctx)
		if err != nil {
			return err
		}
		return w.Assert(str(p, "consumed_by_operation") == s.opID && str(s.decision, "permit.binds.operation_id") == s.opID,
			"the permit does not name operation %s: %v / %v", s.opID, p, s.decision)
	})
	c.Then(`^the operation as read back is the one the dispatch answered$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, _ := w.LastResponse()
		rr, _, err := s.read(ctx, api+"/operations/"+s.opID, roleNone)
		if err != nil {
			return err
		}
		return w.Assert(steps.JSONEqual(r.Body, rr.Body), "the dispatch answered\n%s\nbut the store holds\n%s", r.Body, rr.Body)
	})
	c.Then(`^the draft is "([^"]*)"(?: at revision (\d+))?$`, func(ctx context.Context, state, rev string) error {
		s, w := st(ctx), steps.From(ctx)
		drafts := []string{s.draftID}
		if s.race != nil && len(s.race.drafts) > 1 {
			drafts = s.race.drafts // raced for real: every round's draft
		}
		last := s.draftID
		defer func() { s.draftID = last }()
		for _, id := range drafts {
			s.draftID = id
			m, err := s.resource(ctx)
			if err != nil {
				return err
			}
			if err := w.Assert(str(m, "state") == state, "the draft %s is %q, want %q", id, str(m, "state"), state); err != nil {
				return err
			}
			if rev != "" {
				if err := w.Assert(steps.Text(m["revision"]) == rev, "the draft %s is at revision %v, want %s", id, m["revision"], rev); err != nil {
					return err
				}
			}
		}
		return nil
	})
	c.Then(`^the permit is (not )?consumed$`, func(ctx context.Context, not string) error {
		s, w := st(ctx), steps.From(ctx)
		p, err := s.permit(ctx)
		if err != nil {
			return err
		}
		consumed := p["consumed_at"] != nil
		return w.Assert(consumed == (not == ""), "the permit's consumed_at is %v", p["consumed_at"])
	})
	c.Then(`^the permit is consumed by the first operation$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		p, err := s.permit(ctx)
		if err != nil {
			return err
		}
		return w.Assert(p["consumed_at"] != nil && str(p, "consumed_by_operation") == s.opID, "the permit is not consumed by %s: %v", s.opID, p)
	})
	c.Then(`^the approval request is "([^"]*)"$`, func(ctx context.Context, status string) error {
		s, w := st(ctx), steps.From(ctx)
		_, m, err := s.read(ctx, api+"/approval-requests/"+s.requestID, roleNone)
		if err != nil {
			return err
		}
		return w.Assert(str(m, "status") == status, "the approval request is %q, want %q", str(m, "status"), status)
	})
	c.Then(`^the decision carries no permit$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		if err := w.ExpectStatus(200); err != nil {
			return err
		}
		if err := w.ExpectField("status", "denied"); err != nil {
			return err
		}
		return w.ExpectNoField("permit")
	})

	// Contracts and grants.
	c.Then(`^no contract named "([^"]*)" is registered$`, func(ctx context.Context, name string) error {
		s, w := st(ctx), steps.From(ctx)
		// The same read is first shown to find a contract that is registered.
		known, m, err := s.read(ctx, api+"/contracts/"+s.sendOp, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(known.Status == 200 && str(m, "contract.qualified_name") == s.sendOp, "reading the registered contract %s: %s", s.sendOp, known); err != nil {
			return err
		}
		r, err := s.call(ctx, false, http.MethodGet, api+"/contracts/"+s.opName(name), roleNone, nil, false)
		if err != nil {
			return err
		}
		return w.Assert(r.Status == 404, "the refused contract is registered after all: %s", r)
	})
	c.Then(`^the registered email contract still allows (\d+) attempts?$`, func(ctx context.Context, n int) error {
		s, w := st(ctx), steps.From(ctx)
		_, m, err := s.read(ctx, api+"/contracts/"+s.sendOp, roleNone)
		if err != nil {
			return err
		}
		v, _ := steps.Lookup(m, "contract.scheduling_contract.max_attempts")
		return w.Assert(steps.Text(v) == fmt.Sprint(n) && str(m, "contract_version") == "1", "the registered contract changed: %v", m)
	})
	c.Then(`^the contract "([^"]*)" is registered with possible effects "([^"]*)"$`, func(ctx context.Context, name, effects string) error {
		s, w := st(ctx), steps.From(ctx)
		r, m, err := s.read(ctx, api+"/contracts/"+s.opName(name), roleNone)
		if err != nil {
			return err
		}
		v, _ := steps.Lookup(m, "contract.possible_effects")
		list, _ := v.([]any)
		for _, e := range csv(effects) {
			if err := w.Assert(slices.Contains(list, any(e)), "the registered contract lacks effect %s: %s", e, r); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the grant names the host's authorization service as issuer, the principal as subject, its operations, resources, validity and no revocation$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.ExpectStatus(200); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/grant.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		issuer := str(m, "issuer")
		if err := w.Assert(issuer != "" && issuer != s.me.principal && issuer != s.me.agent, "the grant's issuer is %q", issuer); err != nil {
			return err
		}
		if err := w.Assert(str(m, "subject") == s.me.principal && str(m, "grant_id") == s.me.grantID && m["revoked_at"] == nil, "the grant is not the principal's unrevoked grant: %s", r); err != nil {
			return err
		}
		nb, err1 := time.Parse(time.RFC3339Nano, str(m, "not_before"))
		ex, err2 := time.Parse(time.RFC3339Nano, str(m, "expires_at"))
		if err := w.Assert(err1 == nil && err2 == nil && ex.After(nb), "the grant's validity interval is not stated: %s", r); err != nil {
			return err
		}
		return w.Assert(!strings.Contains(string(r.Body), s.me.grantToken), "reading a grant reveals its token")
	})
	c.Then(`^the delegated grant names the parent grant and expires no later than it$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		m, _ := r.JSON()
		_, parent, err := s.read(ctx, api+"/grants/"+s.me.grantID, roleOperator)
		if err != nil {
			return err
		}
		pe, _ := time.Parse(time.RFC3339Nano, str(parent, "expires_at"))
		ce, err := time.Parse(time.RFC3339Nano, str(m, "expires_at"))
		if err := w.Assert(err == nil && !ce.After(pe), "the delegation expires %s, after its parent %s", str(m, "expires_at"), str(parent, "expires_at")); err != nil {
			return err
		}
		return w.Assert(str(m, "parent_grant_id") == s.me.grantID && str(m, "subject") == s.helper.principal, "the delegation does not name its parent: %s", r)
	})

	// Concurrency.
	c.Then(`^exactly one dispatch completed and every other was refused as a claimed permit$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		defer s.noteContention(w, "one dispatch completed per permit")
		rounds := s.raceRounds()
		for i, round := range rounds {
			ok := 0
			for _, r := range round {
				m, _ := r.JSON()
				switch {
				case r.Status == 200 && str(m, "state") == "Completed":
					ok++
					s.opID = str(m, "operation_id")
				case r.Status == 409 && str(m, "error.code") == "permit_consumed" && str(m, "error.category") == "permit_claimed":
				default:
					return w.Assert(false, "a contended dispatch (round %d of %d) answered neither Completed nor permit_consumed: %s", i+1, len(rounds), r)
				}
			}
			if err := w.Assert(ok == 1, "%d of %d contended dispatches of one permit completed (round %d of %d)", ok, len(round), i+1, len(rounds)); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^exactly one proposal was accepted and every other was refused as a stale revision or invalid state$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		defer s.noteContention(w, "one proposal accepted per revision")
		rounds := s.raceRounds()
		for i, round := range rounds {
			ok := 0
			for _, r := range round {
				m, _ := r.JSON()
				code := str(m, "error.code")
				switch {
				case r.Status == 201:
					ok++
				case r.Status == 409 && (code == "stale_revision" || code == "invalid_protocol_state"):
				default:
					return w.Assert(false, "a concurrent proposal (round %d of %d): %s", i+1, len(rounds), r)
				}
			}
			if err := w.Assert(ok == 1, "%d of %d concurrent proposals of one revision were accepted (round %d of %d)", ok, len(round), i+1, len(rounds)); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^exactly one of the dispatch and the edit took effect$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		defer s.noteContention(w, "one of a dispatch and an edit took effect")
		if s.race == nil || len(s.race.rounds) == 0 {
			return steps.Fault("no dispatch raced an edit")
		}
		per, multi := s.perRoundMessages()
		for i := range s.race.rounds {
			d, e := s.race.rounds[i][0], s.race.edits[i]
			dm, _ := d.JSON()
			sent := d.Status == 200 && str(dm, "state") == "Completed"
			edited := e.Status == 200
			if err := w.Assert(sent != edited, "dispatch %s and edit %s (round %d of %d): want exactly one to take effect", d, e, i+1, len(s.race.rounds)); err != nil {
				return err
			}
			want := 0
			if sent {
				want = 1
			} else if err := w.Assert(d.Status == 409, "the losing dispatch (round %d of %d): %s", i+1, len(s.race.rounds), d); err != nil {
				return err
			}
			if !multi {
				return s.expectMessages(ctx, s.mail, "destination", want)
			}
			w.Observe(nil)
			if err := w.Assert(per[i] == want, "in contention round %d of %d the destination received %d message(s), want %d", i+1, len(per), per[i], want); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^while the call is paused the operation is "([^"]*)", the permit is consumed and the draft is "([^"]*)"$`, func(ctx context.Context, opState, draft string) error {
		s, w := st(ctx), steps.From(ctx)
		if s.opID == "" {
			s.opID = str(s.prop, "operation_id")
		}
		if err := waitPaused(ctx, "external_call"); err != nil {
			return err
		}
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(str(m, "state") == opState, "during the external call the operation is %q, want %q", str(m, "state"), opState); err != nil {
			return err
		}
		p, err := s.permit(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(p["consumed_at"] != nil && str(p, "consumed_by_operation") == s.opID, "during the external call the permit is not claimed: %v", p); err != nil {
			return err
		}
		res, err := s.resource(ctx)
		if err != nil {
			return err
		}
		return w.Assert(str(res, "state") == draft, "during the external call the draft is %q, want %q", str(res, "state"), draft)
	})
	c.Then(`^while the call is paused the destination has received no message$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := waitPaused(ctx, "external_call"); err != nil {
			return err
		}
		return s.expectMessages(ctx, s.mail, "destination", 0)
	})

	// Crash and the second host.
	c.Then(`^the first host answered nothing$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		return w.Assert(s.crashed && s.lastErr != nil, "the host told to crash mid-dispatch answered: %v", w.Last())
	})
	c.Then(`^the second host soon reports the operation "([^"]*)" and awaiting reconciliation$`, func(ctx context.Context, state string) error {
		s, w := st(ctx), steps.From(ctx)
		if s.opID == "" {
			s.opID = str(s.prop, "operation_id")
		}
		if err := s.operationNeeded(ctx); err != nil {
			return err
		}
		m, err := s.awaitRecovered(ctx, state)
		if err != nil {
			return err
		}
		return w.Assert(m["awaiting_reconciliation"] == true, "the Unknown operation does not await reconciliation: %v", m)
	})
	c.Then(`^the second host reports the draft "([^"]*)"$`, func(ctx context.Context, state string) error {
		s, w := st(ctx), steps.From(ctx)
		_, m, err := s.call2(ctx, api+"/resources/"+s.draftID)
		if err != nil {
			return err
		}
		return w.Assert(str(m, "state") == state, "the second host reports the draft %q, want %q", str(m, "state"), state)
	})
	c.Then(`^the two hosts are distinct instances on one operation store$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		_, a, err := s.read(ctx, api+"/", roleNone)
		if err != nil {
			return err
		}
		_, b, err := s.call2(ctx, api+"/")
		if err != nil {
			return err
		}
		if err := w.Assert(str(a, "instance") != "" && str(a, "instance") != str(b, "instance"), "the two hosts report one instance %q", str(a, "instance")); err != nil {
			return err
		}
		if err := s.createDraft(ctx, s.me.mailbox, "bob@example.com"); err != nil {
			return err
		}
		r, m, err := s.call2(ctx, api+"/resources/"+s.draftID)
		if err != nil {
			return err
		}
		return w.Assert(r.Status == 200 && str(m, "resource_id") == s.draftID, "a draft made at the first host is not in the second host's store: %s", r)
	})

	// Reconciliation and audit.
	c.Then(`^the reconciliation records method "([^"]*)" and (the destination's message id|the actor)$`, func(ctx context.Context, method, what string) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(str(m, "reconciliation.method") == method, "the reconciliation records method %q: %v", str(m, "reconciliation.method"), m["reconciliation"]); err != nil {
			return err
		}
		if what == "the actor" {
			return w.Assert(str(m, "reconciliation.actor") == "dave (ops on call)", "the human reconciliation does not name its actor: %v", m["reconciliation"])
		}
		want := ""
		if e := effects(w, s.mail); len(e) == 1 {
			want = e[0].MessageID
		}
		return w.Assert(want != "" && str(m, "reconciliation.evidence.message_id") == want, "the reconciliation evidence names message %q, the destination has %q", str(m, "reconciliation.evidence.message_id"), want)
	})
	c.Then(`^the audit trail of the operation shows the draft "([^"]*)" when it was claimed$`, func(ctx context.Context, state string) error {
		s, w := st(ctx), steps.From(ctx)
		recs, _, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		claims := events(recs, "claimed")
		return w.Assert(len(claims) == 1 && str(claims[0], "resource_state") == state, "the claim record does not show the draft %s: %v", state, claims)
	})
	c.Then(`^the audit trail of the operation records the claim before the outcome$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		recs, _, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		var order []string
		for _, r := range recs {
			if e := str(r, "event"); e == "claimed" || e == "outcome" {
				order = append(order, e)
			}
		}
		return w.Assert(slices.Equal(order, []string{"claimed", "outcome"}), "the operation's claim and outcome records come as %v", order)
	})
	c.Then(`^the audit trail of the operation records no claim$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		id := s.opID
		if id == "" {
			id = str(s.prop, "operation_id")
		}
		recs, _, err := s.auditOf(ctx, id)
		if err != nil {
			return err
		}
		return w.Assert(len(recs) > 0 && len(events(recs, "claimed")) == 0, "a claim that was never persisted is in the audit trail: %v", recs)
	})
	c.Then(`^the audit trail of the operation, read by the operator, satisfies the schema "([^"]*)"$`, func(ctx context.Context, schema string) error {
		s, w := st(ctx), steps.From(ctx)
		recs, r, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		s.audit = recs
		if err := w.ExpectSchema(schema, r.Body); err != nil {
			return err
		}
		return w.Assert(len(recs) >= 5, "the operation's audit trail has only %d records", len(recs))
	})
	c.Then(`^the operation's audit trail holds one retry record for each attempt the operation made after the first, numbered from 2, and its claim record says attempt 1$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(steps.Text(m["attempt"]))
		if err := w.Assert(err == nil && n >= 1, "the operation says it made %v attempt(s)", m["attempt"]); err != nil {
			return err
		}
		// The attempts the operation reports are the ones the destination
		// was asked for: the count the audit is held to is the wire's.
		w.Observe(nil)
		if err := w.Assert(len(s.mail.sends()) == n, "the destination was sent %d request(s), the operation says it made %d attempt(s)", len(s.mail.sends()), n); err != nil {
			return err
		}
		recs, r, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		if err := w.ExpectSchema("agl/audit-page.json", r.Body); err != nil {
			return err
		}
		claims := events(recs, "claimed")
		if err := w.Assert(len(claims) == 1 && steps.Text(claims[0]["attempt"]) == "1", "want one claim record with attempt 1: %v", claims); err != nil {
			return err
		}
		var got []string
		for _, rec := range events(recs, "retry") {
			got = append(got, steps.Text(rec["attempt"]))
		}
		var want []string
		for k := 2; k <= n; k++ {
			want = append(want, strconv.Itoa(k))
		}
		w.Note("the operation made %d attempt(s); retry records carry attempts %v", n, got)
		return w.Assert(slices.Equal(got, want), "the operation made %d attempt(s), so its trail should hold retry records with attempts %v in order; it holds %v", n, want, got)
	})
	c.Then(`^it names the execution id, the operation id, the principal and the proposal digest in every record$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if len(s.props) == 0 || len(s.audit) == 0 {
			return steps.Fault("the audit records were checked before a proposal and a read of the trail")
		}
		digest := str(s.props[0], "digest")
		for _, r := range s.audit {
			if err := w.Assert(str(r, "execution_id") == s.exec && str(r, "operation_id") == s.opID && str(r, "principal") == s.me.principal &&
				str(r, "proposal_digest") == digest, "audit record %s lacks the execution, operation, principal or digest: %v", str(r, "event"), r); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^its claim record names the contract fingerprint, the host's policy fingerprint, the draft revision, the approver and the decision time, the claim time and attempt 1$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		claims := events(s.audit, "claimed")
		if err := w.Assert(len(claims) == 1, "want one claim record, got %d", len(claims)); err != nil {
			return err
		}
		c := claims[0]
		_, info, err := s.read(ctx, api+"/", roleNone)
		if err != nil {
			return err
		}
		_, reg, err := s.read(ctx, api+"/contracts/"+s.sendOp, roleNone)
		if err != nil {
			return err
		}
		checks := map[string]string{
			"contract_fingerprint": str(reg, "contract_fingerprint"), "policy_fingerprint": str(info, "policy_fingerprint"),
			"resource_id": s.draftID, "decision_actor": "carol", "permit_id": s.permitID,
		}
		for k, want := range checks {
			if err := w.Assert(want != "" && str(c, k) == want, "the claim record's %s is %q, want %q", k, str(c, k), want); err != nil {
				return err
			}
		}
		if err := w.Assert(steps.Text(c["resource_revision"]) == "1" && steps.Text(c["attempt"]) == "1", "the claim record's revision/attempt: %v", c); err != nil {
			return err
		}
		_, e1 := time.Parse(time.RFC3339Nano, str(c, "decision_at"))
		_, e2 := time.Parse(time.RFC3339Nano, str(c, "claim"))
		return w.Assert(e1 == nil && e2 == nil, "the claim record's decision time or claim time is not a time: %v", c)
	})
	c.Then(`^its (outcome|reconciliation) record names outcome "([^"]*)"( and the reconciliation method)?$`, func(ctx context.Context, which, outcome, method string) error {
		s, w := st(ctx), steps.From(ctx)
		ev := map[string]string{"outcome": "outcome", "reconciliation": "reconciled"}[which]
		recs := events(s.audit, ev)
		if err := w.Assert(len(recs) == 1 && str(recs[0], "outcome") == outcome, "want one %s record with outcome %s: %v", ev, outcome, recs); err != nil {
			return err
		}
		if method != "" {
			return w.Assert(str(recs[0], "reconciliation.method") != "", "the reconciliation record names no method: %v", recs[0])
		}
		return nil
	})
	c.Then(`^the whole audit trail contains neither the grant tokens, the permit token, the role keys, nor their SHA-256 digests$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		_, r, err := s.auditOf(ctx, "")
		if err != nil {
			return err
		}
		if s.permitID == "" || s.permitToken == "" || s.me.grantToken == "" {
			return steps.Fault("the audit trail was searched before the scenario held a grant and a permit")
		}
		body := string(r.Body)
		// The search is decisive only through a trail shown to hold this
		// scenario's records: it must name the permit and the grant.
		if err := w.Assert(strings.Contains(body, s.permitID) && strings.Contains(body, s.me.grantID),
			"the audit trail does not name permit %s and grant %s, so a search of it for their secrets would prove nothing: %s", s.permitID, s.me.grantID, r); err != nil {
			return err
		}
		secrets := []string{s.me.grantToken, s.permitToken, s.keys.operator, s.keys.authority, s.keys.resolver}
		if s.helper != nil {
			secrets = append(secrets, s.helper.grantToken)
		}
		for _, sec := range secrets {
			if sec == "" {
				continue
			}
			sum := sha256.Sum256([]byte(sec))
			for _, form := range []string{sec, hex.EncodeToString(sum[:]), strings.ToUpper(hex.EncodeToString(sum[:]))} {
				if err := w.Assert(!strings.Contains(body, form), "the audit trail contains a secret or its digest (%s…)", form[:8]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	c.Then(`^the audit trail names the permit and the grant by their public ids$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		_, r, err := s.auditOf(ctx, "")
		if err != nil {
			return err
		}
		return w.Assert(strings.Contains(string(r.Body), s.permitID) && strings.Contains(string(r.Body), s.me.grantID), "the audit trail does not name permit %s and grant %s", s.permitID, s.me.grantID)
	})

	// Snapshots and canonical encoding.
	c.Then(`^the snapshot the approver is shown has (.+)$`, func(ctx context.Context, list string) error {
		s, w := st(ctx), steps.From(ctx)
		_, m, err := s.read(ctx, api+"/approval-requests/"+s.requestID, roleNone)
		if err != nil {
			return err
		}
		args, _ := steps.Lookup(m, "proposal.snapshot.arguments")
		// An email snapshot carries the draft's resolved payload.
		if p, ok := steps.Lookup(args, "draft.payload"); ok {
			args = p
		}
		for _, kv := range pairRE.FindAllStringSubmatch(list, -1) {
			got, ok := steps.Lookup(args, kv[1])
			if err := w.Assert(ok && steps.Text(got) == kv[2], "the approver is shown %s = %s, want %s", kv[1], steps.Text(got), kv[2]); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the proposal names canonical encoding version "([^"]*)"$`, func(ctx context.Context, v string) error {
		s, w := st(ctx), steps.From(ctx)
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/proposal.json", r.Body); err != nil {
			return err
		}
		return w.Assert(str(s.prop, "canon_version") == v && str(s.prop, "snapshot.canon_version") == v, "the proposal names canon version %q", str(s.prop, "canon_version"))
	})
	c.Then(`^the proposal's canonical encoding is the suite's own agl-canon/1 encoding of its snapshot$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		snap, _ := steps.Lookup(s.prop, "snapshot")
		mine, err := canonicalize(snap)
		if err != nil {
			return err
		}
		return w.Assert(string(mine) == str(s.prop, "canonical_encoding"), "the host's canonical encoding\n%s\ndiffers from the suite's\n%s", str(s.prop, "canonical_encoding"), mine)
	})
	c.Then(`^the proposal's digest is the SHA-256 of its canonical encoding$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		sum := sha256.Sum256([]byte(str(s.prop, "canonical_encoding")))
		return w.Assert(str(s.prop, "digest") == "sha256:"+hex.EncodeToString(sum[:]), "the digest %q is not the SHA-256 of the canonical encoding", str(s.prop, "digest"))
	})
	c.Then(`^the two proposals have the same digest$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.Assert(len(s.props) == 2, "want two proposals, have %d: %v", len(s.props), w.Last()); err != nil {
			return err
		}
		a, b := str(s.props[0], "digest"), str(s.props[1], "digest")
		return w.Assert(a != "" && a == b && str(s.props[0], "operation_id") != str(s.props[1], "operation_id"), "equal actions got digests %s and %s", a, b)
	})
	c.Then(`^its digest differs from the first proposal's$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		n := len(s.props)
		return w.Assert(n == 3 && str(s.props[n-1], "digest") != str(s.props[0], "digest"), "a different amount got the same digest (or was refused): %v", w.Last())
	})
}

var pairRE = regexp.MustCompile(`(\w+) "([^"]*)"`)

func mapGet(v any, k string) any {
	m, _ := v.(map[string]any)
	return m[k]
}

// call2 reads from the second host, unrecorded.
func (s *state) call2(ctx context.Context, path string) (*steps.Response, map[string]any, error) {
	r, err := s.call(ctx, true, http.MethodGet, path, roleNone, nil, false)
	if err != nil {
		return nil, nil, err
	}
	m, err := r.JSON()
	return r, m, err
}

// aglStoreLease is how long the hosts of fixture agl-store presume a silent
// host crashed (claim_lease_ms; the scenario's Given step checks it).
const aglStoreLease = 1000 * time.Millisecond

// recoverNow asks the host for a recovery sweep through its seam, where it
// has one (the sweep must answer 200), and reports whether the seam ran:
// the recovery has decided then, and one read of the operation judges it.
//
// It asks at once first: a host may know that the instance holding the
// claim has stopped without waiting out its lease (the binding: a host
// started again on the store finds the claims an earlier instance left),
// and a claim its sweep settled is no longer Claimed. A claim still Claimed
// after that sweep waits out the crashed instance's lease (fixture
// agl-store's, from now, so at least that long after the crash), and the
// host is asked again. Without the seam it only waits out the lease: the
// caller reads until the host's own sweep has changed the record.
func (s *state) recoverNow(ctx context.Context) (bool, error) {
	present, err := s.recoverSeam(ctx, "the host's")
	if err != nil {
		return false, err
	}
	if present {
		r, m, err := s.read(ctx, api+"/operations/"+s.opID, roleNone)
		if err != nil {
			return false, err
		}
		if r.Status == http.StatusOK && str(m, "state") != "" && str(m, "state") != "Claimed" {
			return true, nil
		}
	}
	if err := leaseLapse(ctx); err != nil {
		return false, err
	}
	if !present {
		return false, nil
	}
	return s.recoverSeam(ctx, "the host's")
}

// recoverSeam calls POST recover on the scenario's host (whose names it
// for the failure); absent, it reports false and no error.
func (s *state) recoverSeam(ctx context.Context, whose string) (bool, error) {
	w := steps.From(ctx)
	r, present, err := w.OptionalSeam(ctx, http.MethodPost, seamPath+"/recover", []byte("{}"), http.Header{"Content-Type": {"application/json"}})
	if err != nil || !present {
		return false, err
	}
	return true, w.Assert(r.Status == http.StatusOK, "%s recovery seam did not run a sweep: %s", whose, r)
}

// leaseLapse waits out fixture agl-store's lease and 100 ms, in real time
// (a lower bound: load only makes it longer).
func leaseLapse(ctx context.Context) error {
	select {
	case <-time.After(aglStoreLease + 100*time.Millisecond):
		return nil
	case <-ctx.Done():
		return steps.Fault("the run was interrupted while the crashed host's lease lapsed: %v", ctx.Err())
	}
}

// awaitRecovered reads the operation at the second host until its recovery
// has run on the crashed claim, with no wall-clock bound a busy machine can
// break. It first waits for the crashed host to stop answering (the halt
// has happened then, and with it the host's last heartbeat), then asks the
// second host for a recovery sweep (POST recover); a claim that sweep left
// Claimed waits out the lease in real time (a lower bound: load only makes
// it longer) and the host is asked again. Once a sweep ran (200) the
// operation is read once more and judged. A host without the recover seam
// is read, after the lease, until its own sweep changes the record; if 80
// reads see no change the scenario is blocked, not failed: without the seam
// parley cannot tell a slow sweep from none.
func (s *state) awaitRecovered(ctx context.Context, want string) (map[string]any, error) {
	w := steps.From(ctx)
	read := func() (map[string]any, error) {
		_, m, err := s.call2(ctx, api+"/operations/"+s.opID)
		return m, err
	}
	m, err := read()
	if err != nil || str(m, "state") == want {
		return m, err
	}
	if s.crasher == nil {
		return nil, steps.Fault("no host of the scenario's own was crashed")
	}
	// The crashed host stops answering once it has halted.
	dead := steps.Await(ctx, steps.Poll{What: "the first host stopped answering", Every: 50 * time.Millisecond, Rounds: 200}, func() (bool, string, error) {
		r, err := w.Exchange(ctx, s.crasher.HTTP, http.MethodGet, seamPath+"/instance", nil, nil)
		return err != nil || noBindingAnswer(r), "", nil
	})
	if dead != nil {
		return nil, steps.Block(verdict.CauseTarget, "the first host still answers after its dispatch went unanswered: the crash its fault seam was told to cause did not happen while parley watched (%v)", dead)
	}
	// Asked at once, a host that knows the first host stopped settles the
	// claim now; a claim its sweep left Claimed waits out the first host's
	// lease, and the host is asked again.
	present, err := s.recoverSeam(ctx, "the second host's")
	if err != nil {
		return nil, err
	}
	if present {
		if m, err = read(); err != nil {
			return nil, err
		}
		if str(m, "state") == "Claimed" {
			if err := leaseLapse(ctx); err != nil {
				return nil, err
			}
			if _, err := s.recoverSeam(ctx, "the second host's"); err != nil {
				return nil, err
			}
			if m, err = read(); err != nil {
				return nil, err
			}
		}
		return m, w.Assert(str(m, "state") == want, "the first host stopped answering and the second host's recovery seam (POST %s/recover) answered that its sweep had decided (asked again after the first host's %s lease had lapsed, when the claim was still Claimed), yet it reports the operation %q, want %q",
			seamPath, aglStoreLease, str(m, "state"), want)
	}
	if err := leaseLapse(ctx); err != nil {
		return nil, err
	}
	var readErr error
	late := steps.Await(ctx, steps.Poll{What: "the operation did not reach " + want, Every: 100 * time.Millisecond, Rounds: 80}, func() (bool, string, error) {
		var err error
		if m, err = read(); err != nil {
			readErr = err
			return false, "", err
		}
		return str(m, "state") == want, str(m, "state"), nil
	})
	if readErr != nil {
		return nil, readErr
	}
	if late != nil && str(m, "state") == "Claimed" {
		return nil, steps.Block(verdict.CauseSeamAbsent, "the second host has no recovery seam POST %s/recover (docs/agl-binding.md) and its own sweep had not touched the crashed claim after 80 reads; without the seam a slow sweep cannot be told from none", seamPath)
	}
	return m, w.Assert(str(m, "state") == want, "after the crash the second host reports the operation %q, want %q", str(m, "state"), want)
}
