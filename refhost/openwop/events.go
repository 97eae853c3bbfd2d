package openwop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// negotiationDecided is the closed payload of RFC 0242 (schema:
// schemas/openwop/negotiation-decided.payload.json).
type negotiationDecided struct {
	Protocol   string `json:"protocol"`
	Outcome    string `json:"outcome"`
	Version    string `json:"version,omitempty"`
	Requested  string `json:"requested,omitempty"`
	Floor      string `json:"floor,omitempty"`
	PeerDigest string `json:"peerDigest,omitempty"`
	Reason     string `json:"reason,omitempty"`
	At         string `json:"at"`
}

// hostEnvelope is one /host/events frame's data. It has no runId field at
// all, so no code path can put one there.
type hostEnvelope struct {
	EventID     string `json:"eventId"`
	Type        string `json:"type"`
	Timestamp   string `json:"timestamp"`
	Delivery    string `json:"delivery"`
	Payload     any    `json:"payload"`
	WorkspaceID string `json:"workspaceId,omitempty"`
}

// runEvent is one entry of a run's log, as /runs/{runId}/events/poll returns.
type runEvent struct {
	EventID   string `json:"eventId"`
	RunID     string `json:"runId"`
	Sequence  int64  `json:"sequence"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Payload   any    `json:"payload"`
}

// decided turns a decision into its payload. requested is recorded only when
// it is well formed: junk from a peer is refused as malformed, and copying it
// into the record would make the record itself invalid.
func (h *Host) decided(protocol, requested string, d decision, digest string) negotiationDecided {
	p := negotiationDecided{Protocol: protocol, PeerDigest: digest, At: h.now()}
	if validVersion(requested) {
		p.Requested = requested
	}
	if d.accepted {
		p.Outcome, p.Version = "accepted", d.version
	} else {
		p.Outcome, p.Reason, p.Floor = "refused", d.reason, d.floor
	}
	return p
}

// recordRunless stores a negotiation that belongs to no run as a durable host
// event of the caller's tenant. The caller must not complete the exchange if
// this fails: a negotiation without its record is exactly what RFC 0242 is
// there to rule out.
func (h *Host) recordRunless(ctx context.Context, c caller, p negotiationDecided) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	env := hostEnvelope{
		EventID: id.String(), Type: typeNegotiationDecided, Timestamp: p.At,
		Delivery: "durable", Payload: p, WorkspaceID: c.workspace,
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	ctx, cancel := recordContext(ctx)
	defer cancel()
	if err := h.store.appendHostEvent(ctx, env.EventID, c.tenant, c.workspace, env.Type, b); err != nil {
		return err
	}
	h.log.Info("negotiation recorded", "protocol", p.Protocol, "outcome", p.Outcome,
		"requested", p.Requested, "version", p.Version, "reason", p.Reason,
		"tenant", c.tenant, "attributed", c.tenant != "")
	return nil
}

// recordContext detaches a record write from the request: once a negotiation
// has been decided its record is written even if the caller hangs up.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// recordInRun appends a negotiation to its run's log.
func (h *Host) recordInRun(ctx context.Context, runID string, p negotiationDecided) error {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	return h.store.appendRunEvent(ctx, runID, func(seq int64) ([]byte, error) {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		return json.Marshal(runEvent{
			EventID: id.String(), RunID: runID, Sequence: seq,
			Type: typeNegotiationDecided, Timestamp: p.At, Payload: p,
		})
	})
}

// --- /host/events --------------------------------------------------------------

const sseBatch = 256

// serveHostEvents streams the caller's tenant's host events as SSE: replay
// after Last-Event-ID, then live events as they are appended, with keep-alive
// comments while idle.
func (h *Host) serveHostEvents(w http.ResponseWriter, r *http.Request) {
	tenant, err := h.authenticate(r)
	if err != nil || tenant == "" {
		unauthorized(w)
		return
	}
	if a := r.Header.Get("Accept"); a != "" && !acceptsEventStream(a) {
		writeError(w, http.StatusNotAcceptable, "not_acceptable", "this endpoint serves text/event-stream")
		return
	}
	if h.subscribers.Add(1) > int64(h.cfg.maxSubscribers) {
		h.subscribers.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_subscribers", "subscriber limit reached")
		return
	}
	defer h.subscribers.Add(-1)
	if !h.join() {
		writeError(w, http.StatusServiceUnavailable, "closing", "host is shutting down")
		return
	}
	defer h.streams.Done()
	draining := h.drainOf(r)

	ctx := r.Context()
	var cursor int64
	if last := strings.TrimSpace(r.Header.Get("Last-Event-ID")); last != "" {
		seq, ok, err := h.store.seqOf(ctx, tenant, last)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "store_error", "cannot resolve Last-Event-ID")
			return
		}
		// An unknown id replays from the start: duplicates are recoverable
		// by eventId, a silently skipped record is not.
		if ok {
			cursor = seq
		}
	}

	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering the stream
	w.WriteHeader(http.StatusOK)
	send := func(s string) error {
		if err := rc.SetWriteDeadline(time.Now().Add(h.cfg.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := io.WriteString(w, s); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := send(": openwop host events\n\n"); err != nil {
		return
	}

	keepAlive := time.NewTicker(h.cfg.keepAlive)
	defer keepAlive.Stop()
	for {
		// Take the wake-up channel before querying, so an append that lands
		// between the query and the wait is not missed.
		wake := h.store.waiter()
		evs, err := h.store.hostEventsAfter(ctx, tenant, cursor, sseBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Error("host events query failed", "err", err)
			}
			return
		}
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "event: %s\nid: %s\ndata: %s\n\n", e.typ, e.eventID, e.envelope)
			cursor = e.seq
		}
		if b.Len() > 0 {
			if err := send(b.String()); err != nil {
				return
			}
		}
		if len(evs) == sseBatch {
			continue
		}
		select {
		case <-wake:
		case <-keepAlive.C:
			if err := send(": keep-alive\n\n"); err != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-h.closing:
			return
		case <-draining:
			return
		}
	}
}

func acceptsEventStream(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/event-stream", "text/*", "*/*":
			return true
		}
	}
	return false
}

// --- discovery -----------------------------------------------------------------

// serveDiscovery publishes the inbound facets together with the host-event
// types, since RFC 0242 §B.3 ties the one to the other.
func (h *Host) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	base, ok := baseURL(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_host", "Host header is malformed")
		return
	}
	type facet struct {
		Versions         []string `json:"versions"`
		PreferredVersion string   `json:"preferredVersion"`
		Floor            string   `json:"floor"`
	}
	type hostEventType struct {
		Type     string `json:"type"`
		Delivery string `json:"delivery"`
	}
	doc := map[string]any{
		"openwop": "2",
		"a2a": struct {
			AgentCardURL string `json:"agentCardUrl"`
			EndpointURL  string `json:"endpointUrl"`
			facet
		}{base + agentCardPath, base + a2aRPCPath, facet{h.cfg.a2a.supported, h.cfg.a2a.preferred, h.cfg.a2a.floor}},
		"mcp": struct {
			ServerURLs  []string `json:"serverUrls"`
			ServerMount string   `json:"serverMount"`
			facet
		}{[]string{base + mcpMount}, mcpMount, facet{h.cfg.mcp.supported, h.cfg.mcp.preferred, h.cfg.mcp.floor}},
		"hostEvents": struct {
			URL   string          `json:"url"`
			Types []hostEventType `json:"types"`
		}{base + hostEventsURL, []hostEventType{{typeNegotiationDecided, "durable"}}},
		"runs": map[string]string{"eventsPollUrlTemplate": base + "/runs/{runId}/events/poll"},
	}
	writeJSON(w, http.StatusOK, doc)
}

// --- run log ---------------------------------------------------------------------

// serveRunPoll returns a run's events after a sequence number. Another
// tenant's run answers 404, exactly like a run that does not exist.
func (h *Host) serveRunPoll(w http.ResponseWriter, r *http.Request) {
	tenant, err := h.authenticate(r)
	if err != nil || tenant == "" {
		unauthorized(w)
		return
	}
	runID := r.PathValue("runId")
	owner, err := h.store.runTenant(r.Context(), runID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "cannot read run")
		return
	}
	if owner == "" || owner != tenant {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "bad_cursor", "after must be a non-negative integer")
			return
		}
		after = v
	}
	evs, last, err := h.store.runEventsAfter(r.Context(), runID, after, sseBatch)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "cannot read run events")
		return
	}
	raw := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		raw[i] = e
	}
	writeJSON(w, http.StatusOK, map[string]any{"runId": runID, "events": raw, "nextAfter": last})
}
