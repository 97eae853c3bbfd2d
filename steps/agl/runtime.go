package agl

// Steps for the rest of the AGL runtime (sections 5 to 12 of the proposal):
// timeouts, the legacy entry point, handler context and identity, party
// binding, audit storage, retries under changed authority, admission and
// budget scopes, cancellation, parallel map and race, retention, and
// recovery across a restart.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
)

func registerRuntime(c *steps.Catalog) {
	c.Given(`^the host gives a handler (\d+) ms to answer$`, func(ctx context.Context, ms int) error {
		return st(ctx).edit(ctx, func(sec map[string]any) { sec["handler_timeout_ms"] = ms })
	})

	// The legacy entry point (spec sections 7 and 10).
	c.When(`^the caller asks the legacy entry point to run "([^"]*)"$`, func(ctx context.Context, tool string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		var args map[string]any
		switch tool {
		case "legacy.echo":
			args = map[string]any{"text": random("echo-")}
		case sendOp, "email.send/v1":
			args = map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": "Sent around the dispatcher."}
		default:
			args = s.transferArgs(1500, "DE89370400440532013000")
		}
		s.legacyArgs = args
		_, err := s.do(ctx, http.MethodPost, api+"/legacy/invoke", roleNone, map[string]any{"tool": tool, "arguments": args})
		return err
	})
	c.Then(`^the legacy entry point answered with the arguments it was given$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.ExpectStatus(http.StatusOK); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/legacy-invoke-result.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		want, _ := decodeJSON(mustJSON(s.legacyArgs))
		return w.Assert(reflect.DeepEqual(m["result"], want), "the legacy tool answered %v, it was given %v", m["result"], want)
	})
	// Handler context and identity (spec 2, 7 step 8, 8).
	c.Then(`^the (destination|ledger) received exactly one message naming the operation, (the principal's|the helper's) grant and the permit$`, func(ctx context.Context, which, whose string) error {
		s, w := st(ctx), steps.From(ctx)
		d := s.mail
		if which == "ledger" {
			d = s.ledger
		}
		if err := s.expectMessages(ctx, d, which, 1); err != nil {
			return err
		}
		grant := s.me.grantID
		if whose == "the helper's" {
			if s.helper == nil {
				return steps.Fault("no helper")
			}
			grant = s.helper.grantID
		}
		e := effects(w, d)[0]
		return s.expectContext(w, e.Body, e.Key, grant, 1)
	})
	c.Then(`^every send the destination was asked for names the operation, the principal's grant and the permit, with attempts counting up from 1$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		w.Observe(nil)
		var sends []fakemail.Request
		for _, r := range s.mail.fake.Requests() {
			if r.Path == "/send" {
				sends = append(sends, r)
			}
		}
		if err := w.Assert(len(sends) >= 2, "the destination was asked for %d send(s); the scenario needs a retried operation", len(sends)); err != nil {
			return err
		}
		for i, r := range sends {
			if err := s.expectContext(w, r.Body, r.Key, s.me.grantID, i+1); err != nil {
				return err
			}
		}
		return nil
	})
	c.When(`^the agent makes (\d+) approved (transfers of (\d+) to "([^"]*)"|sends of a draft to "([^"]*)") in the one execution, one after another$`, func(ctx context.Context, n int, what, amount, iban, to string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		s.results, s.calls = nil, nil
		for i := 0; i < n; i++ {
			var err error
			if iban != "" {
				if _, err = got(s.propose(ctx, transferOp, s.transferArgs(json.Number(amount), iban), s.grant())).want(preTransferProposed, 201); err == nil {
					err = s.approveProposal(ctx)
				}
			} else {
				err = s.approveSend(ctx, to)
			}
			if err != nil {
				return err
			}
			b, err := s.approvedBody()
			if err != nil {
				return err
			}
			r, err := s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, b, true)
			if err != nil {
				return err
			}
			s.results = append(s.results, r)
			m, _ := r.JSON()
			s.calls = append(s.calls, str(m, "operation_id"))
		}
		return nil
	})
	c.Then(`^the (destination|ledger) received (\d+) messages, each with the operation id its dispatch answered, no two alike$`, func(ctx context.Context, which string, n int) error {
		s, w := st(ctx), steps.From(ctx)
		for _, r := range s.results {
			m, _ := r.JSON()
			if err := w.Assert(r.Status == http.StatusOK && str(m, "state") == "Completed" && str(m, "operation_id") != "", "a dispatch of the execution did not complete: %s", r); err != nil {
				return err
			}
		}
		d := s.mail
		if which == "ledger" {
			d = s.ledger
		}
		e := effects(w, d)
		if err := w.Assert(len(e) == n && len(s.calls) == n, "the %s received %d message(s) for %d dispatch(es), want %d", which, len(e), len(s.calls), n); err != nil {
			return err
		}
		seen := map[string]bool{}
		for i, ef := range e {
			if err := w.Assert(ef.OperationID == s.calls[i] && ef.Key == s.calls[i] && !seen[ef.OperationID],
				"message %d carries operation %q (key %q), its dispatch answered %q; earlier messages: %v", i+1, ef.OperationID, ef.Key, s.calls[i], seen); err != nil {
				return err
			}
			seen[ef.OperationID] = true
		}
		return nil
	})
	c.Then(`^the host lists exactly those operations for the execution$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, m, err := s.read(ctx, api+"/operations?execution_id="+s.exec, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK, "listing the execution's operations: %s", r); err != nil {
			return err
		}
		if err := w.ExpectSchema("agl/operation-list.json", r.Body); err != nil {
			return err
		}
		list, _ := m["operations"].([]any)
		var ids []string
		for _, e := range list {
			op, _ := e.(map[string]any)
			ids = append(ids, str(op, "operation_id"))
		}
		want := append([]string(nil), s.calls...)
		slices.Sort(ids)
		slices.Sort(want)
		return w.Assert(slices.Equal(ids, want), "the host lists operations %v for the execution, its dispatches ran %v", ids, want)
	})

	// Two resources in one workflow (spec 5.1).
	c.Setup(preDraft, `^the principal drafts two emails, "([^"]*)" and "([^"]*)"$`, func(ctx context.Context, a, b string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		s.drafts = map[string][2]string{}
		for _, name := range []string{a, b} {
			if err := s.createDraft(ctx, s.me.mailbox, "bob@example.com"); err != nil {
				return err
			}
			s.drafts[name] = [2]string{s.draftID, s.latestHandle}
		}
		return nil
	})
	c.When(`^the agent proposes sending the "([^"]*)" draft$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		if err := s.useDraft(name); err != nil {
			return err
		}
		_, err := s.propose(ctx, sendOp, map[string]any{"draft": s.latestHandle}, s.grant())
		return err
	})
	c.When(`^the principal edits the "([^"]*)" draft$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		if err := s.useDraft(name); err != nil {
			return err
		}
		_, err := s.editDraft(ctx)
		return err
	})
	c.Then(`^the "([^"]*)" draft is "([^"]*)" and the "([^"]*)" draft is "([^"]*)"(?: at revision (\d+))?$`, func(ctx context.Context, a, sa, b, sb, rev string) error {
		s, w := st(ctx), steps.From(ctx)
		for _, x := range []struct{ name, state, rev string }{{a, sa, ""}, {b, sb, rev}} {
			d, ok := s.drafts[x.name]
			if !ok {
				return steps.Fault("no draft named %q", x.name)
			}
			r, m, err := s.read(ctx, api+"/resources/"+d[0], roleNone)
			if err != nil {
				return err
			}
			if err := w.Assert(r.Status == http.StatusOK && str(m, "resource_id") == d[0] && str(m, "state") == x.state,
				"the %q draft is %q, want %q: %s", x.name, str(m, "state"), x.state, r); err != nil {
				return err
			}
			if x.rev != "" {
				if err := w.Assert(steps.Text(m["revision"]) == x.rev, "the %q draft is at revision %v, want %s", x.name, m["revision"], x.rev); err != nil {
					return err
				}
			}
		}
		return nil
	})

	// Permits bind their parties (spec 6.1).
	c.When(`^the approved transfer is dispatched with its permit (by the helper's agent under the delegated grant|in another execution of the principal)$`, func(ctx context.Context, how string) error {
		s := st(ctx)
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		if how == "in another execution of the principal" {
			b["execution_id"] = s.exec + "-other"
		} else {
			if s.helper == nil || s.helper.grantToken == "" {
				return steps.Fault("no delegated grant")
			}
			b["principal"], b["agent_id"], b["grant_token"] = s.helper.principal, s.helper.agent, s.helper.grantToken
		}
		return s.dispatch(ctx, false, b)
	})

	c.Then(`^no request reached the destination or the ledger$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		w.Observe(nil)
		a, b := s.mail.fake.Requests(), s.ledger.fake.Requests()
		return w.Assert(len(a) == 0 && len(b) == 0, "the destination received %d request(s) and the ledger %d: %v %v", len(a), len(b), a, b)
	})
}

// expectContext checks a message a handler sent: it satisfies the
// destination-message schema, names the operation the dispatch ran (in its
// body and as its idempotency key), and carries the context the handler ran
// with: execution, principal, agent, grant, permit and attempt.
func (s *state) expectContext(w *steps.World, body []byte, key, grant string, attempt int) error {
	if err := w.ExpectSchema("agl/destination-message.json", body); err != nil {
		return err
	}
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	m, _ := v.(map[string]any)
	want := map[string]string{
		"operation_id": s.opID, "context.execution_id": s.exec, "context.grant_id": grant,
		"context.permit_id": s.permitID, "context.attempt": fmt.Sprint(attempt),
	}
	if err := w.Assert(s.opID != "" && key == s.opID, "the message's idempotency key is %q, the operation is %q", key, s.opID); err != nil {
		return err
	}
	for _, k := range []string{"operation_id", "context.execution_id", "context.grant_id", "context.permit_id", "context.attempt"} {
		got, _ := steps.Lookup(m, k)
		if err := w.Assert(want[k] != "" && steps.Text(got) == want[k], "the message's %s is %s, want %q: %s", k, steps.Text(got), want[k], clip(string(body))); err != nil {
			return err
		}
	}
	return nil
}

// useDraft makes a named draft the one later steps act on.
func (s *state) useDraft(name string) error {
	d, ok := s.drafts[name]
	if !ok {
		return steps.Fault("no draft named %q", name)
	}
	s.draftID, s.latestHandle = d[0], d[1]
	return nil
}

// mustJSON encodes a value the suite built itself.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the suite's own values always encode
	}
	return b
}
