// Package a2a is the suite's side of A2A: a fake A2A peer for outbound
// negotiations (the host is the client) and a client for inbound ones (the
// suite calls the host). The peer records what it was asked so a step can
// assert on the version the host requested.
package a2a

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parley-conformance/parley/peers/internal/wire"
)

// VersionHeader is the header an A2A caller names its version in.
const VersionHeader = "A2A-Version"

// Config shapes a fake peer. Versions decides whether a negotiation is
// accepted as asked, downgraded, or refused.
type Config struct {
	// Versions the peer speaks. Empty means {"1.0"}.
	Versions []string
	// RefuseUnsupported makes the peer answer 400 (JSON-RPC -32009) when it
	// does not speak the requested version, instead of offering another.
	RefuseUnsupported bool
}

// Exchange is one request the peer received.
type Exchange struct {
	Method string
	Path   string
	// Requested is the A2A-Version header; Named reports whether it was sent.
	Requested string
	Named     bool
	// Answered is the version the peer answered with; empty when it refused.
	Answered string
	At       time.Time
}

// Peer is a running fake A2A peer.
type Peer struct {
	srv *httptest.Server
	cfg Config

	mu       sync.Mutex
	received []Exchange
}

// maxPeerBody bounds what the peer reads from the host under test.
const maxPeerBody = 1 << 20

// Start starts a peer on a loopback port. Close it when done.
func Start(cfg Config) *Peer {
	if len(cfg.Versions) == 0 {
		cfg.Versions = []string{"1.0"}
	}
	cfg.Versions = slices.Clone(cfg.Versions)
	p := &Peer{cfg: cfg}
	p.srv = wire.StartServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the peer's base URL (its origin); pass it as the seam's peerUrl.
func (p *Peer) URL() string { return p.srv.URL }

// CardURL is where the peer serves its agent card.
func (p *Peer) CardURL() string { return p.srv.URL + "/.well-known/agent-card.json" }

// Digest is the peerDigest a host must record for this peer.
func (p *Peer) Digest() string { return wire.Digest(p.srv.URL) }

// Received returns a copy of every exchange so far, oldest first.
func (p *Peer) Received() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.received)
}

// LastRequested is the version named in the most recent exchange.
func (p *Peer) LastRequested() (version string, named bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.received) == 0 {
		return "", false
	}
	e := p.received[len(p.received)-1]
	return e.Requested, e.Named
}

// Close stops the peer.
func (p *Peer) Close() { p.srv.Close() }

func (p *Peer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		_, _ = wire.ReadLimited(r.Body, maxPeerBody)
	}
	vals := r.Header.Values(VersionHeader)
	ex := Exchange{Method: r.Method, Path: r.URL.Path, Named: len(vals) > 0, At: time.Now()}
	if ex.Named {
		ex.Requested = strings.TrimSpace(strings.Join(vals, ","))
	}
	answer, ok := wire.Choose(p.cfg.Versions, ex.Requested)
	if p.cfg.RefuseUnsupported && (!ex.Named || !slices.Contains(p.cfg.Versions, ex.Requested)) {
		ok = false
	}
	if ok {
		ex.Answered = answer
	}
	p.mu.Lock()
	p.received = append(p.received, ex)
	p.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"jsonrpc": "2.0", "id": nil,
			"error": map[string]any{"code": -32009, "message": "version not supported",
				"data": map[string]any{"supportedVersions": p.cfg.Versions}},
		})
		return
	}
	w.Header().Set(VersionHeader, answer)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"name":              "parley fake A2A peer",
		"url":               p.srv.URL,
		"protocolVersion":   answer,
		"supportedVersions": p.cfg.Versions,
		"capabilities":      map[string]bool{},
		"skills":            []any{},
	})
}
