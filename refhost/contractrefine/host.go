// Package contractrefine is the reference host for the ContractRefine
// preflight specification: POST/GET /v1/preflight behind the mode ladder,
// a verifier with blocking and repairable contracts and a bounded repair
// ladder, an fsync'd append-only WAL of autonomy.* frames, and /v1/tool with
// preflight binding consumption. docs/contractrefine-host.md describes the
// wire surface, the seams, and the interpretations this host makes.
package contractrefine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

// MaxBodyBytes bounds every request body; larger bodies get 413.
const MaxBodyBytes = 1 << 20

// Host is a running ContractRefine host. It is safe for concurrent use.
type Host struct {
	s   settings
	env hostenv.Env
	log *slog.Logger
	wal *wal // nil when no telemetry emitter is wired

	budgets budgetBook
	toolMu  sync.Mutex // serializes tool.write appends
	closed  atomic.Bool

	handler http.Handler
	seams   http.Handler

	// offset is how far the clock seam has moved this host's clock ahead.
	offset atomic.Int64
}

// now is the host's clock: the environment's, moved ahead by the clock seam.
func (h *Host) now() time.Time {
	return h.env.Clock().Add(time.Duration(h.offset.Load()))
}

// Open resolves cfg, opens (and recovers) the WAL in env.DataDir, and
// rebuilds the repair budgets from it.
func Open(cfg Config, env hostenv.Env) (*Host, error) {
	if env.DataDir == "" {
		return nil, errors.New("contractrefine: env.DataDir is required")
	}
	h := &Host{env: env, log: env.Log().With(slog.String("family", "contractrefine"))}
	s, err := resolve(cfg, h.log)
	if err != nil {
		return nil, err
	}
	h.s = s
	h.budgets.m = map[budgetKey]*budget{}
	if err := os.MkdirAll(env.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("contractrefine: data dir: %w", err)
	}
	if s.emitterWired {
		// Budgets live in memory but the WAL is their source of truth: every
		// repair_required frame is one consumed attempt.
		h.wal, err = openWAL(env.DataDir, h.log, s.walFail, s.walReadFail, s.readFailAgents(), func(fr *rawFrame) {
			if fr.Kind == KindPreflight && fr.stringAttr("outcome") == OutcomeRepairRequired {
				h.budgets.get(budgetKey{fr.stringAttr("session_id"), fr.stringAttr("plan_hash")}).used++
			}
		})
		if err != nil {
			return nil, fmt.Errorf("contractrefine: %w", err)
		}
	}
	h.handler = h.routes()
	h.seams = h.seamRoutes()
	h.log.Info("contractrefine host open",
		slog.String("mode", string(s.mode)), slog.Bool("verifier_wired", s.verifierWired),
		slog.Bool("emitter_wired", s.emitterWired), slog.String("policy_ref", s.policyRef))
	return h, nil
}

// Mode reports the resolved runtime.contract_refine.mode.
func (h *Host) Mode() Mode { return h.s.mode }

// Handler serves the spec's HTTP surface.
func (h *Host) Handler() http.Handler { return h.handler }

// Seams serves the test-only control endpoints under
// /conformance/seams/contractrefine/ (full paths; mount without stripping).
func (h *Host) Seams() http.Handler { return h.seams }

// Close releases the WAL. Requests arriving afterwards get 503.
func (h *Host) Close() error {
	if h.closed.Swap(true) || h.wal == nil {
		return nil
	}
	return h.wal.close()
}

func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/preflight", h.guard(http.MethodPost, h.postPreflight))
	mux.HandleFunc("/v1/preflight/", h.guard(http.MethodGet, h.getPreflight))
	mux.HandleFunc("/v1/tool", h.guard(http.MethodPost, h.postTool))
	mux.HandleFunc("/", notFound)
	return mux
}

// guard answers 405 for any other method and 503 once the host is closed.
func (h *Host) guard(method string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+method)
			return
		}
		if h.closed.Load() {
			writeError(w, http.StatusServiceUnavailable, "host is closed")
			return
		}
		next(w, r)
	}
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "no route for "+r.URL.Path)
}

// budgetKey identifies one repair ladder.
type budgetKey struct{ session, planHash string }

// budget is one ladder's consumed attempts. Its mutex is held from the
// budget check through the WAL emit, so concurrent repairs of the same plan
// cannot overspend it and a failed emit consumes nothing.
type budget struct {
	mu   sync.Mutex
	used int
}

type budgetBook struct {
	mu sync.Mutex
	m  map[budgetKey]*budget
}

func (b *budgetBook) get(k budgetKey) *budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	bg, ok := b.m[k]
	if !ok {
		bg = &budget{}
		b.m[k] = bg
	}
	return bg
}

// readObject reads a size-limited JSON object body into v. It returns the
// status to answer with when the body is unusable.
func readObject(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds %d bytes", MaxBodyBytes)
		}
		return http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return http.StatusBadRequest, errors.New("request body is missing")
	case body[0] != '{':
		return http.StatusBadRequest, errors.New("request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("malformed request body: %w", err)
	}
	return 0, nil
}

func newID() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return id.String(), nil
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeValue(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	writeJSON(w, status, b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	writeJSON(w, status, b)
}

// trimPathPrefix returns the rest of path after prefix, or ok false.
func trimPathPrefix(path, prefix string) (string, bool) {
	if !strings.HasPrefix(path, prefix) {
		return "", false
	}
	return path[len(prefix):], true
}
