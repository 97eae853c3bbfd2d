package openwop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

// Host is one running OpenWOP host.
type Host struct {
	cfg   resolved
	env   hostenv.Env
	log   *slog.Logger
	store *store
	out   *http.Client

	sessions *mcpSessions

	subscribers atomic.Int64
	// streams counts open /host/events responses; lifeMu makes "not yet
	// closed, so join" atomic with respect to Close.
	lifeMu    sync.Mutex
	closed    bool
	streams   sync.WaitGroup
	closing   chan struct{}
	closeOnce sync.Once
	// drains holds, per http.Server serving event streams, a channel
	// closed when that server begins a graceful shutdown (drainOf).
	drainMu sync.Mutex
	drains  map[*http.Server]chan struct{}
}

// Paths are the URL patterns Handler serves, for a caller that mounts it on
// a shared mux beside other families.
var Paths = []string{
	"/.well-known/openwop", "/.well-known/agent-card.json",
	"/host/events", "/a2a", "/a2a/", "/mcp", "/runs/",
}

// SeamPrefix is where Seams must be mounted: OpenWOP fixes the invoke seam
// paths, so they do not live under a family-named prefix.
const SeamPrefix = "/conformance/seams/sample/"

// Open validates cfg, opens (or creates) the durable store in env.DataDir and
// returns a host ready to serve.
func Open(cfg Config, env hostenv.Env) (*Host, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	st, err := openStore(env.DataDir)
	if err != nil {
		return nil, err
	}
	h := &Host{
		cfg:      r,
		env:      env,
		log:      env.Log(),
		store:    st,
		sessions: newMCPSessions(r.maxMCPSessions),
		closing:  make(chan struct{}),
		drains:   map[*http.Server]chan struct{}{},
		out: &http.Client{
			Timeout: r.outboundTimeout,
			// A peer's redirect could point the host anywhere; the seam named
			// the peer, so the host talks to that peer only.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	return h, nil
}

// Close ends every open event stream, then closes the store. It is safe to
// call more than once.
func (h *Host) Close() error {
	var err error
	h.closeOnce.Do(func() {
		h.lifeMu.Lock()
		h.closed = true
		close(h.closing)
		h.lifeMu.Unlock()
		h.streams.Wait()
		h.out.CloseIdleConnections()
		err = h.store.close()
	})
	return err
}

// Handler serves the OpenWOP surface. Absolute URLs it advertises are built
// from each request's Host header, so the caller may bind any address.
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openwop", h.serveDiscovery)
	mux.HandleFunc("GET /host/events", h.serveHostEvents)
	mux.HandleFunc("GET "+agentCardPath, h.serveAgentCard)
	mux.HandleFunc("GET /.well-known/agent-card.json", h.serveAgentCard)
	mux.HandleFunc("POST "+a2aRPCPath, h.serveA2ARPC)
	mux.HandleFunc("POST "+mcpMount, h.serveMCP)
	mux.HandleFunc("DELETE "+mcpMount, h.serveMCPDelete)
	mux.HandleFunc("GET /runs/{runId}/events/poll", h.serveRunPoll)
	return mux
}

// Seams serves the test-only control endpoints under /conformance/seams/.
func (h *Host) Seams() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /conformance/seams/sample/a2a/invoke", h.seamA2AInvoke)
	mux.HandleFunc("POST /conformance/seams/sample/mcp/invoke", h.seamMCPInvoke)
	mux.HandleFunc("POST /conformance/seams/sample/legacy/host-event", h.seamLegacyHostEvent)
	mux.HandleFunc("POST /conformance/seams/sample/legacy/run", h.seamLegacyRun)
	return mux
}

const (
	agentCardPath = "/a2a/agent-card.json"
	a2aRPCPath    = "/a2a"
	mcpMount      = "/mcp"
	hostEventsURL = "/host/events"

	typeNegotiationDecided = "negotiation.decided"
	workspaceHeader        = "OpenWOP-Workspace-Id"
)

// --- callers and tenants ---------------------------------------------------

// caller is who an inbound request was attributed to. An empty tenant is an
// unauthenticated caller.
type caller struct {
	tenant    string
	workspace string
}

var errBadCredentials = errors.New("unknown or malformed credentials")

// authenticate attributes a request to a tenant by its bearer key. No
// Authorization header at all is an anonymous caller; a header that is
// present but wrong is an error, so a typo never silently becomes anonymous.
func (h *Host) authenticate(r *http.Request) (string, error) {
	v := r.Header.Values("Authorization")
	if len(v) == 0 {
		return "", nil
	}
	if len(v) > 1 {
		return "", errBadCredentials
	}
	scheme, key, ok := strings.Cut(strings.TrimSpace(v[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errBadCredentials
	}
	key = strings.TrimSpace(key)
	if t, ok := h.cfg.keys[key]; ok && key != "" {
		return t, nil
	}
	return "", errBadCredentials
}

var workspaceGrammar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// callerOf authenticates r and reads the workspace it names. It writes the
// error response itself and returns false when the request must stop.
func (h *Host) callerOf(w http.ResponseWriter, r *http.Request) (caller, bool) {
	t, err := h.authenticate(r)
	if err != nil {
		unauthorized(w)
		return caller{}, false
	}
	c := caller{tenant: t}
	if ws := r.Header.Get(workspaceHeader); ws != "" {
		if !workspaceGrammar.MatchString(ws) {
			writeError(w, http.StatusBadRequest, "invalid_workspace", "workspace id is malformed")
			return caller{}, false
		}
		// A workspace is a subdivision of a tenant; without a tenant it
		// cannot be checked and is ignored.
		if t != "" {
			c.workspace = ws
		}
	}
	return c, true
}

// --- URLs ------------------------------------------------------------------

var hostHeaderGrammar = regexp.MustCompile(`^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// baseURL is the origin the caller reached the host at. The scheme follows
// the connection itself: forwarding headers are caller-controlled and are not
// trusted.
func baseURL(r *http.Request) (string, bool) {
	if !hostHeaderGrammar.MatchString(r.Host) {
		return "", false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + strings.ToLower(r.Host), true
}

// peerDigest is the SHA-256 hex of a peer origin; the record identifies the
// peer without disclosing where it lives.
func peerDigest(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(sum[:])
}

// --- responses ---------------------------------------------------------------

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="openwop"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer API key is required")
}

// readBody reads a bounded JSON body into v.
func (h *Host) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, h.cfg.maxBody)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "request body exceeds the host's limit")
		} else {
			writeError(w, http.StatusBadRequest, "bad_request", "body is not valid JSON")
		}
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad_request", "body holds more than one JSON value")
		return false
	}
	return true
}

// drainOf returns a channel closed when the http.Server serving r begins a
// graceful shutdown (nil when r names no server). http.Server.Shutdown
// waits for every active request, and an event stream stays active until
// its subscriber leaves, so without this a clean stop would wait out its
// deadline and then cut the connections anyway; ending the streams between
// frames lets the shutdown finish at once, and a subscriber resumes with
// Last-Event-ID.
func (h *Host) drainOf(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	h.drainMu.Lock()
	defer h.drainMu.Unlock()
	if ch, ok := h.drains[srv]; ok {
		return ch
	}
	ch := make(chan struct{})
	h.drains[srv] = ch
	srv.RegisterOnShutdown(func() {
		h.drainMu.Lock()
		delete(h.drains, srv)
		h.drainMu.Unlock()
		close(ch)
	})
	return ch
}

// join registers an open stream unless the host is closing.
func (h *Host) join() bool {
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	if h.closed {
		return false
	}
	h.streams.Add(1)
	return true
}

func (h *Host) now() string { return h.env.Clock().UTC().Format(time.RFC3339Nano) }
