package openwop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parley-conformance/parley/steps"
)

// What a durable host event promises a subscriber (RFC 0242 §B.2 gives the
// record delivery durable, after RFC 0236's host events): it is kept, so a
// subscriber that was not listening when it was recorded still receives it
// (a new subscription replays the tenant's records), a subscriber that
// reconnects naming the last eventId it had (Last-Event-ID) receives what
// came after and nothing it had, and both hold across a restart of the
// host. Every exchange these steps build on is an accepted one at the
// preferred version, and its record is first read on the tenant's live
// stream, so that its eventId and its bytes as first delivered are known.

func registerDurable(c *steps.Catalog) {
	c.Given(`^the scenario has the host to itself$`, func(ctx context.Context) error {
		// The scenario reads every tenant's stream: it has the host to
		// itself (@exclusive), on a deployed host too.
		return steps.From(ctx).Alone()
	})
	c.When(`^tenant "([^"]*)" makes (\d+) accepted inbound (A2A|MCP) exchanges?$`, func(ctx context.Context, tenant string, n int, protocol string) error {
		_, err := makeExchanges(ctx, tenant, n, protocol)
		return err
	})
	c.When(`^tenant "([^"]*)" resumes its host-event stream after the record of its exchange (\d+)$`, func(ctx context.Context, tenant string, k int) error {
		s := st(ctx)
		mine := s.madeBy(tenant)
		if k < 1 || k > len(mine) {
			return steps.Fault("tenant %q made %d exchanges to resume after; the scenario names exchange %d", tenant, len(mine), k)
		}
		ts, err := dialStream(ctx, tenant, mine[k-1].eventID)
		if err != nil {
			return err
		}
		s.setExtra(ts)
		return nil
	})
	c.Then(`^the resumed stream delivers every later record of tenant "([^"]*)" once, in order, and nothing of another tenant's$`, func(ctx context.Context, tenant string) error {
		return resumedDelivers(ctx, tenant)
	})
	c.When(`^tenant "([^"]*)" opens a new host-event stream without Last-Event-ID$`, func(ctx context.Context, tenant string) error {
		ts, err := dialStream(ctx, tenant, "")
		if err != nil {
			return steps.Precondition(preSubscribed, err)
		}
		st(ctx).setExtra(ts)
		return nil
	})
	c.Then(`^the new stream delivers each of those records as it was first delivered, before the record of an exchange made after it opened$`, func(ctx context.Context) error {
		return freshDelivers(ctx)
	})
	c.Setup(preReplay, `^tenant "([^"]*)"'s new host-event streams replay its earlier (A2A|MCP) records$`, func(ctx context.Context, tenant, protocol string) error {
		return replays(ctx, tenant, protocol)
	})
	c.Then(`^a new host-event stream of tenant "([^"]*)" delivers the records made before the restart, that exchange's among them$`, func(ctx context.Context, tenant string) error {
		return survived(ctx, tenant)
	})
	c.Then(`^no configured tenant's host-event stream delivers a record of an exchange that tenant did not make$`, func(ctx context.Context) error {
		return noStrangers(ctx)
	})
}

func (s *state) madeBy(tenant string) []*exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*exchange
	for _, x := range s.made {
		if x.tenant == tenant {
			out = append(out, x)
		}
	}
	return out
}

func (s *state) setExtra(ts *tenantStream) {
	s.mu.Lock()
	old := s.extra
	s.extra = ts
	s.mu.Unlock()
	if old != nil {
		old.s.Close()
	}
}

func (s *state) extraStream() (*tenantStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.extra == nil {
		return nil, steps.Fault("no stream was opened by a resume or new-subscription step")
	}
	return s.extra, nil
}

// makeExchanges makes n accepted exchanges as tenant, each under a fresh
// workspace, and reads each record on the tenant's live stream (opened
// before the first) to learn its eventId and its bytes. That the records
// arrive is what the barrier precondition states.
func makeExchanges(ctx context.Context, tenant string, n int, protocol string) ([]*exchange, error) {
	w, s := steps.From(ctx), st(ctx)
	if n < 1 {
		return nil, steps.Fault("an exchange count of %d", n)
	}
	if err := openStreams(ctx); err != nil {
		return nil, steps.Precondition(preSubscribed, err)
	}
	who, err := s.caller(tenant)
	if err != nil {
		return nil, err
	}
	pre := barrierPrecondition(protocol)
	var xs []*exchange
	for i := 0; i < n; i++ {
		x, err := inbound(ctx, who, protocol, formCard, s.preferred(protocol), nil, workspaceFor("made"))
		if err != nil {
			return nil, steps.Precondition(pre, err)
		}
		if err := w.Assert(!x.refused && x.version != "", "%s named the preferred %s version %q and was not accepted: %s", who, protocol, x.named, x.detail()); err != nil {
			return nil, steps.Precondition(pre, err)
		}
		xs = append(xs, x)
		s.setInbound(x)
	}
	ts, err := opened(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for i, x := range xs {
		r, ok, err := ts.find(w, recordWait, carrying(x.workspace))
		if err != nil {
			return nil, steps.Precondition(pre, err)
		}
		if err := w.Assert(ok, "within %s, tenant %q's host-event stream delivered no record of its accepted %s exchange %d of %d (workspace %s): %s",
			recordWait, tenant, protocol, i+1, n, x.workspace, missing(ts, protocol, x.named)); err != nil {
			return nil, steps.Precondition(pre, err)
		}
		if err := w.Assert(r.id() != "", "the record of an accepted %s exchange came with neither an eventId nor an SSE id, so no subscriber could resume after it: %s", protocol, r.text()); err != nil {
			return nil, steps.Precondition(pre, err)
		}
		x.eventID, x.data = r.id(), r.frame.Data
	}
	s.mu.Lock()
	s.made = append(s.made, xs...)
	s.mu.Unlock()
	return xs, nil
}

// settleBarrier makes an accepted exchange as tenant after a stream was
// opened, waits for its record on the tenant's live stream (the
// precondition that records arrive at all) and then on ts, the stream under
// test, and reads ts a little longer for stragglers. gotB reports whether
// ts delivered it.
func settleBarrier(ctx context.Context, ts *tenantStream, protocol string) (ws string, gotB bool, err error) {
	w := steps.From(ctx)
	if err := openStreams(ctx); err != nil {
		return "", false, steps.Precondition(preSubscribed, err)
	}
	live, err := opened(ctx, ts.tenant)
	if err != nil {
		return "", false, err
	}
	pre := barrierPrecondition(protocol)
	ws, err = barrier(ctx, ts.tenant, protocol)
	if err != nil {
		return "", false, steps.Precondition(pre, err)
	}
	_, ok, err := live.find(w, recordWait, carrying(ws))
	if err != nil {
		return "", false, steps.Precondition(pre, err)
	}
	if err := w.Assert(ok, "within %s, tenant %q's live host-event stream delivered no record of an accepted %s exchange at the preferred version (workspace %s): %s",
		recordWait, ts.tenant, protocol, ws, missing(live, protocol, st(ctx).preferred(protocol))); err != nil {
		return "", false, steps.Precondition(pre, err)
	}
	_, gotB, err = ts.find(w, recordWait, carrying(ws))
	if err != nil {
		return "", false, err
	}
	if gotB {
		if err := ts.settleAfter(w, settle); err != nil {
			return "", false, err
		}
	}
	return ws, gotB, nil
}

// position is where the first frame matching m sits in ts.seen, -1 when
// none does.
func position(seen []frameRec, m func(frameRec) bool) int {
	for i, r := range seen {
		if m(r) {
			return i
		}
	}
	return -1
}

func byIDOrWorkspace(id, ws string) func(frameRec) bool {
	return func(r frameRec) bool {
		return (id != "" && r.id() == id) || strings.Contains(r.frame.Data, ws)
	}
}

// resumedDelivers checks the stream a resume step opened: every record of
// the tenant's made after the one it resumed from, in order, each once and
// under the eventId it had; nothing the subscriber already had; nothing of
// another tenant's. A record made after the stream opened is the positive
// control that it delivers at all.
func resumedDelivers(ctx context.Context, tenant string) error {
	w, s := steps.From(ctx), st(ctx)
	ts, err := s.extraStream()
	if err != nil {
		return err
	}
	if ts.tenant != tenant || ts.lastEventID == "" {
		return steps.Fault("the last stream opened is not a resumed stream of tenant %q", tenant)
	}
	mine := s.madeBy(tenant)
	k := -1
	for i, x := range mine {
		if x.eventID == ts.lastEventID {
			k = i
			break
		}
	}
	if k < 0 {
		return steps.Fault("the resumed stream names eventId %q, which no exchange of tenant %q recorded", ts.lastEventID, tenant)
	}
	from := mine[k]
	ws, gotB, err := settleBarrier(ctx, ts, from.protocol)
	if err != nil {
		return err
	}
	if err := w.Assert(gotB, "resumed with Last-Event-ID %q (the record of its exchange %d), tenant %q's stream did not deliver, within %s, the record of an exchange made after it opened (workspace %s), which its live stream did deliver; the resumed stream sent %d frames",
		from.eventID, k+1, tenant, recordWait, ws, len(ts.seen)); err != nil {
		return err
	}
	where := fmt.Sprintf("tenant %q's stream, resumed with Last-Event-ID %q (the record of its exchange %d of %d)", tenant, from.eventID, k+1, len(mine))

	// Nothing of another tenant's.
	for _, other := range s.otherTenants(tenant) {
		theirs := map[string]bool{}
		for _, r := range s.history(other) {
			if r.id() != "" {
				theirs[r.id()] = true
			}
		}
		own := s.ownWorkspaces(other)
		for _, r := range ts.seen {
			leaked := theirs[r.id()]
			for o := range own {
				leaked = leaked || strings.Contains(r.frame.Data, o)
			}
			if err := w.Assert(!leaked, "%s delivered a record of tenant %q's: %s", where, other, r.text()); err != nil {
				return err
			}
		}
	}

	// None repeated: no eventId twice, nothing the subscriber had.
	had := map[string]bool{}
	for _, r := range s.history(tenant) {
		if r.id() != "" {
			had[r.id()] = true
		}
		if r.id() == from.eventID {
			break
		}
	}
	count := map[string]int{}
	for _, r := range ts.seen {
		if r.id() == "" {
			continue
		}
		count[r.id()]++
		if err := w.Assert(count[r.id()] == 1, "%s delivered eventId %q twice: %s", where, r.id(), r.text()); err != nil {
			return err
		}
		if err := w.Assert(!had[r.id()], "%s delivered a record the subscriber already had (eventId %q, delivered at or before the one it named): %s", where, r.id(), r.text()); err != nil {
			return err
		}
	}
	for j, x := range mine[:k+1] {
		at := position(ts.seen, byIDOrWorkspace(x.eventID, x.workspace))
		if err := w.Assert(at < 0, "%s repeated the record of its exchange %d, which the subscriber already had: %s", where, j+1, frameAt(ts.seen, at)); err != nil {
			return err
		}
	}

	// None skipped, under the eventId it had, in order, before the record
	// made after the stream opened.
	last := -1
	for j := k + 1; j < len(mine); j++ {
		x := mine[j]
		at := position(ts.seen, byIDOrWorkspace(x.eventID, x.workspace))
		if err := w.Assert(at >= 0, "%s skipped the record of its exchange %d (eventId %q, workspace %s), which came after the one it named", where, j+1, x.eventID, x.workspace); err != nil {
			return err
		}
		got := ts.seen[at]
		if err := w.Assert(got.id() == x.eventID, "%s delivered the record of its exchange %d under eventId %q; it was first delivered as %q", where, j+1, got.id(), x.eventID); err != nil {
			return err
		}
		if err := w.Assert(at > last, "%s delivered the record of its exchange %d before the record of an exchange made earlier", where, j+1); err != nil {
			return err
		}
		last = at
	}
	b := position(ts.seen, carrying(ws))
	return w.Assert(b > last, "%s delivered the record of an exchange made after it opened before the records it resumed to", where)
}

func frameAt(seen []frameRec, i int) string {
	if i < 0 || i >= len(seen) {
		return ""
	}
	return seen[i].text()
}

func (s *state) otherTenants(tenant string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, t := range s.tenants {
		if t != tenant {
			out = append(out, t)
		}
	}
	return out
}

func (s *state) ownWorkspaces(tenant string) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for ws := range s.own[tenant] {
		out[ws] = true
	}
	return out
}

// freshDelivers checks the stream a new-subscription step opened (no
// Last-Event-ID) after the tenant's exchanges: it must deliver each of
// their records, as first delivered, before the record of an exchange made
// after it opened. A failure says which behaviour the host showed.
func freshDelivers(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	ts, err := s.extraStream()
	if err != nil {
		return err
	}
	if ts.lastEventID != "" {
		return steps.Fault("the last stream opened resumed after %q; this check is for a new subscription", ts.lastEventID)
	}
	mine := s.madeBy(ts.tenant)
	if len(mine) == 0 {
		return steps.Fault("tenant %q made no exchange before its new subscription", ts.tenant)
	}
	ws, gotB, err := settleBarrier(ctx, ts, mine[0].protocol)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("a new subscription of tenant %q without Last-Event-ID", ts.tenant)
	if err := w.Assert(len(ts.seen) > 0, "%s delivered nothing within %s: no record made before it opened, and not the record of an exchange made after it opened (workspace %s), which the tenant's live stream did deliver",
		where, recordWait, ws); err != nil {
		return err
	}
	b := position(ts.seen, carrying(ws))
	for j, x := range mine {
		at := position(ts.seen, byIDOrWorkspace(x.eventID, x.workspace))
		if at < 0 {
			earlier := len(ts.seen)
			if b >= 0 {
				earlier = b
			}
			if earlier == 0 {
				return w.Assert(false, "%s replayed nothing: the first record it delivered was that of an exchange made after it opened (workspace %s), and the record of the tenant's exchange %d made before it opened (eventId %q, workspace %s) never came; a durable record must reach a subscriber that was not listening when it was made",
					where, ws, j+1, x.eventID, x.workspace)
			}
			return w.Assert(false, "%s replayed %d frames from before it opened, but not the record of the tenant's exchange %d (eventId %q, workspace %s)",
				where, earlier, j+1, x.eventID, x.workspace)
		}
		got := ts.seen[at]
		if err := w.Assert(strings.Contains(got.frame.Data, x.workspace), "%s delivered the record of the tenant's exchange %d (eventId %q) without its workspace marker %q: %s",
			where, j+1, x.eventID, x.workspace, got.text()); err != nil {
			return err
		}
		if err := w.Assert(steps.JSONEqual([]byte(got.frame.Data), []byte(x.data)), "%s delivered the record of the tenant's exchange %d altered: first delivered as %s, replayed as %s",
			where, j+1, x.data, got.frame.Data); err != nil {
			return err
		}
		n := 0
		for _, r := range ts.seen {
			if byIDOrWorkspace(x.eventID, x.workspace)(r) {
				n++
			}
		}
		if err := w.Assert(n == 1, "%s delivered the record of the tenant's exchange %d %d times", where, j+1, n); err != nil {
			return err
		}
		if err := w.Assert(b < 0 || at < b, "%s delivered the record of the tenant's exchange %d after the record of an exchange made after it opened", where, j+1); err != nil {
			return err
		}
	}
	return w.Assert(gotB, "%s replayed the earlier records but did not deliver, within %s, the record of an exchange made after it opened (workspace %s), which the tenant's live stream did deliver", where, recordWait, ws)
}

// replays establishes that the host's new subscriptions replay earlier
// records: one accepted exchange, its record read on the live stream, then
// a new subscription that must deliver it. A durability check reads the
// host's state after a restart the same way.
func replays(ctx context.Context, tenant, protocol string) error {
	w, s := steps.From(ctx), st(ctx)
	xs, err := makeExchanges(ctx, tenant, 1, protocol)
	if err != nil {
		return err
	}
	x := xs[0]
	s.mu.Lock()
	s.anchor = x
	s.mu.Unlock()
	ts, err := dialStream(ctx, tenant, "")
	if err != nil {
		return err
	}
	defer ts.s.Close()
	_, ok, err := ts.find(w, recordWait, byIDOrWorkspace(x.eventID, x.workspace))
	if err != nil {
		return err
	}
	return w.Assert(ok, "a new subscription of tenant %q without Last-Event-ID did not deliver, within %s, the record of the exchange made just before it opened (eventId %q, workspace %s) among %d frames",
		tenant, recordWait, x.eventID, x.workspace, len(ts.seen))
}

// survived checks, after a restart, that a new subscription of the tenant
// delivers the record shown replayed before the restart, under the same
// eventId, and the record of the exchange answered just before the
// restart; that record becomes "that record".
func survived(ctx context.Context, tenant string) error {
	w, s := steps.From(ctx), st(ctx)
	x, err := s.lastInbound()
	if err != nil {
		return err
	}
	s.mu.Lock()
	anchor := s.anchor
	s.mu.Unlock()
	if anchor == nil || x.tenant != tenant || x == anchor {
		return steps.Fault("the survival check needs a replay precondition and then an exchange of tenant %q before the restart", tenant)
	}
	if err := openStreams(ctx); err != nil {
		return steps.Precondition(preSubscribed, err)
	}
	live, err := opened(ctx, tenant)
	if err != nil {
		return err
	}
	ws, gotB, err := settleBarrier(ctx, live, x.protocol)
	if err != nil {
		return err
	}
	if !gotB {
		return steps.Fault("the live stream's barrier record %s was awaited and then missed", ws)
	}
	where := fmt.Sprintf("after the restart, a new subscription of tenant %q", tenant)
	a := position(live.seen, carrying(anchor.workspace))
	r := position(live.seen, carrying(x.workspace))
	if err := w.Assert(a >= 0 || r >= 0, "%s delivered neither record made before the restart (the one a new subscription delivered before it, eventId %q, workspace %s; nor that of the exchange answered just before it, workspace %s), only %d frames with the record of an exchange made after it: the records did not survive",
		where, anchor.eventID, anchor.workspace, x.workspace, len(live.seen)); err != nil {
		return err
	}
	if err := w.Assert(a >= 0, "%s delivered the record of the exchange answered just before the restart, but not the one made before it (eventId %q, workspace %s)", where, anchor.eventID, anchor.workspace); err != nil {
		return err
	}
	if err := w.Assert(live.seen[a].id() == anchor.eventID, "%s delivered the record made before it under eventId %q; before the restart it was %q: an eventId a subscriber holds must keep naming the same record",
		where, live.seen[a].id(), anchor.eventID); err != nil {
		return err
	}
	if err := w.Assert(r >= 0, "%s delivered the record made earlier but none of the exchange the host answered just before it stopped (workspace %s; the host answered %s): the host answered before its record was durable",
		where, x.workspace, x.detail()); err != nil {
		return err
	}
	if err := w.Assert(len(live.records(x.workspace, "")) == 1, "%s delivered %d distinct records of the one exchange answered before it (workspace %s)", where, len(live.records(x.workspace, "")), x.workspace); err != nil {
		return err
	}
	rec, err := newHostRecord(live.seen[r])
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.record = rec
	s.mu.Unlock()
	return nil
}

// noStrangers shows that a record without a tenant reached no tenant's
// stream: after the anonymous exchange, each tenant the scenario leased
// makes an exchange of its own, and its stream, read until that record and
// a little beyond, must carry no negotiation.decided record of an exchange
// the tenant did not make. The tenants are the scenario's alone (no other
// scenario of the run, nor of an earlier run against the same hosts, leased
// them), so whatever else their streams carry reached them from no tenant.
func noStrangers(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	if _, err := w.Host(ctx); err != nil {
		return err
	}
	x, err := s.lastInbound()
	if err != nil {
		return err
	}
	if x.tenant != "" {
		return steps.Fault("the last exchange was made by tenant %q, not an anonymous caller", x.tenant)
	}
	s.mu.Lock()
	tenants := append([]string(nil), s.tenants...)
	s.mu.Unlock()
	for _, tenant := range tenants {
		ts, err := opened(ctx, tenant)
		if err != nil {
			return err
		}
		if _, _, err := settleBarrier(ctx, ts, x.protocol); err != nil {
			return err
		}
		own := s.ownWorkspaces(tenant)
		for _, r := range ts.seen {
			if !isDecided(r) {
				continue
			}
			mine := false
			if ws, _ := r.env["workspaceId"].(string); own[ws] {
				mine = true
			}
			for o := range own {
				mine = mine || strings.Contains(r.frame.Data, o)
			}
			if err := w.Assert(mine, "tenant %q's stream, which no other scenario's exchanges reach, delivered a negotiation.decided record of no exchange the tenant made: the record of %s's exchange (named %q, answered %s) reached a tenant: %s",
				tenant, x.callerName(), x.named, x.detail(), r.text()); err != nil {
				return err
			}
		}
	}
	return nil
}

func isDecided(r frameRec) bool {
	if r.frame.Event == typeNegotiationDecided {
		return true
	}
	var env struct {
		Type string `json:"type"`
	}
	return json.Unmarshal([]byte(r.frame.Data), &env) == nil && env.Type == typeNegotiationDecided
}
