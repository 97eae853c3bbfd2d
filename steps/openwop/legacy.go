package openwop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/parley-conformance/parley/steps"
)

// A record written before RFC 0242 gave negotiation.decided its requested
// field stays valid on replay and poll (the RFC's Compatibility section):
// the host reads it as it was written, it does not refuse it, drop it, or
// rewrite it with a requested it never had. Such a record cannot be made
// on the wire today (every exchange names a version), so the host imports
// it through a seam, as an upgrade would find it (docs/hosts/openwop.md,
// "Legacy records").

const (
	legacyHostEventSeam = "/conformance/seams/sample/legacy/host-event"
	legacyRunSeam       = "/conformance/seams/sample/legacy/run"
)

// legacy is the legacy record a scenario had the host import.
type legacy struct {
	tenant, protocol string
	payload          []byte
	workspace        string
	eventID, runID   string
	polled           *steps.Response
}

func legacyState(ctx context.Context) *legacy {
	return steps.From(ctx).State(family+"-legacy", func() any { return &legacy{} }).(*legacy)
}

// legacyPayload is a record as a host from before RFC 0242 wrote it: the
// closed payload of the time, with no requested.
func (s *state) legacyPayload(protocol, outcome string) map[string]any {
	r := s.a2a
	if protocol == "MCP" {
		r = s.mcp
	}
	p := map[string]any{"protocol": strings.ToLower(protocol), "outcome": outcome, "at": time.Now().UTC().Format(time.RFC3339Nano)}
	if outcome == "accepted" {
		p["version"] = r.preferred
	} else {
		p["reason"], p["floor"] = "below-floor", r.floor
	}
	return p
}

func registerLegacy(c *steps.Catalog) {
	c.Given(`^the host holds tenant "([^"]*)"'s (accepted|refused) (A2A|MCP) record written before requested existed, (as a host event|on a run's log)$`, func(ctx context.Context, tenant, outcome, protocol, where string) error {
		w, s := steps.From(ctx), st(ctx)
		who, err := s.caller(tenant)
		if err != nil {
			return err
		}
		l := legacyState(ctx)
		p := s.legacyPayload(protocol, outcome)
		l.tenant, l.protocol = tenant, protocol
		l.payload, _ = json.Marshal(p)
		body := map[string]any{"payload": p}
		path := legacyRunSeam
		if where == "as a host event" {
			path = legacyHostEventSeam
			l.workspace = workspaceFor("legacy")
			body["workspaceId"] = l.workspace
			s.noteOwn(who, l.workspace)
		}
		b, _ := json.Marshal(body)
		r, err := w.Seam(ctx, http.MethodPost, path, b, http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + who.key}})
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK, "the host's legacy-record seam did not import the record: %s", r); err != nil {
			return err
		}
		var out struct {
			EventID string `json:"eventId"`
			RunID   string `json:"runId"`
		}
		_ = json.Unmarshal(r.Body, &out)
		l.eventID, l.runID = out.EventID, out.RunID
		if where == "as a host event" {
			return w.Assert(l.eventID != "", "the host's legacy-record seam named no eventId for the record it imported: %s", r)
		}
		return w.Assert(l.runID != "", "the host's legacy-record seam named no runId for the run it made: %s", r)
	})
	c.Then(`^that stream delivers the legacy record as it was written, without requested, before the record of an exchange tenant "([^"]*)" makes after it opened$`, func(ctx context.Context, tenant string) error {
		return legacyReplayed(ctx, tenant)
	})
	c.When(`^tenant "([^"]*)" polls that run's log$`, func(ctx context.Context, tenant string) error {
		w, s, l := steps.From(ctx), st(ctx), legacyState(ctx)
		if l.runID == "" {
			return steps.Fault("no legacy record was imported on a run's log")
		}
		key, err := s.key(tenant)
		if err != nil {
			return err
		}
		r, err := w.Fetch(ctx, http.MethodGet, "/runs/"+url.PathEscape(l.runID)+"/events/poll?after=0", nil, http.Header{"Authorization": {"Bearer " + key}, "Accept": {"application/json"}})
		if err != nil {
			return err
		}
		w.SetLast(r)
		l.polled = r
		return nil
	})
	c.Then(`^the log delivers the legacy record as it was written, without requested$`, func(ctx context.Context) error {
		w, l := steps.From(ctx), legacyState(ctx)
		r := l.polled
		if r == nil {
			return steps.Fault("the run's log was not polled")
		}
		if err := w.Assert(r.Status == http.StatusOK, "the log of a run holding a record written before requested existed was not read: %s", r); err != nil {
			return err
		}
		var body struct {
			Events []struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			return w.Assert(false, "the run's log is not {events, nextAfter}: %v: %s", err, r)
		}
		var got []string
		for _, ev := range body.Events {
			if ev.Type == typeNegotiationDecided {
				got = append(got, string(ev.Payload))
			}
		}
		if err := w.Assert(len(got) == 1, "the log of the run holding one record written before requested existed delivered %d negotiation.decided records: %s", len(got), r); err != nil {
			return err
		}
		return w.Assert(steps.JSONEqual([]byte(got[0]), l.payload), "the run's log delivered the record written before requested existed altered: written %s, read %s", l.payload, got[0])
	})
}

// legacyReplayed checks the stream the last new-subscription or resume step
// opened: it delivers the imported legacy record, once, with the payload
// exactly as written (no requested added), before the record of an
// exchange made after the stream opened, which shows it reads past it.
func legacyReplayed(ctx context.Context, tenant string) error {
	w, s, l := steps.From(ctx), st(ctx), legacyState(ctx)
	if l.eventID == "" || l.tenant != tenant {
		return steps.Fault("tenant %q had no legacy host event imported", tenant)
	}
	ts, err := s.extraStream()
	if err != nil {
		return err
	}
	ws, gotB, err := settleBarrier(ctx, ts, l.protocol)
	if err != nil {
		return err
	}
	where := "tenant " + tenant + "'s new subscription"
	if ts.lastEventID != "" {
		where = "tenant " + tenant + "'s stream resumed after " + ts.lastEventID
	}
	at := position(ts.seen, byIDOrWorkspace(l.eventID, l.workspace))
	b := position(ts.seen, carrying(ws))
	if at < 0 {
		return w.Assert(false, "%s did not deliver the record written before requested existed (eventId %s, workspace %s); it delivered %d frames, the record of an exchange made after it opened %s",
			where, l.eventID, l.workspace, len(ts.seen), map[bool]string{true: "among them", false: "not among them"}[gotB])
	}
	rec := ts.seen[at]
	p, _ := rec.env["payload"].(map[string]any)
	pb, _ := json.Marshal(p)
	if err := w.Assert(p != nil && steps.JSONEqual(pb, l.payload), "%s delivered the record written before requested existed altered: written %s, delivered %s", where, l.payload, rec.text()); err != nil {
		return err
	}
	if err := w.Assert(len(ts.records(l.workspace, l.eventID)) == 1, "%s delivered the record written before requested existed %d times", where, len(ts.records(l.workspace, l.eventID))); err != nil {
		return err
	}
	return w.Assert(gotB && b > at, "%s delivered the record written before requested existed, but not, after it within %s, the record of an exchange made after the stream opened (workspace %s): the stream did not read past it",
		where, recordWait, ws)
}
