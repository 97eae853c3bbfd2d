// Package agl is the reference host for the AGL behavioral-contracts family:
// the parley HTTP/JSON binding (docs/agl-binding.md, schemas/agl/) of exact
// action permits, authority grants, resource protocols, the enforcing
// dispatcher and a SQLite operation store whose claims are atomic across
// processes.
package agl

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

// BindingVersion is the version of the HTTP/JSON interface served under
// PathPrefix. A breaking change to any payload gets a new version and prefix.
const (
	BindingVersion = "agl-binding/1"
	PathPrefix     = "/agl/v1/"
	SeamPrefix     = "/conformance/seams/agl/"
)

// Paths are the HTTP path patterns the binding owns, for a caller mounting
// several families on one server.
var Paths = []string{PathPrefix}

// Destination is an external system a handler writes to, spoken to with the
// parley fake-destination protocol (POST {url}/send, GET {url}/lookup).
type Destination struct {
	URL string `json:"url,omitempty"`
	// HonoursIdempotencyKey declares that the receiver deduplicates by the
	// Idempotency-Key header. Only then may an uncertain write be retried
	// automatically; otherwise it waits for reconciliation.
	HonoursIdempotencyKey bool `json:"honours_idempotency_key,omitempty"`
	// Account is the sending account or tenant at the destination; it is
	// effect-relevant and so bound into every approved snapshot.
	Account string `json:"account,omitempty"`
	// Accounts are further accounts of the same kind of destination, each
	// with its own URL and idempotency promise. A contract names the one its
	// operations write to (destination_account); a contract that names none
	// writes to the entry's own url and account.
	Accounts []Destination `json:"accounts,omitempty"`
	// MaxConcurrentDispatches and AdmissionWaitMS, on an account, limit
	// the dispatches to that account that may be past admission at once
	// (step 6), and how long one waits for its slot: a destination that
	// takes one message at a time. Zero: only the host's limit applies.
	MaxConcurrentDispatches int `json:"max_concurrent_dispatches,omitempty"`
	AdmissionWaitMS         int `json:"admission_wait_ms,omitempty"`
}

// key names the account among all the host's destinations.
func (d Destination) key() string { return d.Account + "\x00" + d.URL }

// account returns the configured account named name: the entry itself
// when name is empty or its own account, else one of its Accounts.
func (d Destination) account(name string) (Destination, bool) {
	if name == "" || (name == d.Account && d.URL != "") {
		d.Accounts = nil
		return d, name == "" || d.URL != ""
	}
	for _, a := range d.Accounts {
		if a.Account == name {
			a.Accounts = nil
			return a, true
		}
	}
	return Destination{}, false
}

// Keys authenticate the three trusted roles. An empty key is generated once
// and kept in <DataDir>/agl-keys.json (mode 0600), so a zero Config still
// yields a usable but closed host.
type Keys struct {
	Operator  string `json:"operator_key,omitempty"`  // contracts, agents, audit
	Authority string `json:"authority_key,omitempty"` // the authorization service: issues and revokes grants
	Resolver  string `json:"resolver_key,omitempty"`  // the trusted approval resolver: decisions, permit revocation, human reconciliation
}

// Deployment is the host's deployment policy. Its canonical digest is the
// policy fingerprint bound into every permit.
type Deployment struct {
	DisabledOperations      []string `json:"disabled_operations,omitempty"`
	AllowedRecipientDomains []string `json:"allowed_recipient_domains,omitempty"`
}

// Config configures one host. The zero value is a working host whose store
// is <DataDir>/agl.db.
type Config struct {
	DatabasePath string      `json:"database_path,omitempty"`
	Email        Destination `json:"email"`
	Webhook      Destination `json:"webhook"`
	Keys         Keys        `json:"keys"`
	Deployment   Deployment  `json:"deployment"`
	// InstanceName labels this host among others sharing its store (in
	// GET /agl/v1/ and the log); the instance id stays unique per start.
	InstanceName string `json:"instance_name,omitempty"`
	// AuthorityIssuer names the authorization service recorded as issuer.
	AuthorityIssuer string `json:"authority_issuer,omitempty"`
	// ClaimLeaseMS: a claim whose owning host has not heartbeated for this
	// long is presumed crashed and its operation becomes Unknown.
	ClaimLeaseMS            int   `json:"claim_lease_ms,omitempty"`
	BusyTimeoutMS           int   `json:"busy_timeout_ms,omitempty"`
	MaxBodyBytes            int64 `json:"max_body_bytes,omitempty"`
	RequestTimeoutMS        int   `json:"request_timeout_ms,omitempty"`
	HandlerTimeoutMS        int   `json:"handler_timeout_ms,omitempty"`
	MaxConcurrentDispatches int   `json:"max_concurrent_dispatches,omitempty"`
	AdmissionWaitMS         int   `json:"admission_wait_ms,omitempty"`
	MaxApprovalTTLSeconds   int   `json:"max_approval_ttl_seconds,omitempty"`
	// RetentionMS: how long after it can no longer be used a record is
	// kept before the retention sweep removes it; RetentionSweepMS: how
	// often the sweep runs. Consumed permits are never removed.
	RetentionMS      int64 `json:"retention_ms,omitempty"`
	RetentionSweepMS int   `json:"retention_sweep_ms,omitempty"`
	// Evidence configures the evidence runtime (evidence.go).
	Evidence EvidenceConfig `json:"evidence"`
}

func (c *Config) defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.ClaimLeaseMS, 10000)
	def(&c.BusyTimeoutMS, 15000)
	def(&c.RequestTimeoutMS, 30000)
	def(&c.HandlerTimeoutMS, 10000)
	def(&c.MaxConcurrentDispatches, 32)
	def(&c.AdmissionWaitMS, 2000)
	def(&c.MaxApprovalTTLSeconds, 86400)
	def(&c.RetentionSweepMS, 3600000)
	if c.RetentionMS <= 0 {
		c.RetentionMS = 30 * 24 * 3600 * 1000
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.AuthorityIssuer == "" {
		c.AuthorityIssuer = "parley-refhost-authority"
	}
}

// Host is one running AGL reference host.
type Host struct {
	cfg      Config
	env      hostenv.Env
	log      *slog.Logger
	st       *store
	instance string
	policyFP string
	// Step 6: concurrency slots, dispatches waiting for one, and this
	// host's budget reservations by scope.
	admitSlots chan struct{}
	waiting    atomic.Int64
	admMu      sync.Mutex
	reserved   map[string]int
	// gates are the destination accounts' own admission limits, by key.
	gates map[string]*gate
	// Dispatches in flight, by operation id, for cancellation.
	flightMu sync.Mutex
	flights  map[string]*flight
	client   *http.Client
	faults   *faults
	exit     func(int) // seam "exit" action; os.Exit in production
	auditKey []byte    // the store's key for keyed digests in the audit trail
	halted   atomic.Bool
	// seamsMounted: the operator mounted the test seams (Seams was called).
	seamsMounted atomic.Bool
	clockOffset  atomic.Int64   // ms the clock seam moved this host's clock
	ev           *evidenceState // the evidence runtime, evidence.go

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	// resuming counts the recovery sweeps under way and the resumptions
	// they started that have not decided yet (POST recover answers once
	// none is left).
	resuming atomic.Int64
}

// Open opens (creating if needed) the operation store and starts the
// heartbeat and crash-recovery sweeper.
func Open(cfg Config, env hostenv.Env) (*Host, error) {
	cfg.defaults()
	if cfg.DatabasePath == "" {
		if env.DataDir == "" {
			return nil, errors.New("agl: neither database_path nor a data directory is configured")
		}
		cfg.DatabasePath = filepath.Join(env.DataDir, "agl.db")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.DatabasePath), 0o700); err != nil {
		return nil, err
	}
	if err := loadKeys(&cfg.Keys, env.DataDir); err != nil {
		return nil, err
	}
	pfp, _, err := policyFingerprint(cfg)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg.DatabasePath, time.Duration(cfg.BusyTimeoutMS)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	h := &Host{
		cfg: cfg, env: env, log: env.Log().With("family", "agl"), st: st,
		instance:   "inst_" + uuid.NewString(),
		policyFP:   pfp,
		admitSlots: make(chan struct{}, cfg.MaxConcurrentDispatches),
		reserved:   map[string]int{},
		gates:      gates(cfg),
		client:     &http.Client{},
		faults:     newFaults(),
		exit:       os.Exit,
		stop:       make(chan struct{}),
	}
	if err := h.heartbeat(); err != nil {
		st.close()
		return nil, err
	}
	if h.auditKey, err = st.loadAuditKey(context.Background()); err != nil {
		st.close()
		return nil, err
	}
	if err := h.openEvidence(context.Background()); err != nil {
		st.close()
		return nil, err
	}
	if _, err := h.recoverOrphans(context.Background()); err != nil {
		st.close()
		return nil, err
	}
	h.wg.Add(3)
	go h.heartbeats()
	go h.sweeper()
	go h.retentionLoop()
	h.log.Info("agl host open", "db", cfg.DatabasePath, "instance", h.instance, "policy_fingerprint", pfp)
	return h, nil
}

// Close stops background work and closes the store. Claims this host holds
// are left for recovery, exactly as after a crash; the heartbeat row is
// removed so another host recovers them without waiting for the lease.
func (h *Host) Close() error {
	h.stopOnce.Do(func() { close(h.stop) })
	h.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.st.db.ExecContext(ctx, `DELETE FROM instances WHERE id=?`, h.instance)
	return h.st.close()
}

// now is the host's clock: the environment's, moved forward by the clock
// seam when an operator mounted it (and by nothing else).
func (h *Host) now() time.Time {
	return h.env.Clock().Add(time.Duration(h.clockOffset.Load()) * time.Millisecond)
}
func (h *Host) nowMS() int64 { return h.now().UnixMilli() }

// stopping reports that the host is closing or crashed in place.
func (h *Host) stopping() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

func loadKeys(k *Keys, dir string) error {
	if k.Operator != "" && k.Authority != "" && k.Resolver != "" {
		return nil
	}
	if dir == "" {
		return errors.New("agl: keys not configured and no data directory to keep generated ones")
	}
	path := filepath.Join(dir, "agl-keys.json")
	var stored Keys
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &stored); err != nil {
			return fmt.Errorf("agl: %s: %w", path, err)
		}
	}
	fill := func(dst *string, kept *string) {
		if *dst != "" {
			return
		}
		if *kept == "" {
			*kept = randomToken("key_")
		}
		*dst = *kept
	}
	fill(&k.Operator, &stored.Operator)
	fill(&k.Authority, &stored.Authority)
	fill(&k.Resolver, &stored.Resolver)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(stored, "", "  ")
	return os.WriteFile(path, b, 0o600)
}

func policyFingerprint(cfg Config) (string, []byte, error) {
	v, err := toValue(map[string]any{
		"deployment": cfg.Deployment,
		"canon":      CanonVersion,
		"binding":    BindingVersion,
	})
	if err != nil {
		return "", nil, err
	}
	return Digest(v)
}

// randomToken returns 256 bits of randomness; tokens are bearer secrets
// stored only as SHA-256 hashes.
func randomToken(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b)
}

func hashToken(t string) string {
	s := sha256.Sum256([]byte(t))
	return hex.EncodeToString(s[:])
}

func newID(prefix string) string { return prefix + uuid.NewString() }

// Handler serves the binding under PathPrefix with per-request deadlines and
// body limits.
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	p := strings.TrimSuffix(PathPrefix, "/")
	mux.HandleFunc("GET "+p+"/{$}", h.hInfo)
	mux.HandleFunc("GET "+p+"/implementations", h.hImplementations)
	mux.HandleFunc("POST "+p+"/contracts", h.hRegisterContract)
	mux.HandleFunc("GET "+p+"/contracts/{name}", h.hGetContract)
	mux.HandleFunc("PUT "+p+"/agents/{id}", h.hPutAgent)
	mux.HandleFunc("GET "+p+"/agents/{id}", h.hGetAgent)
	mux.HandleFunc("POST "+p+"/grants", h.hIssueGrant)
	mux.HandleFunc("GET "+p+"/grants/{id}", h.hGetGrant)
	mux.HandleFunc("POST "+p+"/grants/{id}/delegations", h.hDelegate)
	mux.HandleFunc("POST "+p+"/grants/{id}/revoke", h.hRevokeGrant)
	mux.HandleFunc("POST "+p+"/resources/email-drafts", h.hCreateDraft)
	mux.HandleFunc("PUT "+p+"/resources/{id}", h.hEditDraft)
	mux.HandleFunc("GET "+p+"/resources/{id}", h.hGetResource)
	mux.HandleFunc("POST "+p+"/proposals", h.hPropose)
	mux.HandleFunc("GET "+p+"/proposals/{id}", h.hGetProposal)
	mux.HandleFunc("POST "+p+"/proposals/{id}/approval-requests", h.hRequestApproval)
	mux.HandleFunc("GET "+p+"/approval-requests/{id}", h.hGetApprovalRequest)
	mux.HandleFunc("POST "+p+"/approval-requests/{id}/decision", h.hDecide)
	mux.HandleFunc("GET "+p+"/permits/{id}", h.hGetPermit)
	mux.HandleFunc("POST "+p+"/permits/{id}/revoke", h.hRevokePermit)
	mux.HandleFunc("POST "+p+"/dispatch", h.hDispatch)
	mux.HandleFunc("GET "+p+"/operations/{id}", h.hGetOperation)
	mux.HandleFunc("GET "+p+"/operations", h.hListOperations)
	mux.HandleFunc("POST "+p+"/operations/{id}/reconcile", h.hReconcile)
	mux.HandleFunc("GET "+p+"/audit", h.hAudit)
	mux.HandleFunc("POST "+p+"/legacy/invoke", h.hLegacyInvoke)
	mux.HandleFunc("POST "+p+"/scopes", h.hCreateScope)
	mux.HandleFunc("GET "+p+"/scopes/{id}", h.hGetScope)
	mux.HandleFunc("POST "+p+"/scopes/{id}/children", h.hOpenChildScope)
	mux.HandleFunc("POST "+p+"/operations/{id}/cancel", h.hCancel)
	mux.HandleFunc("POST "+p+"/parallel", h.hParallel)
	mux.HandleFunc("POST "+p+"/workflows/check", h.hCheckWorkflow) // the checker, workflows.go
	h.evidenceRoutes(mux, p)                                       // evidence obligations, evidence.go
	mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		writeDenial(w, &Denial{Code: "not_found", Category: "request", Status: 404, Message: "no such endpoint in " + BindingVersion})
	})
	return h.wrap(mux)
}

func (h *Host) wrap(next http.Handler) http.Handler {
	timeout := time.Duration(h.cfg.RequestTimeoutMS) * time.Millisecond
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.halted.Load() {
			// A halted instance is dead: drop the connection unanswered.
			panic(http.ErrAbortHandler)
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Denial is a refusal with a stable machine-readable code. Category is one
// of the runtime denial classes the spec distinguishes; Step is the
// dispatcher step (1-9) that refused, when the refusal came from dispatch.
type Denial struct {
	Code     string         `json:"code"`
	Category string         `json:"category"`
	Step     int            `json:"step,omitempty"`
	Message  string         `json:"message"`
	Detail   map[string]any `json:"detail,omitempty"`
	Status   int            `json:"-"`
	// Retryable is false for every policy denial: repeating the same
	// request cannot succeed until something else changes.
	Retryable bool `json:"retryable"`
}

func (d *Denial) Error() string { return d.Code + ": " + d.Message }

func deny(status int, code, category string, step int, format string, a ...any) *Denial {
	return &Denial{Code: code, Category: category, Status: status, Step: step, Message: fmt.Sprintf(format, a...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeDenial(w http.ResponseWriter, d *Denial) {
	writeJSON(w, d.Status, map[string]any{"error": d})
}

// fail writes err as a denial; anything that is not a Denial is an internal
// fault and is logged, never echoed.
func (h *Host) fail(w http.ResponseWriter, err error) {
	var d *Denial
	var ab errAbort
	switch {
	case errors.As(err, &d):
	case errors.As(err, &ab):
		d = ab.d
	case errors.Is(err, context.DeadlineExceeded):
		d = deny(503, "deadline_exceeded", "request", 0, "the request deadline passed before the host finished")
		d.Retryable = true
	default:
		h.log.Error("agl internal error", "err", err)
		d = deny(500, "persistence_failure", "persistence_failure", 0, "the operation store could not complete the request")
	}
	writeDenial(w, d)
}

// decode reads a strict JSON body: unknown members are refused so that an
// effect-relevant field can never be silently ignored.
func decode(r *http.Request, v any) *Denial {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return deny(413, "body_too_large", "request", 0, "request body exceeds %d bytes", mbe.Limit)
		}
		return deny(400, "malformed_request", "schema_error", 0, "request body: %v", err)
	}
	if dec.More() {
		return deny(400, "malformed_request", "schema_error", 0, "trailing data after JSON body")
	}
	return nil
}

func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func keyMatches(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// requireKey authenticates a trusted role by its bearer key.
func (h *Host) requireKey(r *http.Request, role string, keys ...string) *Denial {
	got := bearer(r)
	if got == "" {
		return deny(401, "unauthenticated", "authorization_denied", 0, "this endpoint requires the %s key as a bearer token", role)
	}
	for _, k := range keys {
		if keyMatches(got, k) {
			return nil
		}
	}
	return deny(403, "wrong_credentials", "authorization_denied", 0, "the bearer token is not the %s key", role)
}

func (h *Host) hInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{
		"binding_version":       BindingVersion,
		"canon_version":         CanonVersion,
		"digest_algorithm":      "sha256",
		"policy_fingerprint":    h.policyFP,
		"instance":              h.instance,
		"instance_name":         h.cfg.InstanceName,
		"email_idempotent":      h.cfg.Email.HonoursIdempotencyKey,
		"webhook_idempotent":    h.cfg.Webhook.HonoursIdempotencyKey,
		"max_approval_ttl_secs": h.cfg.MaxApprovalTTLSeconds,
	})
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func msPtr(ms *int64) any {
	if ms == nil {
		return nil
	}
	return msTime(*ms)
}

func pid() int { return os.Getpid() }
