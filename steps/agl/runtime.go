package agl

// Steps for the rest of the AGL runtime (sections 5 to 12 of the proposal):
// timeouts, the legacy entry point, handler context and identity, party
// binding, audit storage, retries under changed authority, admission and
// budget scopes, cancellation, parallel map and race, retention, and
// recovery across a restart.

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
)

func registerRuntime(c *steps.Catalog) {
	registerAdmission(c)
	c.Given(`^the host gives a handler (\d+) ms to answer$`, func(ctx context.Context, ms int) error {
		// A deadline of the scenario's own: its contracts declare it
		// (scheduling_contract.timeout_ms), so the hosts other scenarios
		// share keep theirs.
		s := st(ctx)
		if s.ready {
			return steps.Fault("the contracts are already registered")
		}
		s.handlerTimeout = ms
		return nil
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
		case "mail.send_email", "email.send/v1":
			args = map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": "Sent around the dispatcher."}
		default:
			args = s.transferArgs(1500, "DE89370400440532013000")
		}
		s.legacyArgs = args
		if tool != "legacy.echo" {
			tool = s.opName(tool) // a protected handler: an implementation or the scenario's own contract
		}
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
		// One attempt or several: section 8 permits a retry, never requires one.
		if err := w.Assert(len(sends) >= 1, "the destination was asked for no send at all"); err != nil {
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
				if _, err = got(s.propose(ctx, s.transferOp, s.transferArgs(json.Number(amount), iban), s.grant())).want(preTransferProposed, 201); err == nil {
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
		if err := okAnswer(w, r, "agl/operation-list.json", "listing the execution's operations"); err != nil {
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
		_, err := s.propose(ctx, s.sendOp, map[string]any{"draft": s.latestHandle}, s.grant())
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

	// Audit storage (spec 12).
	c.Then(`^the audit trail of the operation names its snapshot by the proposal digest, and that proposal holds the arguments$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.operationNeeded(ctx); err != nil {
			return err
		}
		recs, _, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		claims := events(recs, "claimed")
		if err := w.Assert(len(recs) > 0 && len(claims) == 1, "the operation's audit trail has %d record(s), %d of them claims", len(recs), len(claims)); err != nil {
			return err
		}
		ref, digest := str(claims[0], "proposal_id"), str(claims[0], "proposal_digest")
		r, p, err := s.read(ctx, api+"/proposals/"+ref, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK && digest != "" && str(p, "digest") == digest, "the claim record names proposal %q with digest %q; reading it: %s", ref, digest, r); err != nil {
			return err
		}
		args, _ := steps.Lookup(p, "snapshot.arguments")
		s.sensitive = sensitiveValues(args)
		return w.Assert(len(s.sensitive) > 0, "the proposal the audit trail names holds none of the action's arguments: %s", r)
	})
	c.Then(`^no audit record of the operation holds the recipient, amount, subject or body inline$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if len(s.sensitive) == 0 {
			return steps.Fault("the sensitive values were not read from the proposal first")
		}
		recs, _, err := s.auditOf(ctx, s.opID)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if path, v, found := holdsInline(rec, s.sensitive); found {
				return w.Assert(false, "audit record %s holds %q inline at %s: %v", str(rec, "event"), v, path, rec)
			}
		}
		return w.Assert(len(recs) > 0, "the operation has no audit records")
	})
	c.Then(`^the audit trail holds no unkeyed digest of the recipient, amount, subject or body$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if len(s.sensitive) == 0 {
			return steps.Fault("the sensitive values were not read from the proposal first")
		}
		_, r, err := s.auditOf(ctx, "")
		if err != nil {
			return err
		}
		body := strings.ToLower(string(r.Body))
		if err := w.Assert(strings.Contains(body, strings.ToLower(s.opID)), "the audit trail does not name operation %s, so a search of it would prove nothing", s.opID); err != nil {
			return err
		}
		for _, v := range s.sensitive {
			for _, d := range unkeyedDigests(v) {
				if err := w.Assert(!strings.Contains(body, d.text), "the audit trail holds the unkeyed %s of %s, which anyone can recover by hashing guesses", d.how, steps.Text(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})

	// Retries (spec 8).
	c.When(`^the first attempt has reached the destination$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		// While the dispatch is in flight the host may yet send; once it
		// answered, 500 reads 10 ms apart (5 s idle).
		err := steps.Await(ctx, steps.Poll{What: "the dispatch started, and the destination had not been sent anything", Every: 10 * time.Millisecond, Rounds: 500,
			InFlight: func() bool { return s.inflight.Load() > 0 }},
			func() (bool, string, error) { return len(s.mail.sends()) > 0, "", nil })
		w.Observe(nil)
		return err
	})

	// Retention (spec 8).
	c.Given(`^the host keeps records no longer needed for (\d+) hours?$`, func(ctx context.Context, h int) error {
		// Every AGL fixture keeps such records an hour (retention_ms).
		if h != 1 {
			return steps.Fault("the AGL fixtures keep records no longer needed for 1 hour; the scenario asks for %d", h)
		}
		return nil
	})
	c.Setup(preScopedGrant, `^the principal's grant lasts (\d+) days$`, func(ctx context.Context, days int) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		r, err := s.do(ctx, http.MethodPost, api+"/grants", roleAuthority, s.grantBody(s.me.principal, []string{s.sendOp, s.transferOp},
			[]string{s.me.mailbox}, []string{s.me.account}, map[string]any{"ttl_seconds": days * 86400}))
		m, err := got(r, err).want(preScopedGrant, 201)
		if err != nil {
			return err
		}
		if s.grantOverride = str(m, "grant_token"); s.grantOverride == "" {
			return steps.Precondition(preScopedGrant, steps.Fail("the long grant carries no grant_token: %s", r))
		}
		steps.From(ctx).Secret(s.grantOverride)
		return nil
	})
	c.Setup(preApproved, `^the principal holds a spare approved send whose permit expires in (\d+) seconds$`, func(ctx context.Context, ttl int) error {
		s := st(ctx)
		s.permitTTL = ttl
		if err := s.approveSend(ctx, "spare@example.com"); err != nil {
			return err
		}
		s.sparePermit = s.permitID
		return nil
	})
	c.Given(`^the suite moves the host's clock instead of waiting, where the host offers the clock seam$`, func(ctx context.Context) error {
		// The fixture asks for seams; a host without the clock seam answers
		// 404 there and the suite waits in real time (World.PassTime), so it
		// is certified either way, never blocked.
		cfg, err := steps.From(ctx).FixtureConfig()
		if err != nil {
			return err
		}
		if !cfg.Seams() {
			return steps.Fault("the scenario moves the host's clock through its seam, and its fixture %s has seams off", cfg.Fixture())
		}
		// Reading the clock says whether the host has the seam, for the
		// steps whose lifetimes depend on it; it changes nothing.
		s, w := st(ctx), steps.From(ctx)
		r, ok, err := w.OptionalSeam(ctx, http.MethodGet, seamPath+"/clock", nil, nil)
		if err != nil {
			return err
		}
		if s.clockSeam = ok; ok {
			return okAnswer(w, r, "agl/seam-clock.json", "the clock seam answered")
		}
		return nil
	})
	c.When(`^the host's clock moves (\d+) hours ahead$`, func(ctx context.Context, h int) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		r, err := w.Seam(ctx, http.MethodPost, seamPath+"/clock", mustJSON(map[string]any{"advance_ms": h * 3600 * 1000}), http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return err
		}
		return okAnswer(w, r, "agl/seam-clock.json", "the clock seam answered")
	})
	c.When(`^the host's retention sweep runs$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, err := w.Seam(ctx, http.MethodPost, seamPath+"/retention", nil, nil)
		if err != nil {
			return err
		}
		if err := okAnswer(w, r, "agl/seam-retention.json", "the retention seam answered"); err != nil {
			return err
		}
		s.sweep, _ = r.JSON()
		return nil
	})
	// Section 8 asks retention to keep pending intents and tombstones; it
	// never asks a sweep to delete anything. An expired permit may be kept
	// or removed; kept, it must still be unused (no dispatch ran under it),
	// and the sweep must have answered (the positive read of its report).
	c.Then(`^the sweep kept or removed the spare permit, which dispatched nothing$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if s.sparePermit == "" || s.sweep == nil {
			return steps.Fault("no spare permit, or no sweep ran")
		}
		r, err := s.call(ctx, false, http.MethodGet, api+"/permits/"+s.sparePermit, roleNone, nil, false)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK || r.Status == http.StatusNotFound, "reading the spare permit after the sweep: %s, want 200 (kept) or 404 (removed)", r); err != nil {
			return err
		}
		if r.Status == http.StatusNotFound {
			return nil
		}
		m, err := r.JSON()
		if err != nil {
			return err
		}
		return w.Assert(m["consumed_by_operation"] == nil && m["consumed_at"] == nil,
			"the spare permit, never dispatched by the suite and expired long before the sweep, reads as consumed: %v", m)
	})
	c.Then(`^the dispatch ran the operation the proposal named$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, _ := w.LastResponse()
		m, err := r.JSON()
		if err != nil {
			return err
		}
		want := str(s.prop, "operation_id")
		return w.Assert(want != "" && str(m, "operation_id") == want, "the dispatch ran operation %q, the proposal named %q", str(m, "operation_id"), want)
	})

	// Recovery across a restart (spec 8).
	c.Given(`^the destination will accept the next message$`, func(ctx context.Context) error {
		if st(ctx).mail == nil {
			return steps.Fault("describe the AGL host before its destination")
		}
		return nil // no fault: the destination takes it and answers its receipt
	})
	c.When(`^the suite notes what the destination has been asked so far$`, func(ctx context.Context) error {
		s := st(ctx)
		s.asked = len(s.mail.fake.Requests())
		return nil
	})
	c.Then(`^the destination has been asked nothing since$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		w.Observe(nil)
		reqs := s.mail.fake.Requests()
		return w.Assert(len(reqs) == s.asked, "the destination was asked %d more time(s): %v", len(reqs)-s.asked, reqs[min(s.asked, len(reqs)):])
	})
	c.Then(`^the host soon reports the operation "([^"]*)"$`, func(ctx context.Context, state string) error {
		s, w := st(ctx), steps.From(ctx)
		if err := s.operationNeeded(ctx); err != nil {
			return err
		}
		// Every use follows a crash and restart: let the crashed instance's
		// lease lapse (real time, a lower bound: load only lengthens it)
		// and ask the host to recover now (POST recover, which answers
		// once the recovery it started has decided), so that a busy
		// machine's late recovery tick is not taken for none. A host
		// without the seam is read as before.
		decided, err := s.recoverNow(ctx)
		if err != nil {
			return err
		}
		s.recoveryDecided = decided
		if decided {
			// The recover seam answers once every resumption in flight has
			// decided, its state and audit records written
			// (docs/agl-binding.md, seams): one read judges it.
			r, m, err := s.read(ctx, api+"/operations/"+s.opID, roleNone)
			if err != nil {
				return err
			}
			return w.Assert(r.Status == http.StatusOK && str(m, "state") == state,
				"the crashed instance has been silent for longer than its %s lease and the host's recovery seam (POST %s/recover) answered that recovery had decided, yet the host reports the operation %q, want %q: %s",
				aglStoreLease, seamPath, str(m, "state"), state, r)
		}
		// Without the seam, 80 reads 100 ms apart without a change in the
		// record (8 s idle; each read a round trip, so more on a busy
		// machine): the host's own sweep decides in its own time.
		var m map[string]any
		var readErr error
		_ = steps.Await(ctx, steps.Poll{What: "the operation did not reach " + state, Every: 100 * time.Millisecond, Rounds: 80}, func() (bool, string, error) {
			r, mm, err := s.read(ctx, api+"/operations/"+s.opID, roleNone)
			if err != nil {
				readErr = err
				return false, "", err
			}
			m = mm
			return r.Status == http.StatusOK && str(m, "state") == state, fmt.Sprint(r.Status, str(m, "state")), nil
		})
		if readErr != nil {
			return readErr
		}
		return w.Assert(str(m, "state") == state, "after it started again, and for 80 reads in which its state did not change, the host reports the operation %q, want %q: %v", str(m, "state"), state, m)
	})
	c.Then(`^the operation was settled by sending it again under its key$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		m, err := s.operation(ctx)
		if err != nil {
			return err
		}
		return w.Assert(str(m, "reconciliation.method") == "idempotent_retry" && str(m, "reconciliation.resolution") == "completed",
			"the operation's reconciliation is %v, want idempotent_retry, completed", m["reconciliation"])
	})
	c.Then(`^the audit trail of the operation soon says recovery stopped on "([^"]*)"$`, func(ctx context.Context, code string) error {
		s, w := st(ctx), steps.From(ctx)
		// Recovery decides after it declared the operation Unknown: after
		// the recovery seam answered it has decided, and one read judges
		// it; without the seam, give it the same 80 reads without a new
		// audit record.
		var stops []map[string]any
		var readErr error
		rounds := 80
		if s.recoveryDecided {
			rounds = 1
		}
		_ = steps.Await(ctx, steps.Poll{What: "recovery did not stop", Every: 100 * time.Millisecond, Rounds: rounds}, func() (bool, string, error) {
			recs, _, err := s.auditOf(ctx, s.opID)
			if err != nil {
				readErr = err
				return false, "", err
			}
			stops = events(recs, "recovery_stopped")
			return len(stops) > 0, fmt.Sprint(len(recs)), nil
		})
		if readErr != nil {
			return readErr
		}
		return w.Assert(len(stops) >= 1 && str(stops[0], "denial_code") == code, "the operation's recovery_stopped records are %v, want one naming %s", stops, code)
	})
	c.Then(`^the host lists exactly the operations the proposals named for the execution$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		r, m, err := s.read(ctx, api+"/operations?execution_id="+s.exec, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK, "listing the execution's operations: %s", r); err != nil {
			return err
		}
		list, _ := m["operations"].([]any)
		var ids, want []string
		for _, e := range list {
			op, _ := e.(map[string]any)
			ids = append(ids, str(op, "operation_id")+" "+str(op, "snapshot_digest"))
		}
		for _, p := range s.props {
			want = append(want, str(p, "operation_id")+" "+str(p, "digest"))
		}
		slices.Sort(ids)
		slices.Sort(want)
		return w.Assert(len(want) > 0 && slices.Equal(ids, want), "the host lists operations %v for the execution; its proposals named %v", ids, want)
	})

	c.Setup(preDraft, `^the principal drafts an email to "([^"]*)" copying "([^"]*)"$`, func(ctx context.Context, to, cc string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		body := s.draftBody(s.me.principal, s.me.mailbox, csv(to), "See attached.")
		if list := csv(cc); len(list) > 0 {
			body["payload"].(map[string]any)["cc"] = list
		}
		r, err := s.do(ctx, http.MethodPost, api+"/resources/email-drafts", roleNone, body)
		m, err := got(r, err).want(preDraft, 201)
		if err != nil {
			return err
		}
		s.draftID, s.latestHandle = str(m, "resource_id"), str(m, "handle")
		if s.draftID == "" || s.latestHandle == "" {
			return steps.Precondition(preDraft, steps.Fail("the draft carries no resource_id or handle: %s", r))
		}
		return nil
	})
	c.Then(`^the ledger received exactly one transfer$`, func(ctx context.Context) error {
		s := st(ctx)
		return s.expectMessages(ctx, s.ledger, "ledger", 1)
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

// sensitiveValues picks, from a snapshot's arguments, the values the
// binding counts as sensitive: an email's recipients, subject and body, a
// transfer's recipient and amount. Authority-selected resource ids (the
// mailbox, the account) and handle metadata may be named in the audit trail.
func sensitiveValues(args any) []any {
	var out []any
	if p, ok := steps.Lookup(args, "draft.payload"); ok {
		for _, k := range []string{"to", "cc"} {
			list, _ := steps.Lookup(p, k)
			l, _ := list.([]any)
			out = append(out, l...)
		}
		for _, k := range []string{"subject", "body"} {
			if v, ok := steps.Lookup(p, k); ok {
				out = append(out, v)
			}
		}
		return out
	}
	for _, k := range []string{"recipient", "amount"} {
		if v, ok := steps.Lookup(args, k); ok {
			out = append(out, v)
		}
	}
	return out
}

// holdsInline finds a sensitive value in a record: a string leaf that
// contains a sensitive string of six characters or more, or a leaf equal to
// a sensitive number (as a number or its decimal text). Numbers are not
// searched inside longer text, where timestamps would match them.
func holdsInline(v any, sensitive []any) (string, any, bool) {
	var walk func(v any, path string) (string, any, bool)
	walk = func(v any, path string) (string, any, bool) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if k == "seq" {
					continue // the trail's own counter
				}
				if p, x, ok := walk(e, path+"/"+k); ok {
					return p, x, ok
				}
			}
		case []any:
			for i, e := range t {
				if p, x, ok := walk(e, fmt.Sprintf("%s/%d", path, i)); ok {
					return p, x, ok
				}
			}
		default:
			leaf := steps.Text(t)
			for _, sv := range sensitive {
				want := steps.Text(sv)
				if _, isStr := sv.(string); isStr && len(want) >= 6 {
					if strings.Contains(strings.ToLower(leaf), strings.ToLower(want)) {
						return path, sv, true
					}
				} else if leaf == want {
					return path, sv, true
				}
			}
		}
		return "", nil, false
	}
	return walk(v, "")
}

type digestForm struct{ how, text string }

// unkeyedDigests lists the ways a host might digest a value without a key:
// SHA-256, SHA-512, SHA-1, MD5 and BLAKE3 of its raw text, its JSON text,
// its agl-canon/1 encoding (bare and as a document) and, for an address,
// its lower-case form; each in lower-case hex and in base64. The audit text
// is lower-cased before it is searched, so hex case does not matter.
func unkeyedDigests(v any) []digestForm {
	text := steps.Text(v)
	js, _ := json.Marshal(v)
	inputs := map[string]string{"text": text, "JSON": string(js), "lower-case text": strings.ToLower(text)}
	if enc, err := canonicalize(v); err == nil {
		inputs["agl-canon/1 document"] = string(enc)
		if inner := strings.TrimSuffix(strings.TrimPrefix(string(enc), `["agl-canon/1",`), "]"); inner != string(enc) {
			inputs["agl-canon/1 value"] = inner
		}
	}
	hashes := map[string]func([]byte) []byte{
		"SHA-256": func(b []byte) []byte { x := sha256.Sum256(b); return x[:] },
		"SHA-512": func(b []byte) []byte { x := sha512.Sum512(b); return x[:] },
		"SHA-1":   func(b []byte) []byte { x := sha1.Sum(b); return x[:] },
		"MD5":     func(b []byte) []byte { x := md5.Sum(b); return x[:] },
		"BLAKE3":  func(b []byte) []byte { x := blake3.Sum256(b); return x[:] },
	}
	var out []digestForm
	for in, raw := range inputs {
		for name, h := range hashes {
			sum := h([]byte(raw))
			how := name + " of its " + in
			out = append(out, digestForm{how, hex.EncodeToString(sum)},
				digestForm{how + " (base64)", strings.ToLower(base64.StdEncoding.EncodeToString(sum))},
				digestForm{how + " (base64url)", strings.ToLower(base64.RawURLEncoding.EncodeToString(sum))})
		}
	}
	return out
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
