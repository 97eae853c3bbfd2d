package openwop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/steps"
)

// The outbound invoke seams (OpenWOP's sample seams; their paths are fixed).
var seamPath = map[string]string{
	"A2A": "/conformance/seams/sample/a2a/invoke",
	"MCP": "/conformance/seams/sample/mcp/invoke",
}

// seamCall is one outbound negotiation the suite had the host make.
type seamCall struct {
	protocol string // A2A or MCP
	tenant   string
	status   int
	answer   map[string]any
	runID    string
	resp     *steps.Response
}

func registerOutbound(c *steps.Catalog) {
	startPeer := func(ctx context.Context, protocol, versions string, refuse bool) error {
		s := st(ctx)
		vs := splitCSV(versions)
		if len(vs) == 0 {
			return steps.Fault("a fake peer needs at least one version")
		}
		w := steps.From(ctx)
		if err := w.CallsBack(); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.peer != nil || s.server != nil {
			return steps.Fault("one fake peer per scenario")
		}
		switch protocol {
		case "A2A":
			p := a2a.Start(a2a.Config{Versions: vs, RefuseUnsupported: refuse})
			s.peer = p
			w.Cleanup(p.Close)
		case "MCP":
			p := mcp.Start(mcp.Config{Versions: vs, RefuseUnsupported: refuse})
			s.server = p
			w.Cleanup(p.Close)
		}
		return nil
	}
	c.Given(`^a fake (A2A|MCP) peer that speaks "([^"]*)"$`, func(ctx context.Context, protocol, versions string) error {
		return startPeer(ctx, protocol, versions, false)
	})
	c.Given(`^a fake (A2A|MCP) peer that speaks "([^"]*)" and refuses any other version$`, func(ctx context.Context, protocol, versions string) error {
		return startPeer(ctx, protocol, versions, true)
	})
	c.When(`^tenant "([^"]*)" has the host negotiate (A2A|MCP) with that peer asking for "([^"]*)"$`, func(ctx context.Context, tenant, protocol, version string) error {
		return invoke(ctx, tenant, protocol, version)
	})
	c.When(`^tenant "([^"]*)" has the host negotiate (A2A|MCP) with that peer without naming a version$`, func(ctx context.Context, tenant, protocol string) error {
		return invoke(ctx, tenant, protocol, "")
	})
	c.Then(`^the peer was asked for "([^"]*)"$`, func(ctx context.Context, want string) error {
		w := steps.From(ctx)
		got, err := peerAsked(ctx)
		if err != nil {
			return err
		}
		return w.Assert(got == want, "the host asked the peer for %q, the scenario had it ask for %q", got, want)
	})
	c.Then(`^the peer was asked for a version$`, func(ctx context.Context) error {
		_, err := peerAsked(ctx)
		return err
	})
	c.Then(`^the host reports the negotiated version "([^"]*)"$`, func(ctx context.Context, want string) error {
		w, s := steps.From(ctx), st(ctx)
		c, err := s.lastSeam()
		if err != nil {
			return err
		}
		got, _ := c.answer["negotiatedVersion"].(string)
		return w.Assert(c.status == http.StatusOK && got == want, "the seam answered %d %s, want 200 with negotiatedVersion %q", c.status, steps.Text(c.answer), want)
	})
	c.Then(`^the host reports the negotiation refused$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		c, err := s.lastSeam()
		if err != nil {
			return err
		}
		return w.Assert(c.status == http.StatusBadRequest && c.answer["error"] == "interop_version_unsupported",
			"the seam answered %d %s, want 400 with error interop_version_unsupported", c.status, steps.Text(c.answer))
	})
	c.Then(`^the run's log holds exactly one negotiation\.decided record$`, func(ctx context.Context) error {
		return runRecord(ctx)
	})
}

func (s *state) lastSeam() (*seamCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seam == nil {
		return nil, steps.Fault("no outbound negotiation was driven")
	}
	return s.seam, nil
}

// invoke drives one outbound negotiation through the seam, as tenant, with
// the scenario's fake peer. An empty version leaves the choice to the host.
func invoke(ctx context.Context, tenant, protocol, version string) error {
	w, s := steps.From(ctx), st(ctx)
	key, err := s.key(tenant)
	if err != nil {
		return err
	}
	s.mu.Lock()
	body := map[string]any{}
	switch {
	case protocol == "A2A" && s.peer != nil:
		body["peerUrl"] = s.peer.URL()
	case protocol == "MCP" && s.server != nil:
		body["serverUrl"] = s.server.URL()
	default:
		s.mu.Unlock()
		return steps.Fault("no fake %s peer was started", protocol)
	}
	s.mu.Unlock()
	if version != "" {
		body["requestVersion"] = version
	}
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	if !h.Config.Seams() {
		return steps.Fault("driving an outbound negotiation needs \"the outbound negotiation seams are enabled\" among the Given steps")
	}
	raw, _ := json.Marshal(body)
	r, err := w.Seam(ctx, http.MethodPost, seamPath[protocol], raw, http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	answer, err := r.JSON()
	if err != nil {
		return err
	}
	runID, _ := answer["runId"].(string)
	if err := w.Assert(runID != "", "the seam's answer names no runId, so the record cannot be read back: %s", r); err != nil {
		return err
	}
	s.mu.Lock()
	s.seam = &seamCall{protocol: protocol, tenant: tenant, status: r.Status, answer: answer, runID: runID, resp: r}
	s.mu.Unlock()
	return nil
}

// peerAsked is the version the host named in its first request to the fake
// peer: the A2A-Version header, or initialize's params.protocolVersion. What
// the fake received is an observation of the host.
func peerAsked(ctx context.Context) (string, error) {
	w, s := steps.From(ctx), st(ctx)
	s.mu.Lock()
	peer, server := s.peer, s.server
	s.mu.Unlock()
	switch {
	case peer != nil:
		got := peer.Received()
		w.Observe(nil)
		if err := w.Assert(len(got) > 0, "the host never contacted the A2A peer; the seam answered %s", lastSeamText(s)); err != nil {
			return "", err
		}
		first := got[0]
		return first.Requested, w.Assert(first.Named && first.Requested != "", "the host's request to the A2A peer (%s %s) named no version in A2A-Version", first.Method, first.Path)
	case server != nil:
		init, ok := server.LastInitialize()
		w.Observe(nil)
		if err := w.Assert(ok, "the host never sent initialize to the MCP server; the seam answered %s", lastSeamText(s)); err != nil {
			return "", err
		}
		return init.Requested, w.Assert(init.Requested != "", "the host's initialize named no protocolVersion")
	}
	return "", steps.Fault("no fake peer was started")
}

// peerAnswered is the version the fake peer answered the host's first
// request with, "" when it refused. A host that never contacted the peer
// fails here.
func peerAnswered(ctx context.Context) (string, error) {
	w, s := steps.From(ctx), st(ctx)
	s.mu.Lock()
	peer, server := s.peer, s.server
	s.mu.Unlock()
	switch {
	case peer != nil:
		got := peer.Received()
		w.Observe(nil)
		if len(got) == 0 {
			return "", steps.Fail("the host never contacted the A2A peer; the seam answered %s", lastSeamText(s))
		}
		return got[0].Answered, nil
	case server != nil:
		init, ok := server.LastInitialize()
		w.Observe(nil)
		if !ok {
			return "", steps.Fail("the host never sent initialize to the MCP server; the seam answered %s", lastSeamText(s))
		}
		return init.Answered, nil
	}
	return "", steps.Fault("no fake peer was started")
}

// lastSeamText is the seam's answer, for a failure message.
func lastSeamText(s *state) string {
	c, err := s.lastSeam()
	if err != nil {
		return "nothing (no outbound negotiation was driven)"
	}
	return c.resp.String()
}

// peerOrigin is the fake peer's origin, which the host may record only as
// its digest.
func peerOrigin(ctx context.Context) (origin, digest string, err error) {
	s := st(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.peer != nil:
		return s.peer.URL(), s.peer.Digest(), nil
	case s.server != nil:
		u, err := url.Parse(s.server.URL())
		if err != nil {
			return "", "", steps.Fault("the fake MCP server's URL %q does not parse: %v", s.server.URL(), err)
		}
		return u.Scheme + "://" + u.Host, s.server.Digest(), nil
	}
	return "", "", steps.Fault("no fake peer was started")
}

// maxPollPages bounds how far the suite follows a run's log.
const maxPollPages = 20

// runRecord reads the seam run's log through the normative poll surface and
// keeps its one negotiation.decided record as "that record".
func runRecord(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	c, err := s.lastSeam()
	if err != nil {
		return err
	}
	key, err := s.key(c.tenant)
	if err != nil {
		return err
	}
	var found []*record
	after := "0"
	for page := 0; ; page++ {
		if page == maxPollPages {
			return w.Assert(false, "the run's log did not end after %d pages", maxPollPages)
		}
		path := "/runs/" + url.PathEscape(c.runID) + "/events/poll?after=" + url.QueryEscape(after)
		r, err := w.Fetch(ctx, http.MethodGet, path, nil, http.Header{"Authorization": {"Bearer " + key}, "Accept": {"application/json"}})
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == http.StatusOK, "reading the run's log: %s", r); err != nil {
			return err
		}
		var body struct {
			Events    []json.RawMessage `json:"events"`
			NextAfter json.Number       `json:"nextAfter"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			return w.Assert(false, "the run's log is not {events, nextAfter}: %v: %s", err, r)
		}
		for _, raw := range body.Events {
			var ev struct {
				RunID   string          `json:"runId"`
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil {
				return w.Assert(false, "a run event is not an object: %v: %s", err, raw)
			}
			// The poll is for one run, but the suite checks each event's run
			// itself rather than trusting the host's filter.
			if ev.Type != typeNegotiationDecided {
				continue
			}
			if err := w.Assert(ev.RunID == c.runID, "the log of run %s returned an event of run %q: %s", c.runID, ev.RunID, raw); err != nil {
				return err
			}
			rec, err := newRecord("the run's log", ev.Payload)
			if err != nil {
				return w.Assert(false, "%v", err)
			}
			found = append(found, rec)
		}
		next := body.NextAfter.String()
		if len(body.Events) == 0 || next == after || next == "" {
			break
		}
		if _, err := strconv.ParseInt(next, 10, 64); err != nil {
			return w.Assert(false, "the run's log answered nextAfter %q, not a sequence number", next)
		}
		after = next
	}
	if err := w.Assert(len(found) == 1, "run %s holds %d negotiation.decided records, want exactly one", c.runID, len(found)); err != nil {
		return err
	}
	s.mu.Lock()
	s.record = found[0]
	s.mu.Unlock()
	return nil
}
