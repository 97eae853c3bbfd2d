package contractrefine

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

var reasonShape = regexp.MustCompile(`^contract: [a-z0-9_]+$`)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type harness struct {
	t     *testing.T
	h     *Host
	dir   string
	clock *clock
	logs  *syncBuffer
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	return openHarness(t, cfg, t.TempDir(), &clock{t: time.Date(2026, 6, 12, 12, 0, 0, 0, time.UTC)})
}

func openHarness(t *testing.T, cfg Config, dir string, c *clock) *harness {
	t.Helper()
	logs := &syncBuffer{}
	env := hostenv.Env{
		DataDir: dir,
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:     c.Now,
	}
	h, err := Open(cfg, env)
	must(t).NoError(err)
	t.Cleanup(func() { _ = h.Close() })
	return &harness{t: t, h: h, dir: dir, clock: c, logs: logs}
}

// reopen closes the host and opens a new one on the same directory.
func (hs *harness) reopen(cfg Config) *harness {
	hs.t.Helper()
	must(hs.t).NoError(hs.h.Close())
	return openHarness(hs.t, cfg, hs.dir, hs.clock)
}

func (hs *harness) do(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	if strings.HasPrefix(path, SeamPrefix) {
		hs.h.Seams().ServeHTTP(w, r)
	} else {
		hs.h.Handler().ServeHTTP(w, r)
	}
	return w
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t).NoError(err)
	return string(b)
}

// post sends a preflight request; on 200 it decodes the decision.
func (hs *harness) post(req PreflightRequest) (*httptest.ResponseRecorder, PreflightDecision) {
	hs.t.Helper()
	w := hs.do(http.MethodPost, "/v1/preflight", mustJSON(hs.t, req))
	var d PreflightDecision
	if w.Code == http.StatusOK {
		must(hs.t).NoError(json.Unmarshal(w.Body.Bytes(), &d))
	}
	return w, d
}

func (hs *harness) mustPost(req PreflightRequest) PreflightDecision {
	hs.t.Helper()
	w, d := hs.post(req)
	must(hs.t).Equal(http.StatusOK, w.Code, w.Body.String())
	return d
}

// frames reads frames through the seam, as the suite does.
func (hs *harness) frames(query string) []rawFrame {
	hs.t.Helper()
	w := hs.do(http.MethodGet, SeamPrefix+"wal?"+query, "")
	must(hs.t).Equal(http.StatusOK, w.Code, w.Body.String())
	var body struct {
		Frames []rawFrame `json:"frames"`
	}
	must(hs.t).NoError(json.Unmarshal(w.Body.Bytes(), &body))
	return body.Frames
}

// goodRequest is the spec's example request: it passes every contract.
func goodRequest(session string) PreflightRequest {
	return PreflightRequest{
		Intent:     Intent{Kind: "mission.start", Description: "audit-only", PlanHash: "blake3:plan-" + session},
		Actor:      Actor{NodeID: "node-a", AgentID: "agent-1", SessionID: session},
		Capability: "tool.echo",
		Plan: []PlanStep{{
			Kind:       "tool.echo",
			Params:     map[string]json.RawMessage{"text": json.RawMessage(`"hi"`)},
			Provenance: map[string]Provenance{"text": {Source: "operator"}},
		}},
		Context: PlanContext{Zone: "default", Environment: "edge", RollbackContract: "rb-prepared-1", ExpectedEvidence: []string{"audit_id"}},
	}
}

func ptr[T any](v T) *T { return &v }
