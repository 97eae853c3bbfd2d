// Package mcp is the suite's side of MCP: a fake MCP server for outbound
// negotiations (the host is the client) and a client for inbound ones (the
// suite initializes against the host). The server records every initialize
// so a step can assert on the revision the host requested.
package mcp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/parley-conformance/parley/peers/internal/wire"
)

// Header names of the Streamable HTTP transport.
const (
	VersionHeader = "MCP-Protocol-Version"
	SessionHeader = "Mcp-Session-Id"
)

// Config shapes a fake server.
type Config struct {
	// Versions (revisions) the server speaks. Empty means {"2025-06-18"}.
	Versions []string
	// RefuseUnsupported makes initialize fail with JSON-RPC -32602 when the
	// requested revision is not spoken, instead of offering another.
	RefuseUnsupported bool
	// EventStream makes the server answer initialize as an SSE stream, as a
	// Streamable HTTP server may.
	EventStream bool
}

// Exchange is one JSON-RPC message the server received.
type Exchange struct {
	Method string
	// Requested is initialize's params.protocolVersion.
	Requested string
	// Header is the MCP-Protocol-Version header, if any.
	Header    string
	SessionID string
	// Answered is the revision initialize answered; empty when refused.
	Answered string
	At       time.Time
}

// Server is a running fake MCP server.
type Server struct {
	srv *httptest.Server
	cfg Config

	mu       sync.Mutex
	received []Exchange
}

const maxServerBody = 1 << 20

// Start starts a server on a loopback port; its endpoint is URL().
func Start(cfg Config) *Server {
	if len(cfg.Versions) == 0 {
		cfg.Versions = []string{"2025-06-18"}
	}
	cfg.Versions = slices.Clone(cfg.Versions)
	s := &Server{cfg: cfg}
	s.srv = wire.StartServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the MCP endpoint; pass it as the seam's serverUrl.
func (s *Server) URL() string { return s.srv.URL + "/mcp" }

// Digest is the peerDigest a host must record for this server (its origin).
func (s *Server) Digest() string { return wire.Digest(s.srv.URL) }

// Received returns a copy of every message so far, oldest first.
func (s *Server) Received() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// LastInitialize returns the most recent initialize, if any.
func (s *Server) LastInitialize() (Exchange, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.received) - 1; i >= 0; i-- {
		if s.received[i].Method == "initialize" {
			return s.received[i], true
		}
	}
	return Exchange{}, false
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := wire.ReadLimited(r.Body, maxServerBody)
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ex := Exchange{Method: msg.Method, Header: r.Header.Get(VersionHeader),
		SessionID: r.Header.Get(SessionHeader), At: time.Now()}
	if msg.Method != "initialize" {
		s.record(ex)
		if len(msg.ID) == 0 || string(msg.ID) == "null" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		s.reply(w, msg.ID, map[string]any{}, nil)
		return
	}
	ex.Requested = msg.Params.ProtocolVersion
	answer, ok := wire.Choose(s.cfg.Versions, ex.Requested)
	if s.cfg.RefuseUnsupported && !slices.Contains(s.cfg.Versions, ex.Requested) {
		ok = false
	}
	if !ok {
		s.record(ex)
		s.reply(w, msg.ID, nil, map[string]any{"code": -32602, "message": "Unsupported protocol version",
			"data": map[string]any{"supported": s.cfg.Versions, "requested": ex.Requested}})
		return
	}
	ex.Answered = answer
	s.record(ex)
	var sid [16]byte
	_, _ = rand.Read(sid[:])
	w.Header().Set(SessionHeader, hex.EncodeToString(sid[:]))
	s.reply(w, msg.ID, map[string]any{
		"protocolVersion": answer,
		"capabilities":    map[string]any{},
		"serverInfo":      map[string]string{"name": "parley-fake-mcp", "version": "1"},
	}, nil)
}

func (s *Server) record(ex Exchange) {
	s.mu.Lock()
	s.received = append(s.received, ex)
	s.mu.Unlock()
}

func (s *Server) reply(w http.ResponseWriter, id json.RawMessage, result any, rpcErr any) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		resp["error"] = rpcErr
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	if s.cfg.EventStream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(": stream\n\nevent: message\ndata: " + string(b) + "\n\n"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
