package openwop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// --- A2A ----------------------------------------------------------------------

// requestedA2A reads the version an A2A caller named. Repeated headers that
// disagree are a conflict rather than a guess at which one was meant.
func requestedA2A(r *http.Request) (string, bool) {
	var got string
	for _, v := range r.Header.Values("A2A-Version") {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if got != "" && got != part {
				return got, false
			}
			got = part
		}
	}
	return got, true
}

// negotiateA2A decides and records one inbound A2A negotiation. It returns
// false after writing a 5xx when the record could not be stored.
func (h *Host) negotiateA2A(w http.ResponseWriter, r *http.Request, c caller) (decision, string, bool) {
	requested, consistent := requestedA2A(r)
	d := h.cfg.a2a.answer(requested, c.tenant != "")
	if !consistent {
		d = h.cfg.a2a.refuse(reasonConflict)
	}
	if err := h.recordRunless(r.Context(), c, h.decided("a2a", requested, d, "")); err != nil {
		h.log.Error("recording inbound a2a negotiation failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "record_failed", "the negotiation could not be recorded")
		return d, requested, false
	}
	return d, requested, true
}

type versionRefusal struct {
	Error             string   `json:"error"`
	Reason            string   `json:"reason"`
	Requested         string   `json:"requested,omitempty"`
	Floor             string   `json:"floor,omitempty"`
	SupportedVersions []string `json:"supportedVersions"`
}

// serveAgentCard is the A2A negotiation point: a peer fetching the card
// names its version, and the card answers in the version the host chose.
func (h *Host) serveAgentCard(w http.ResponseWriter, r *http.Request) {
	base, ok := baseURL(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_host", "Host header is malformed")
		return
	}
	c, ok := h.callerOf(w, r)
	if !ok {
		return
	}
	d, requested, ok := h.negotiateA2A(w, r, c)
	if !ok {
		return
	}
	if !d.accepted {
		writeJSON(w, http.StatusBadRequest, versionRefusal{
			Error: "interop_version_unsupported", Reason: d.reason, Requested: printable(requested),
			Floor: d.floor, SupportedVersions: h.cfg.a2a.supported,
		})
		return
	}
	w.Header().Set("A2A-Version", d.version)
	writeJSON(w, http.StatusOK, map[string]any{
		"name":               "parley OpenWOP reference host",
		"description":        "Reference host for OpenWOP RFC 0242 negotiation records.",
		"url":                base + a2aRPCPath,
		"protocolVersion":    d.version,
		"supportedVersions":  h.cfg.a2a.supported,
		"preferredTransport": "JSONRPC",
		"capabilities":       map[string]bool{"streaming": false, "pushNotifications": false},
		"defaultInputModes":  []string{"text/plain"},
		"defaultOutputModes": []string{"text/plain"},
		"skills": []map[string]any{{
			"id": "echo", "name": "echo", "description": "Returns the text it was sent.", "tags": []string{"test"},
		}},
	})
}

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *rpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if e != nil {
		resp["error"] = e
	} else {
		resp["result"] = result
	}
	writeJSON(w, http.StatusOK, resp)
}

// A2A's JSON-RPC code for an unsupported version.
const a2aVersionNotSupported = -32009

// serveA2ARPC is the A2A JSON-RPC endpoint. Every request names its version,
// so every request is a negotiation and is recorded as one.
func (h *Host) serveA2ARPC(w http.ResponseWriter, r *http.Request) {
	c, ok := h.callerOf(w, r)
	if !ok {
		return
	}
	var req rpcRequest
	if !h.readBody(w, r, &req) {
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		writeRPC(w, req.ID, nil, &rpcError{Code: -32600, Message: "invalid request"})
		return
	}
	d, requested, ok := h.negotiateA2A(w, r, c)
	if !ok {
		return
	}
	if !d.accepted {
		writeRPC(w, req.ID, nil, &rpcError{Code: a2aVersionNotSupported, Message: "version not supported",
			Data: versionRefusal{Error: "interop_version_unsupported", Reason: d.reason, Requested: printable(requested),
				Floor: d.floor, SupportedVersions: h.cfg.a2a.supported}})
		return
	}
	w.Header().Set("A2A-Version", d.version)
	switch req.Method {
	case "message/send", "SendMessage":
		var p struct {
			Message json.RawMessage `json:"message"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil || len(p.Message) == 0 {
			writeRPC(w, req.ID, nil, &rpcError{Code: -32602, Message: "params.message is required"})
			return
		}
		// The echo skill: the reply is the message that was sent.
		writeRPC(w, req.ID, map[string]any{"kind": "message", "role": "agent", "echo": p.Message}, nil)
	default:
		writeRPC(w, req.ID, nil, &rpcError{Code: -32601, Message: "method not found"})
	}
}

// printable keeps a peer-supplied version out of responses unless it is well
// formed, so the host never reflects arbitrary bytes.
func printable(v string) string {
	if validVersion(v) {
		return v
	}
	return ""
}

// --- MCP ------------------------------------------------------------------------

// mcpSession is what an accepted initialize leaves behind: later requests
// must come from the same tenant and speak the negotiated revision.
type mcpSession struct {
	tenant  string
	version string
}

type mcpSessions struct {
	mu    sync.Mutex
	max   int
	byID  map[string]mcpSession
	order []string // creation order, for evicting the oldest at the cap
}

func newMCPSessions(max int) *mcpSessions {
	return &mcpSessions{max: max, byID: map[string]mcpSession{}}
}

func (s *mcpSessions) add(sess mcpSession) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.byID) >= s.max && len(s.order) > 0 {
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
	s.byID[id] = sess
	s.order = append(s.order, id)
	return id
}

func (s *mcpSessions) get(id string) (mcpSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	return v, ok
}

func (s *mcpSessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
	for i, v := range s.order {
		if v == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

const (
	mcpSessionHeader = "Mcp-Session-Id"
	mcpVersionHeader = "MCP-Protocol-Version"
)

// serveMCP is a Streamable-HTTP MCP server endpoint answering in JSON.
// initialize is the negotiation and is recorded; everything after it runs in
// the session it created.
func (h *Host) serveMCP(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "origin_forbidden", "cross-origin MCP requests are not accepted")
		return
	}
	c, ok := h.callerOf(w, r)
	if !ok {
		return
	}
	var req rpcRequest
	if !h.readBody(w, r, &req) {
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		writeRPC(w, req.ID, nil, &rpcError{Code: -32600, Message: "invalid request"})
		return
	}
	if req.Method == "initialize" {
		h.mcpInitialize(w, r, c, req)
		return
	}
	sid := r.Header.Get(mcpSessionHeader)
	if sid == "" {
		writeError(w, http.StatusBadRequest, "session_required", "initialize first, then send "+mcpSessionHeader)
		return
	}
	sess, ok := h.sessions.get(sid)
	if !ok || sess.tenant != c.tenant {
		writeError(w, http.StatusNotFound, "session_not_found", "unknown or expired session")
		return
	}
	if v := r.Header.Get(mcpVersionHeader); v != "" && v != sess.version {
		writeError(w, http.StatusBadRequest, "version_mismatch", "MCP-Protocol-Version differs from the negotiated revision")
		return
	}
	if len(req.ID) == 0 || string(req.ID) == "null" { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch req.Method {
	case "ping":
		writeRPC(w, req.ID, map[string]any{}, nil)
	case "tools/list":
		writeRPC(w, req.ID, map[string]any{"tools": []any{}}, nil)
	default:
		writeRPC(w, req.ID, nil, &rpcError{Code: -32601, Message: "method not found"})
	}
}

// sameOrigin guards the MCP endpoint against DNS rebinding: a browser-sent
// Origin must name the host the request reached. Non-browser clients send no
// Origin and are unaffected.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func (h *Host) mcpInitialize(w http.ResponseWriter, r *http.Request, c caller, req rpcRequest) {
	var p struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &p)
	// The revision a client asks for is initialize's protocolVersion: the
	// MCP-Protocol-Version header belongs to the requests that follow
	// initialization, so on initialize it is only a fallback for a client
	// that named nothing in params, never a second opinion that overrides
	// or conflicts with them.
	var requested string
	named := json.Unmarshal(p.ProtocolVersion, &requested) == nil && requested != ""
	if !named {
		requested = strings.TrimSpace(r.Header.Get(mcpVersionHeader))
	}
	d := h.cfg.mcp.answer(requested, c.tenant != "")
	if err := h.recordRunless(r.Context(), c, h.decided("mcp", requested, d, "")); err != nil {
		h.log.Error("recording inbound mcp negotiation failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "record_failed", "the negotiation could not be recorded")
		return
	}
	if !d.accepted {
		data := map[string]any{"supported": h.cfg.mcp.supported, "reason": d.reason}
		if v := printable(requested); v != "" {
			data["requested"] = v
		}
		if d.floor != "" {
			data["floor"] = d.floor
		}
		writeRPC(w, req.ID, nil, &rpcError{Code: -32602, Message: "Unsupported protocol version", Data: data})
		return
	}
	w.Header().Set(mcpSessionHeader, h.sessions.add(mcpSession{tenant: c.tenant, version: d.version}))
	writeRPC(w, req.ID, map[string]any{
		"protocolVersion": d.version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]string{"name": "parley-openwop-refhost", "version": "1"},
	}, nil)
}

func (h *Host) serveMCPDelete(w http.ResponseWriter, r *http.Request) {
	c, ok := h.callerOf(w, r)
	if !ok {
		return
	}
	sid := r.Header.Get(mcpSessionHeader)
	if sess, ok := h.sessions.get(sid); !ok || sess.tenant != c.tenant {
		writeError(w, http.StatusNotFound, "session_not_found", "unknown or expired session")
		return
	}
	h.sessions.remove(sid)
	w.WriteHeader(http.StatusNoContent)
}
