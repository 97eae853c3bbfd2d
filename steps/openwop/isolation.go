package openwop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
)

// Tenant isolation on the two paths a live stream does not take: a new
// subscription (no Last-Event-ID), which replays what was recorded before
// it opened, and a reconnect naming in Last-Event-ID an eventId of another
// tenant's. Neither may deliver anything of another tenant's. The tenants
// are the scenario's own, so a record on one's stream that none of its own
// exchanges made came from another tenant.

// reconnect is a reconnect the host refused outright (no event stream): it
// delivers nothing, and its body is still read for another tenant's records.
type reconnect struct {
	tenant  string
	refused *steps.Response
}

func isolation(ctx context.Context) *reconnect {
	return steps.From(ctx).State(family+"-isolation", func() any { return &reconnect{} }).(*reconnect)
}

func registerIsolation(c *steps.Catalog) {
	c.When(`^tenant "([^"]*)" reconnects to its host-event stream naming in Last-Event-ID the record of tenant "([^"]*)"'s exchange (\d+)$`, func(ctx context.Context, tenant, other string, k int) error {
		s := st(ctx)
		theirs := s.madeBy(other)
		if tenant == other || k < 1 || k > len(theirs) {
			return steps.Fault("tenant %q made %d exchanges; the scenario names exchange %d for tenant %q to reconnect with", other, len(theirs), k, tenant)
		}
		return reconnectForeign(ctx, tenant, theirs[k-1].eventID)
	})
	c.Then(`^that stream carries no record of tenant "([^"]*)"'s, up to and past the record of an exchange tenant "([^"]*)" makes after it opened$`, func(ctx context.Context, other, tenant string) error {
		return carriesNothingOf(ctx, tenant, other)
	})
}

// reconnectForeign subscribes as tenant naming another tenant's eventId in
// Last-Event-ID. The text leaves what the host makes of an id that is not
// the tenant's open (replay from the start, from where the id sits, or a
// refusal); a refusal is kept, for the check, rather than failed.
func reconnectForeign(ctx context.Context, tenant, eventID string) error {
	w, s := steps.From(ctx), st(ctx)
	key, err := s.key(tenant)
	if err != nil {
		return err
	}
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	s.hookRestart(w)
	hdr := http.Header{"Accept": {"text/event-stream"}, "Authorization": {"Bearer " + key}, "Last-Event-ID": {eventID}}
	sub := &steps.Response{Method: http.MethodGet, URL: hostEventsPath, ReqHeader: hdr}
	str, err := sse.Dial(context.Background(), h.HTTP+hostEventsPath, sse.Options{
		APIKey: key, LastEventID: eventID, ConnectTimeout: steps.ExchangeTimeout, MaxFrameBytes: 1 << 20,
	})
	iso := isolation(ctx)
	iso.tenant, iso.refused = tenant, nil
	var se *sse.StatusError
	if errors.As(err, &se) {
		sub.Status, sub.Header, sub.Body = se.Status, http.Header{"Content-Type": {se.ContentType}}, []byte(se.Body)
		w.Observe(sub)
		w.SetLast(sub)
		iso.refused = sub
		s.setExtra(nil)
		return nil
	}
	if err != nil {
		w.Observe(sub)
		return steps.Fail("tenant %q's %s opened no event stream: %v", tenant, hostEventsPath, err)
	}
	w.Cleanup(str.Close)
	sub.Status, sub.Header = str.Status, str.Header
	w.Observe(sub)
	s.setExtra(&tenantStream{tenant: tenant, s: str, sub: sub, lastEventID: eventID})
	return nil
}

// carriesNothingOf checks the stream the last new-subscription or reconnect
// step opened for tenant: read until the record of an exchange the tenant
// makes after it opened, and a little beyond, it carries no record of
// other's (by eventId or workspace marker) and no negotiation.decided record
// of an exchange the tenant did not make. A reconnect the host refused must
// carry nothing of other's in its answer either.
func carriesNothingOf(ctx context.Context, tenant, other string) error {
	w, s := steps.From(ctx), st(ctx)
	theirs := s.madeBy(other)
	if len(theirs) == 0 {
		return steps.Fault("tenant %q made no exchange whose record could leak", other)
	}
	ids := map[string]bool{}
	for _, x := range theirs {
		if x.eventID != "" {
			ids[x.eventID] = true
		}
	}
	for _, r := range s.history(other) {
		if r.id() != "" {
			ids[r.id()] = true
		}
	}
	wss := s.ownWorkspaces(other)
	leaks := func(data string) bool {
		for id := range ids {
			if strings.Contains(data, id) {
				return true
			}
		}
		for ws := range wss {
			if strings.Contains(data, ws) {
				return true
			}
		}
		return false
	}
	if iso := isolation(ctx); iso.refused != nil && iso.tenant == tenant {
		r := iso.refused
		return w.Assert(!leaks(string(r.Body)), "tenant %q's reconnect naming tenant %q's eventId was refused %d, and the refusal carries tenant %q's record: %s", tenant, other, r.Status, other, r)
	}
	ts, err := s.extraStream()
	if err != nil {
		return err
	}
	if ts.tenant != tenant {
		return steps.Fault("the last stream opened is tenant %q's, not %q's", ts.tenant, tenant)
	}
	where := fmt.Sprintf("tenant %q's new subscription (no Last-Event-ID)", tenant)
	if ts.lastEventID != "" {
		where = fmt.Sprintf("tenant %q's stream reconnected with tenant %q's eventId %q in Last-Event-ID", tenant, other, ts.lastEventID)
	}
	ws, gotB, err := settleBarrier(ctx, ts, theirs[0].protocol)
	if err != nil {
		return err
	}
	own := s.ownWorkspaces(tenant)
	for _, r := range ts.seen {
		if err := w.Assert(!(r.id() != "" && ids[r.id()]) && !leaks(r.frame.Data), "%s delivered a record of tenant %q's: %s", where, other, r.text()); err != nil {
			return err
		}
		if !isDecided(r) {
			continue
		}
		mine := false
		for o := range own {
			mine = mine || strings.Contains(r.frame.Data, o)
		}
		if err := w.Assert(mine, "%s delivered a negotiation.decided record of no exchange the tenant made (the tenants are the scenario's alone): %s", where, r.text()); err != nil {
			return err
		}
	}
	return w.Assert(gotB, "%s did not deliver, within %s, the record of the tenant's own exchange made after it opened (workspace %s), which its live stream did deliver: the stream is not shown flowing, so its silence shows nothing (it sent %d frames)",
		where, recordWait, ws, len(ts.seen))
}
