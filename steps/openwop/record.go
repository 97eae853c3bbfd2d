package openwop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
)

// record is "that record": one negotiation.decided record, from a run's log
// or from a tenant's host-event stream.
type record struct {
	where      string
	payload    map[string]any
	payloadRaw []byte
	// Host events only: the envelope and the frame that carried it.
	env    map[string]any
	envRaw []byte
	frame  *sse.Frame
}

// newRecord reads a negotiation.decided payload the host sent on where; a
// payload that is not a JSON object is the host's failure.
func newRecord(where string, payload json.RawMessage) (*record, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, steps.Fail("the negotiation.decided payload on %s is not a JSON object (%v): %s", where, err, payload)
	}
	return &record{where: where, payload: m, payloadRaw: payload}, nil
}

// newHostRecord reads the record a host-event frame carries.
func newHostRecord(f frameRec) (*record, error) {
	if f.env == nil {
		return nil, steps.Fail("the host-event frame's data is not a JSON object: %q", f.frame.Data)
	}
	var parts struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal([]byte(f.frame.Data), &parts); err != nil || len(parts.Payload) == 0 || string(parts.Payload) == "null" {
		return nil, steps.Fail("the host event has no payload: %s", f.frame.Data)
	}
	r, err := newRecord("the host-event stream", parts.Payload)
	if err != nil {
		return nil, err
	}
	fr := f.frame
	r.env, r.envRaw, r.frame = f.env, []byte(f.frame.Data), &fr
	return r, nil
}

func (r *record) str(field string) (string, bool) {
	v, ok := r.payload[field]
	s, isStr := v.(string)
	return s, ok && isStr
}

func (r *record) String() string { return fmt.Sprintf("the record on %s: %s", r.where, r.payloadRaw) }

func current(ctx context.Context) (*record, error) {
	s := st(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.record == nil {
		return nil, steps.Fault("no negotiation.decided record was read yet")
	}
	return s.record, nil
}

// expect checks field by field and stops at the first mismatch; each check
// is one assertion.
func expect(w *steps.World, r *record, checks ...check) error {
	for _, c := range checks {
		got, present := r.str(c.field)
		var ok bool
		var want string
		switch {
		case c.absent:
			_, has := r.payload[c.field]
			ok, want = !has, "absent"
		default:
			ok, want = present && got == c.want, fmt.Sprintf("%q", c.want)
		}
		if err := w.Assert(ok, "%s: want %s %s, got %s; %s", c.what, c.field, want, describe(got, present, r, c.field), r); err != nil {
			return err
		}
	}
	return nil
}

type check struct {
	what, field, want string
	absent            bool
}

func describe(got string, present bool, r *record, field string) string {
	if v, has := r.payload[field]; has && !present {
		return steps.Text(v) + " (not a string)"
	}
	if !present {
		return "no such field"
	}
	return fmt.Sprintf("%q", got)
}

// settledVersion is what the exchange behind the current record settled on,
// as the other side of it saw on the wire: the fake peer's answer for an
// outbound record, the host's answer for an inbound one.
func settledVersion(ctx context.Context, r *record) (string, error) {
	if r.env == nil {
		return peerAnswered(ctx)
	}
	x, err := st(ctx).lastInbound()
	if err != nil {
		return "", err
	}
	return x.version, nil
}

func registerRecord(c *steps.Catalog) {
	c.Then(`^that record's payload satisfies the schema "([^"]*)"$`, func(ctx context.Context, name string) error {
		r, err := current(ctx)
		if err != nil {
			return err
		}
		return steps.From(ctx).ExpectSchema(name, r.payloadRaw)
	})
	c.Then(`^that record's envelope satisfies the schema "([^"]*)"$`, func(ctx context.Context, name string) error {
		r, err := current(ctx)
		if err != nil {
			return err
		}
		if r.env == nil {
			return steps.Fault("that record is on a run's log, not a host event")
		}
		return steps.From(ctx).ExpectSchema(name, r.envRaw)
	})
	c.Then(`^that record is a durable host event of the caller's workspace, with no runId$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		if r.env == nil {
			return steps.Fault("that record is on a run's log, not a host event")
		}
		x, err := st(ctx).lastInbound()
		if err != nil {
			return err
		}
		typ, _ := r.env["type"].(string)
		eventID, _ := r.env["eventId"].(string)
		_, hasRun := r.env["runId"]
		for _, c := range []struct {
			ok   bool
			what string
		}{
			{typ == typeNegotiationDecided, fmt.Sprintf("the envelope's type is %q, want %q", typ, typeNegotiationDecided)},
			{r.frame.Event == typ, fmt.Sprintf("the frame's event field %q differs from the envelope's type %q", r.frame.Event, typ)},
			{r.env["delivery"] == "durable", fmt.Sprintf("the envelope's delivery is %s, want durable", steps.Text(r.env["delivery"]))},
			{eventID != "" && r.frame.HasID && r.frame.ID == eventID, fmt.Sprintf("a durable frame carries its eventId as the SSE id: id %q (present: %v), eventId %q", r.frame.ID, r.frame.HasID, eventID)},
			{!hasRun, "a host event carries runId " + steps.Text(r.env["runId"])},
			{r.env["workspaceId"] == x.workspace, fmt.Sprintf("the envelope's workspaceId is %s, the caller named %q", steps.Text(r.env["workspaceId"]), x.workspace)},
		} {
			if err := w.Assert(c.ok, "%s: %s", c.what, r.envRaw); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^that record's requested is the version the peer was asked for$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		asked, err := peerAsked(ctx)
		if err != nil {
			return err
		}
		return expect(w, r, check{what: "the record must name what the host asked the peer for", field: "requested", want: asked})
	})
	c.Then(`^that record is accepted at the version the peer answered$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		answered, err := peerAnswered(ctx)
		if err != nil {
			return err
		}
		if answered == "" {
			// The host's one request reached the fake peer (peerAnswered
			// fails otherwise), and the scenario configured the fake to
			// accept: a fake that answered no version is parley's bug.
			return steps.Fault("the scenario's fake peer refused the host's request, yet the scenario expects an accepted negotiation")
		}
		return steps.Precondition(preAgreedVersion, expect(w, r,
			check{what: "an accepted negotiation", field: "outcome", want: "accepted"},
			check{what: "the record must name the version the peer answered", field: "version", want: answered}))
	})
	c.Then(`^that record is refused, with no version$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		return expect(w, r,
			check{what: "a refused negotiation", field: "outcome", want: "refused"},
			check{what: "a refusal agrees on no version", field: "version", absent: true})
	})
	c.Then(`^that record identifies the peer only by the digest of its origin$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		origin, digest, err := peerOrigin(ctx)
		if err != nil {
			return err
		}
		u, perr := url.Parse(origin)
		if perr != nil {
			return steps.Fault("the fake peer's origin %q does not parse: %v", origin, perr)
		}
		if err := w.Assert(!strings.Contains(string(r.payloadRaw), u.Host), "the record discloses the peer's address %s: %s", u.Host, r); err != nil {
			return err
		}
		if _, has := r.payload["peerDigest"]; !has {
			return nil // optional; when present it must be right
		}
		return expect(w, r, check{what: "peerDigest is the SHA-256 hex of the peer's origin " + origin, field: "peerDigest", want: digest})
	})
	c.Then(`^that record is a downgrade from "([^"]*)" to "([^"]*)"$`, func(ctx context.Context, from, to string) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		settled, err := settledVersion(ctx, r)
		if err != nil {
			return err
		}
		if err := expect(w, r,
			check{what: "a downgrade is recorded as accepted", field: "outcome", want: "accepted"},
			check{what: "a downgrade names what was asked for", field: "requested", want: from},
			check{what: "a downgrade names the version the exchange settled on (" + settled + " on the wire)", field: "version", want: settled},
			check{what: "the downgraded version", field: "version", want: to}); err != nil {
			return err
		}
		v, _ := r.str("version")
		q, _ := r.str("requested")
		return w.Assert(v != q, "a downgrade must read as one: version and requested are both %q; %s", v, r)
	})
	c.Then(`^that record is accepted at "([^"]*)" with requested "([^"]*)"$`, func(ctx context.Context, version, requested string) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		settled, err := settledVersion(ctx, r)
		if err != nil {
			return err
		}
		return expect(w, r,
			check{what: "an accepted negotiation", field: "outcome", want: "accepted"},
			check{what: "the record names the version the caller named", field: "requested", want: requested},
			check{what: "the record names the version the host answered on the wire", field: "version", want: settled},
			check{what: "the agreed version", field: "version", want: version})
	})
	c.Then(`^that record is refused below the floor "([^"]*)" with requested "([^"]*)"$`, func(ctx context.Context, floor, requested string) error {
		w := steps.From(ctx)
		r, err := current(ctx)
		if err != nil {
			return err
		}
		return expect(w, r,
			check{what: "a refused negotiation", field: "outcome", want: "refused"},
			check{what: "a below-floor refusal says so", field: "reason", want: "below-floor"},
			check{what: "a below-floor refusal names the floor", field: "floor", want: floor},
			check{what: "the record names the version the caller named", field: "requested", want: requested},
			check{what: "a refusal agrees on no version", field: "version", absent: true})
	})
}
