package openwop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
)

const (
	typeNegotiationDecided = "negotiation.decided"
	hostEventsPath         = "/host/events"

	// recordWait bounds the wait for one record to reach a stream; a host
	// commits a record before it answers the exchange, so this is slack for
	// a loaded machine, not a grace period the spec grants.
	recordWait = 10 * time.Second
	// settle is how long a stream is read past its barrier record for a
	// straggler (a duplicate, or a record leaked from another tenant).
	settle = 300 * time.Millisecond
	// maxFramesPerWait bounds how much of a tenant's history the suite reads
	// while waiting for one record.
	maxFramesPerWait = 20000
)

// frameRec is one frame a tenant's stream delivered.
type frameRec struct {
	frame   sse.Frame
	env     map[string]any // nil when the data is not a JSON object
	eventID string
}

// tenantStream is a tenant's /host/events stream, opened once per scenario
// and read incrementally; every frame read is kept.
type tenantStream struct {
	tenant string
	s      *sse.Stream
	// sub is the subscription as the suite made it (the request it sent and
	// the response headers); every frame is observed as an answer to it.
	sub  *steps.Response
	seen []frameRec
	// lastEventID is what the subscription named in Last-Event-ID.
	lastEventID string
}

func registerEvents(c *steps.Catalog) {
	c.Then(`^tenant "([^"]*)"'s host-event stream delivers exactly one negotiation\.decided record of that exchange$`, func(ctx context.Context, tenant string) error {
		return ownRecord(ctx, tenant)
	})
	c.Then(`^tenant "([^"]*)"'s host-event stream does not deliver that record$`, func(ctx context.Context, tenant string) error {
		return notDelivered(ctx, tenant)
	})
}

// openStreams subscribes to every configured tenant's host-event stream
// before the scenario's first inbound exchange: a record the host delivers
// only to subscribers already listening, to its tenant or leaked to another,
// is then seen all the same.
func openStreams(ctx context.Context) error {
	s := st(ctx)
	s.mu.Lock()
	tenants := append([]string(nil), s.tenants...)
	s.mu.Unlock()
	if len(tenants) == 0 {
		return steps.Fault("an inbound exchange needs the host's tenants among the Given steps")
	}
	for _, t := range tenants {
		if err := openStream(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// openStream opens (once) the tenant's host-event stream.
func openStream(ctx context.Context, tenant string) error {
	s := st(ctx)
	s.mu.Lock()
	open := s.streams[tenant] != nil
	s.mu.Unlock()
	if open {
		return nil
	}
	ts, err := dialStream(ctx, tenant, "")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.streams[tenant] = ts
	s.mu.Unlock()
	return nil
}

// dialStream subscribes to the tenant's /host/events, naming lastEventID in
// Last-Event-ID when it is not empty. The stream outlives the step; the
// scenario's end closes it, and so does a restart of the host (which ends
// it anyway): the next inbound exchange opens the tenant's stream again.
func dialStream(ctx context.Context, tenant, lastEventID string) (*tenantStream, error) {
	w, s := steps.From(ctx), st(ctx)
	key, err := s.key(tenant)
	if err != nil {
		return nil, err
	}
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	s.hookRestart(w)
	hdr := http.Header{"Accept": {"text/event-stream"}, "Authorization": {"Bearer " + key}}
	if lastEventID != "" {
		hdr.Set("Last-Event-ID", lastEventID)
	}
	sub := &steps.Response{Method: http.MethodGet, URL: hostEventsPath, ReqHeader: hdr}
	str, err := sse.Dial(context.Background(), h.HTTP+hostEventsPath, sse.Options{
		APIKey: key, LastEventID: lastEventID, ConnectTimeout: steps.ExchangeTimeout, MaxFrameBytes: 1 << 20,
	})
	var se *sse.StatusError
	if errors.As(err, &se) {
		sub.Status, sub.Header, sub.Body = se.Status, http.Header{"Content-Type": {se.ContentType}}, []byte(se.Body)
		w.Observe(sub)
		return nil, w.Assert(false, "tenant %q's %s answered %d (%s), not an event stream: %s", tenant, hostEventsPath, se.Status, se.ContentType, se.Body)
	}
	if err != nil {
		w.Observe(sub)
		return nil, steps.Fail("tenant %q's %s opened no event stream: %v", tenant, hostEventsPath, err)
	}
	w.Cleanup(str.Close)
	sub.Status, sub.Header = str.Status, str.Header
	w.Observe(sub)
	return &tenantStream{tenant: tenant, s: str, sub: sub, lastEventID: lastEventID}, nil
}

// hookRestart makes a restart of the host forget what belonged to the
// host that stopped: its streams (their frames are kept as the tenant's
// history), the inbound URLs discovery gave and the A2A endpoint.
func (s *state) hookRestart(w *steps.World) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooked {
		return
	}
	s.hooked = true
	w.OnRestart(func(*target.Host) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for t, ts := range s.streams {
			ts.s.Close()
			s.retired[t] = append(s.retired[t], ts.seen...)
		}
		if s.extra != nil {
			s.extra.s.Close()
			s.extra = nil
		}
		s.streams = map[string]*tenantStream{}
		s.serves = map[string]string{}
		s.disc = nil
		s.rpc = ""
	})
}

// history is every frame the tenant's live streams delivered so far, in
// the order they came (streams a restart ended first).
func (s *state) history(tenant string) []frameRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]frameRec(nil), s.retired[tenant]...)
	if ts := s.streams[tenant]; ts != nil {
		out = append(out, ts.seen...)
	}
	return out
}

// opened returns the tenant's stream, which an inbound exchange opened.
func opened(ctx context.Context, tenant string) (*tenantStream, error) {
	s := st(ctx)
	if _, err := s.key(tenant); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.streams[tenant]
	if ts == nil {
		return nil, steps.Fault("tenant %q's host-event stream was not opened before the inbound exchange", tenant)
	}
	return ts, nil
}

func parseFrame(f sse.Frame) frameRec {
	r := frameRec{frame: f}
	dec := json.NewDecoder(bytes.NewReader([]byte(f.Data)))
	dec.UseNumber()
	var env map[string]any
	if dec.Decode(&env) == nil && env != nil {
		r.env = env
		r.eventID, _ = env["eventId"].(string)
	}
	return r
}

// text renders a frame the way it came on the wire.
func (r frameRec) text() string {
	var b strings.Builder
	if r.frame.Event != "" {
		b.WriteString("event: " + r.frame.Event + "\n")
	}
	if r.frame.HasID {
		b.WriteString("id: " + r.frame.ID + "\n")
	}
	b.WriteString("data: " + r.frame.Data)
	return b.String()
}

// until reads frames until one matches, the timeout passes (ok false), or
// the stream fails (the host's failure). Every frame is an observation of
// the host.
func (t *tenantStream) until(w *steps.World, timeout time.Duration, match func(frameRec) bool) (frameRec, bool, error) {
	deadline := time.Now().Add(timeout)
	for n := 0; n < maxFramesPerWait; n++ {
		left := time.Until(deadline)
		if left <= 0 {
			return frameRec{}, false, nil
		}
		f, err := t.s.Next(left)
		if errors.Is(err, sse.ErrTimeout) {
			return frameRec{}, false, nil
		}
		if err != nil {
			return frameRec{}, false, steps.Fail("tenant %q's host-event stream ended: %v", t.tenant, err)
		}
		r := parseFrame(f)
		t.seen = append(t.seen, r)
		obs := *t.sub
		obs.Body = []byte(r.text())
		w.Observe(&obs)
		if match(r) {
			return r, true, nil
		}
	}
	return frameRec{}, false, steps.Fail("tenant %q's host-event stream sent over %d frames without the one awaited", t.tenant, maxFramesPerWait)
}

// find returns the first frame already read that matches, or reads on
// until one does (ok false when none came within timeout).
func (t *tenantStream) find(w *steps.World, timeout time.Duration, match func(frameRec) bool) (frameRec, bool, error) {
	for _, r := range t.seen {
		if match(r) {
			return r, true, nil
		}
	}
	return t.until(w, timeout, match)
}

// id is the record's eventId: the envelope's, else the frame's SSE id.
func (r frameRec) id() string {
	if r.eventID != "" {
		return r.eventID
	}
	if r.frame.HasID {
		return r.frame.ID
	}
	return ""
}

// settleAfter reads whatever else arrives within d.
func (t *tenantStream) settleAfter(w *steps.World, d time.Duration) error {
	_, _, err := t.until(w, d, func(frameRec) bool { return false })
	return err
}

// carrying matches a frame whose data carries the workspace marker the
// suite chose for one exchange.
func carrying(ws string) func(frameRec) bool {
	return func(r frameRec) bool { return strings.Contains(r.frame.Data, ws) }
}

// records returns the distinct records seen so far that carry the
// workspace marker, or the given eventId (as the envelope's eventId or the
// frame's SSE id): one per distinct eventId, a redelivery of the same
// durable event counting once.
func (t *tenantStream) records(ws, eventID string) []frameRec {
	var out []frameRec
	ids := map[string]bool{}
	for _, r := range t.seen {
		byID := eventID != "" && (r.eventID == eventID || (r.frame.HasID && r.frame.ID == eventID))
		if !byID && !strings.Contains(r.frame.Data, ws) {
			continue
		}
		if r.eventID != "" {
			if ids[r.eventID] {
				continue
			}
			ids[r.eventID] = true
		}
		out = append(out, r)
	}
	return out
}

// barrierPrecondition names what a barrier of the protocol relies on.
func barrierPrecondition(protocol string) string {
	if protocol == "MCP" {
		return preBarrierMCP
	}
	return preBarrierA2A
}

// awaitBarrier makes a barrier exchange as tenant and waits for its record
// on ts. Its record is the positive control that shows the stream has caught
// up; a host that records no accepted exchange at its preferred version
// fails the inbound.recorded scenarios, so here that is a failed
// precondition.
func awaitBarrier(ctx context.Context, ts *tenantStream, protocol string) error {
	w, s := steps.From(ctx), st(ctx)
	pre := barrierPrecondition(protocol)
	ws, err := barrier(ctx, ts.tenant, protocol)
	if err != nil {
		return steps.Precondition(pre, err)
	}
	_, ok, err := ts.until(w, recordWait, carrying(ws))
	if err != nil {
		return steps.Precondition(pre, err)
	}
	return steps.Precondition(pre, w.Assert(ok, "within %s, tenant %q's host-event stream delivered no record of an accepted %s exchange at the preferred version (the barrier, workspace %s): %s",
		recordWait, ts.tenant, protocol, ws, missing(ts, protocol, s.preferred(protocol))))
}

// ownRecord finds the record of the last inbound exchange on its tenant's
// stream, proves by a barrier exchange that no second record of it follows,
// and keeps it as "that record".
func ownRecord(ctx context.Context, tenant string) error {
	w, s := steps.From(ctx), st(ctx)
	x, err := s.lastInbound()
	if err != nil {
		return err
	}
	if x.tenant != tenant {
		return steps.Fault("the exchange was made by tenant %q, not %q", x.tenant, tenant)
	}
	ts, err := opened(ctx, tenant)
	if err != nil {
		return err
	}
	first, ok, err := ts.until(w, recordWait, carrying(x.workspace))
	if err != nil {
		return err
	}
	if err := w.Assert(ok, "within %s, tenant %q's host-event stream delivered no record of the %s exchange (workspace %s): %s; the host answered that exchange %s",
		recordWait, tenant, x.protocol, x.workspace, missing(ts, x.protocol, x.named), x.detail()); err != nil {
		return err
	}
	if err := awaitBarrier(ctx, ts, x.protocol); err != nil {
		return err
	}
	if err := ts.settleAfter(w, settle); err != nil {
		return err
	}
	all := ts.records(x.workspace, "")
	if err := w.Assert(len(all) == 1, "tenant %q's stream delivered %d distinct records of one exchange (workspace %s), want exactly one", tenant, len(all), x.workspace); err != nil {
		return err
	}
	rec, err := newHostRecord(first)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.record = rec
	s.mu.Unlock()
	return nil
}

// notDelivered proves that another tenant's stream, open since before the
// exchange, does not carry the record of the last inbound exchange: that
// tenant's own barrier record arrives, and nothing carrying the exchange's
// workspace (or its record's eventId) arrives before it or shortly after.
func notDelivered(ctx context.Context, tenant string) error {
	w, s := steps.From(ctx), st(ctx)
	x, err := s.lastInbound()
	if err != nil {
		return err
	}
	if x.tenant == tenant {
		return steps.Fault("tenant %q made the exchange; name another tenant", tenant)
	}
	var eventID string
	s.mu.Lock()
	if s.record != nil && s.record.env != nil {
		eventID, _ = s.record.env["eventId"].(string)
	}
	s.mu.Unlock()
	ts, err := opened(ctx, tenant)
	if err != nil {
		return err
	}
	if err := awaitBarrier(ctx, ts, x.protocol); err != nil {
		return err
	}
	if err := ts.settleAfter(w, settle); err != nil {
		return err
	}
	leaked := ts.records(x.workspace, eventID)
	first := ""
	if len(leaked) > 0 {
		first = leaked[0].text()
	}
	return w.Assert(len(leaked) == 0, "tenant %q's stream delivered %d record(s) of tenant %q's exchange (workspace %s): %s", tenant, len(leaked), x.tenant, x.workspace, first)
}

// missing says what a stream delivered instead of the record of an exchange
// of the protocol that named the version named: never only "no record".
// Every exchange the suite makes as a tenant names a workspace, so a record
// without one that matches the exchange is the record with its marker lost.
func missing(ts *tenantStream, protocol, named string) string {
	if len(ts.seen) == 0 {
		return "it delivered nothing at all (not one frame)"
	}
	decided := 0
	var lookalike []frameRec
	for _, r := range ts.seen {
		if !isDecided(r) {
			continue
		}
		decided++
		p, _ := r.env["payload"].(map[string]any)
		ws, _ := r.env["workspaceId"].(string)
		if p != nil && ws == "" && p["protocol"] == strings.ToLower(protocol) && (named == "" || p["requested"] == named) {
			lookalike = append(lookalike, r)
		}
	}
	switch {
	case len(lookalike) > 0:
		return fmt.Sprintf("it delivered %d record(s) that match the exchange (protocol %s, requested %q) without its workspace marker, for example: %s",
			len(lookalike), strings.ToLower(protocol), named, lookalike[len(lookalike)-1].text())
	case decided == 0:
		return fmt.Sprintf("it delivered %d frames, none a negotiation.decided record", len(ts.seen))
	}
	return fmt.Sprintf("it delivered %d negotiation.decided records (of %d frames), none carrying the exchange's workspace marker or matching it", decided, len(ts.seen))
}
