package openwop

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/google/uuid"
)

// seamInvoke is the body of both outbound seams; the A2A seam names the peer
// peerUrl, the MCP one serverUrl.
type seamInvoke struct {
	PeerURL        string `json:"peerUrl"`
	ServerURL      string `json:"serverUrl"`
	RequestVersion string `json:"requestVersion"`
}

type seamAnswer struct {
	NegotiatedVersion string `json:"negotiatedVersion"`
	Protocol          string `json:"protocol"`
	RunID             string `json:"runId"`
	PeerDigest        string `json:"peerDigest"`
}

type seamRefusal struct {
	Error      string `json:"error"`
	Reason     string `json:"reason"`
	Protocol   string `json:"protocol"`
	RunID      string `json:"runId"`
	PeerDigest string `json:"peerDigest"`
	Floor      string `json:"floor,omitempty"`
}

func (h *Host) seamA2AInvoke(w http.ResponseWriter, r *http.Request) {
	h.seamInvoke(w, r, "a2a", h.cfg.a2a, func(in seamInvoke) string { return in.PeerURL },
		func(ctx context.Context, u *url.URL, v string) (string, error) {
			return h.negotiateA2AOutbound(ctx, u, v)
		})
}

func (h *Host) seamMCPInvoke(w http.ResponseWriter, r *http.Request) {
	acceptable := func(v string) bool { return h.cfg.mcp.check(v).accepted }
	h.seamInvoke(w, r, "mcp", h.cfg.mcp, func(in seamInvoke) string { return in.ServerURL },
		func(ctx context.Context, u *url.URL, v string) (string, error) {
			return h.negotiateMCPOutbound(ctx, u, v, acceptable)
		})
}

// seamInvoke starts a run whose only step is one outbound negotiation, and
// records the outcome on that run's log (RFC 0242 §B.1). The run belongs to
// the tenant of the seam caller's key, so the suite reads the record back
// through the ordinary poll endpoint.
func (h *Host) seamInvoke(w http.ResponseWriter, r *http.Request, protocol string, pol versionPolicy,
	target func(seamInvoke) string, exchange func(context.Context, *url.URL, string) (string, error)) {
	tenant, err := h.authenticate(r)
	if err != nil || tenant == "" {
		unauthorized(w)
		return
	}
	var in seamInvoke
	if !h.readBody(w, r, &in) {
		return
	}
	peer, origin, err := peerOrigin(target(in))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "peer URL: "+err.Error())
		return
	}
	requested := in.RequestVersion
	if requested == "" {
		requested = pol.preferred
	}
	if !validVersion(requested) {
		writeError(w, http.StatusBadRequest, "bad_request", "requestVersion is malformed")
		return
	}
	digest := peerDigest(origin)
	runID := uuid.NewString()
	ctx := r.Context()
	if err := h.store.createRun(ctx, runID, tenant, h.now()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_error", "cannot create run")
		return
	}

	// The host only asks for what it could itself speak; anything else is
	// refused before the peer is contacted, and still recorded.
	d := pol.check(requested)
	if d.accepted {
		octx, cancel := context.WithTimeout(ctx, h.cfg.outboundTimeout)
		answered, err := exchange(octx, peer, requested)
		cancel()
		var refusal *peerRefusal
		switch {
		case errors.As(err, &refusal):
			d = pol.refuse(reasonPeerRefused)
		case err != nil:
			h.log.Warn("outbound negotiation failed", "protocol", protocol, "peerDigest", digest, "err", err)
			d = pol.refuse(reasonPeerUnreadable)
		default:
			d = pol.check(answered)
		}
	}
	p := h.decided(protocol, requested, d, digest)
	if err := h.recordInRun(ctx, runID, p); err != nil {
		h.log.Error("recording outbound negotiation failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "record_failed", "the negotiation could not be recorded")
		return
	}
	if !d.accepted {
		status := http.StatusBadRequest
		code := "interop_version_unsupported"
		if d.reason == reasonPeerUnreadable {
			status, code = http.StatusBadGateway, "peer_unreachable"
		}
		writeJSON(w, status, seamRefusal{Error: code, Reason: d.reason, Protocol: protocol,
			RunID: runID, PeerDigest: digest, Floor: d.floor})
		return
	}
	writeJSON(w, http.StatusOK, seamAnswer{NegotiatedVersion: d.version, Protocol: protocol, RunID: runID, PeerDigest: digest})
}
