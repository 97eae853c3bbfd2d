package openwop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
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
	frame     sse.Frame
	env       map[string]any // nil when the data is not a JSON object
	eventID   string
	workspace string
}

// tenantStream is a tenant's /host/events stream, opened once per scenario
// and read incrementally; every frame read is kept.
type tenantStream struct {
	tenant string
	s      *sse.Stream
	seen   []frameRec
}

func registerEvents(c *steps.Catalog) {
	c.Then(`^tenant "([^"]*)"'s host-event stream delivers exactly one negotiation\.decided record of that exchange$`, func(ctx context.Context, tenant string) error {
		return ownRecord(ctx, tenant)
	})
	c.Then(`^tenant "([^"]*)"'s host-event stream does not deliver that record$`, func(ctx context.Context, tenant string) error {
		return notDelivered(ctx, tenant)
	})
}

// stream opens (once) the tenant's host-event stream.
func stream(ctx context.Context, tenant string) (*tenantStream, error) {
	w, s := steps.From(ctx), st(ctx)
	s.mu.Lock()
	ts := s.streams[tenant]
	s.mu.Unlock()
	if ts != nil {
		return ts, nil
	}
	key, err := s.key(tenant)
	if err != nil {
		return nil, err
	}
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	// The stream outlives this step; Cleanup closes it when the scenario ends.
	str, err := sse.Dial(context.Background(), h.HTTP+hostEventsPath, sse.Options{
		APIKey: key, ConnectTimeout: steps.ExchangeTimeout, MaxFrameBytes: 1 << 20,
	})
	var se *sse.StatusError
	if errors.As(err, &se) {
		return nil, w.Assert(false, "tenant %q's %s answered %d (%s), not an event stream: %s", tenant, hostEventsPath, se.Status, se.ContentType, se.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("opening tenant %q's %s: %w", tenant, hostEventsPath, err)
	}
	w.Cleanup(str.Close)
	ts = &tenantStream{tenant: tenant, s: str}
	s.mu.Lock()
	s.streams[tenant] = ts
	s.mu.Unlock()
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
		r.workspace, _ = env["workspaceId"].(string)
	}
	return r
}

// until reads frames until one matches, the timeout passes (ok false), or
// the stream fails.
func (t *tenantStream) until(timeout time.Duration, match func(frameRec) bool) (frameRec, bool, error) {
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
			return frameRec{}, false, fmt.Errorf("tenant %q's host-event stream ended: %w", t.tenant, err)
		}
		r := parseFrame(f)
		t.seen = append(t.seen, r)
		if match(r) {
			return r, true, nil
		}
	}
	return frameRec{}, false, fmt.Errorf("tenant %q's host-event stream sent over %d frames without the one awaited", t.tenant, maxFramesPerWait)
}

// settleAfter reads whatever else arrives within d.
func (t *tenantStream) settleAfter(d time.Duration) error {
	_, _, err := t.until(d, func(frameRec) bool { return false })
	return err
}

func inWorkspace(ws string) func(frameRec) bool {
	return func(r frameRec) bool { return r.workspace == ws }
}

// marked returns the frames seen so far that carry the workspace marker or
// the given eventId, counting one per distinct eventId.
func (t *tenantStream) marked(ws, eventID string) []frameRec {
	var out []frameRec
	ids := map[string]bool{}
	for _, r := range t.seen {
		if r.workspace != ws && (eventID == "" || r.eventID != eventID) {
			continue
		}
		if r.eventID != "" {
			if ids[r.eventID] {
				continue // a redelivery of the same durable event
			}
			ids[r.eventID] = true
		}
		out = append(out, r)
	}
	return out
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
	ts, err := stream(ctx, tenant)
	if err != nil {
		return err
	}
	first, ok, err := ts.until(recordWait, inWorkspace(x.workspace))
	if err != nil {
		return w.Assert(false, "%v", err)
	}
	if err := w.Assert(ok, "within %s, tenant %q's host-event stream delivered no record of the %s exchange (workspace %s) among %d frames; the host answered that exchange %s",
		recordWait, tenant, x.protocol, x.workspace, len(ts.seen), x.detail); err != nil {
		return err
	}
	ws, err := barrier(ctx, tenant, x.protocol)
	if err != nil {
		return err
	}
	_, ok, err = ts.until(recordWait, inWorkspace(ws))
	if err != nil {
		return w.Assert(false, "%v", err)
	}
	if err := w.Assert(ok, "within %s, tenant %q's stream delivered no record of a second, barrier exchange (workspace %s)", recordWait, tenant, ws); err != nil {
		return err
	}
	if err := ts.settleAfter(settle); err != nil {
		return w.Assert(false, "%v", err)
	}
	all := ts.marked(x.workspace, "")
	if err := w.Assert(len(all) == 1, "tenant %q's stream delivered %d distinct records of one exchange (workspace %s), want exactly one", tenant, len(all), x.workspace); err != nil {
		return err
	}
	rec, err := newHostRecord(first)
	if err != nil {
		return w.Assert(false, "%v", err)
	}
	s.mu.Lock()
	s.record = rec
	s.mu.Unlock()
	return nil
}

// notDelivered proves that another tenant's stream does not carry the record
// of the last inbound exchange: that tenant's own barrier record arrives,
// and nothing of the exchange arrives before it or shortly after.
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
	ts, err := stream(ctx, tenant)
	if err != nil {
		return err
	}
	ws, err := barrier(ctx, tenant, x.protocol)
	if err != nil {
		return err
	}
	_, ok, err := ts.until(recordWait, inWorkspace(ws))
	if err != nil {
		return w.Assert(false, "%v", err)
	}
	if err := w.Assert(ok, "within %s, tenant %q's stream delivered no record of its own barrier exchange (workspace %s), so it cannot be shown to withhold another tenant's", recordWait, tenant, ws); err != nil {
		return err
	}
	if err := ts.settleAfter(settle); err != nil {
		return w.Assert(false, "%v", err)
	}
	leaked := ts.marked(x.workspace, eventID)
	if len(leaked) > 0 {
		return w.Assert(false, "tenant %q's stream delivered tenant %q's record: %s", tenant, x.tenant, leaked[0].frame.Data)
	}
	return w.Assert(true, "")
}
