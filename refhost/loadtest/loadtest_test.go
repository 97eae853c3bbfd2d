package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/refhost"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// Bounds of one run. Every request has its own deadline and the whole run
// one more, so a host that stops answering fails the test instead of
// hanging it.
const (
	requestTimeout = 30 * time.Second
	runTimeout     = 3 * time.Minute
)

const (
	operatorKey  = "load-operator"
	authorityKey = "load-authority"
	resolverKey  = "load-resolver"
	sendOp       = "mail.send_email"
)

// TestLoad runs agents concurrently against one reference host: in each
// round every agent makes an AGTP request that goes through the four-lock
// gate to a two-step action, a preflight decision, and an AGL email action
// from draft to approval to dispatch. The first round warms up; the heap is
// measured after it and after the last.
func TestLoad(t *testing.T) {
	agents, rounds := 64, 6
	if testing.Short() {
		agents, rounds = 16, 3
	}
	leaks := goleak.IgnoreCurrent()
	l := start(t, agents)

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	began := time.Now()
	l.setup(ctx)
	l.round(ctx, 0)
	warm, warmRSS := heapInuse(), rss()
	// A round that went wrong ends the run: the failures say why.
	for r := 1; r < rounds && l.failures() == nil; r++ {
		l.round(ctx, r)
	}
	elapsed := time.Since(began)
	end := heapInuse()
	if err := l.failures(); err != nil {
		l.stop()
		t.Fatal(err)
	}

	l.checkAGTP(ctx, agents*rounds)
	l.checkPreflight(ctx, agents*rounds)
	l.checkAGL(ctx, agents*rounds)
	if err := l.failures(); err != nil {
		l.stop()
		t.Fatal(err)
	}
	t.Logf("%d agents x %d rounds (%d gate requests, %d preflights, %d AGL dispatches, %d requests in all) in %v; heap in use %.1f MiB after warm-up, %.1f MiB at the end; resident %s after warm-up, %s at the end",
		agents, rounds, agents*rounds, agents*rounds, agents*rounds, l.requests(), elapsed.Round(time.Millisecond),
		mib(warm), mib(end), warmRSS, rss())
	if limit := warm*3/2 + 16<<20; end > limit {
		t.Errorf("heap in use grew from %.1f MiB after warm-up to %.1f MiB (bound %.1f MiB)", mib(warm), mib(end), mib(limit))
	}

	l.stop()
	goleak.VerifyNone(t, leaks)
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// rss is the process's resident set, for the log: SQLite's page caches
// live outside the Go heap, and grow to their bounds as the stores do.
func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

type load struct {
	t     *testing.T
	host  *refhost.Host
	email *fakemail.Server
	dest  *httptest.Server
	hc    *http.Client
	tr    *http.Transport

	agents []*agent
	nreq   atomic.Int64 // requests made

	mu   sync.Mutex
	errs []error
	// What the host answered, to check against what it kept.
	sids, attempts, preflights, ops map[string]bool
	// bookings: the counter value each gated answer reported, and how often.
	bookings  map[int]int
	decisions map[string][]byte // preflight_id -> POST answer
	stopped   bool
}

type agent struct {
	n         int
	agtpID    string
	agtp      *wire.Client
	principal string
	aglAgent  string
	exec      string
	mailbox   string
	grant     string
}

func agtpID(n int) string { return fmt.Sprintf("%064x", n+1) }

func hostConfig(agents int, destURL string) []byte {
	agtpAgents := make([]any, agents)
	for i := range agents {
		agtpAgents[i] = map[string]any{"agent_id": agtpID(i), "trust_tier": 1, "scopes": []string{"rooms:*", "rcns:negotiate"}}
	}
	// The AGTP section in the suite's spec-level terms: an optimistic gate
	// composing BOOK /room/{id} from a store and a count, and a Tier A
	// listing of what was stored.
	section := map[string]any{
		"server_id": "refhost-load",
		"rcns":      map[string]any{"enabled": true, "mode": "optimistic", "rate_limit_per_minute": 100000},
		"agents":    agtpAgents,
		"capabilities": []any{
			map[string]any{"name": "store-room", "effect": "store", "records": "rooms", "authority_scope": []string{"rooms:write"}},
			map[string]any{"name": "count-booking", "effect": "count", "records": "bookings", "authority_scope": []string{"rooms:write"}},
			map[string]any{"name": "list-rooms", "effect": "list", "records": "rooms", "authority_scope": []string{"rooms:read"}},
		},
		"endpoints": []any{map[string]any{"method": "REPORT", "path": "/rooms", "tier": "A", "capability": "list-rooms"}},
		"recipes": []any{map[string]any{"name": "room-booking", "version": "1", "method": "BOOK", "path": "/room/{id}",
			"composed_of": []string{"store-room", "count-booking"}, "success_status": 201}},
	}
	cfg := map[string]any{
		"seams":          true, // the ContractRefine WAL is read back through its seam
		"contractrefine": map[string]any{"mode": "advisory"},
		"agl": map[string]any{
			"email": map[string]any{"url": destURL, "account": "acme"},
			"keys":  map[string]any{"operator_key": operatorKey, "authority_key": authorityKey, "resolver_key": resolverKey},
			// Sized for the load: every agent may be dispatching at once.
			"max_concurrent_dispatches": agents,
		},
		"agtp": section,
	}
	b, _ := json.Marshal(cfg)
	return b
}

func start(t *testing.T, agents int) *load {
	t.Helper()
	email := fakemail.New(false)
	dest := httptest.NewServer(email)
	h, err := refhost.Start(refhost.Options{Config: hostConfig(agents, dest.URL), DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		dest.Close()
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * agents, IdleConnTimeout: 30 * time.Second}
	l := &load{t: t, host: h, email: email, dest: dest, tr: tr, hc: &http.Client{Transport: tr, Timeout: requestTimeout},
		sids: map[string]bool{}, attempts: map[string]bool{}, bookings: map[int]int{}, preflights: map[string]bool{}, ops: map[string]bool{},
		decisions: map[string][]byte{}}
	t.Cleanup(l.stop)
	for i := range agents {
		c, err := wire.NewClient(h.AGTPAddr, wire.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("%02d", i)
		l.agents = append(l.agents, &agent{n: i, agtpID: agtpID(i), agtp: c, principal: "principal-" + tag, aglAgent: "agent-" + tag,
			exec: "exec-" + tag, mailbox: "ops-" + tag + "@example.com"})
	}
	return l
}

// stop closes everything the test started, once.
func (l *load) stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	l.mu.Unlock()
	for _, a := range l.agents {
		a.agtp.Close()
	}
	l.tr.CloseIdleConnections()
	if err := l.host.Close(); err != nil {
		l.t.Errorf("closing the host: %v", err)
	}
	l.dest.Close()
	// The AGL host calls its destination with the default transport.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func (l *load) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *load) failures() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	errs := l.errs
	if len(errs) > 10 {
		errs = append(errs[:10:10], fmt.Errorf("... and %d more", len(l.errs)-10))
	}
	return fmt.Errorf("%d unexpected answers or errors:\n%w", len(l.errs), errors.Join(errs...))
}

func (l *load) count()          { l.nreq.Add(1) }
func (l *load) requests() int64 { return l.nreq.Load() }

// call makes one HTTP request with its own deadline and wants status want.
func (l *load) call(ctx context.Context, method, path, key string, body any, want int) (map[string]any, []byte, error) {
	l.count()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, l.host.URL+path, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return nil, raw, fmt.Errorf("%s %s answered %d, want %d: %.300s", method, path, resp.StatusCode, want, raw)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, raw, fmt.Errorf("%s %s: answer is not a JSON object: %v", method, path, err)
	}
	return m, raw, nil
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	s, _ := v.(string)
	return s
}

// setup registers the email contract and gives every AGL agent its tool
// set and a grant.
func (l *load) setup(ctx context.Context) {
	impls, _, err := l.call(ctx, "GET", "/agl/v1/implementations", "", nil, 200)
	if err != nil {
		l.fail(err)
		return
	}
	var fp string
	list, _ := impls["implementations"].([]any)
	for _, im := range list {
		if m, _ := im.(map[string]any); str(m, "name") == "email.send/v1" {
			fp = str(m, "fingerprint")
		}
	}
	contract := map[string]any{
		"qualified_name": sendOp, "contract_version": "1", "implementation": "email.send/v1", "implementation_fingerprint": fp,
		"input_type": map[string]any{"type": "object", "required": []string{"draft"},
			"properties": map[string]any{"draft": map[string]any{"type": "string", "x-agl-handle": "email_draft"}}},
		"output_type": map[string]any{"type": "object", "required": []string{"message_id"},
			"properties": map[string]any{"message_id": map[string]any{"type": "string"}}},
		"authority_requirements": []any{map[string]any{"kind": "mailbox", "select": "/draft/payload/from"}},
		"possible_effects":       []string{"external_write", "email_send"},
		"protocol_preconditions": []any{map[string]any{"argument": "/draft", "state": "Authorized"}},
		"protocol_outcomes":      map[string]any{"success": "Sent", "no_effect": "FailedNoEffect", "uncertain": "Unknown"},
		"approval_requirement":   map[string]any{"required": true, "role": "operator"},
		"idempotency_contract":   map[string]any{"kind": "none"},
		"scheduling_contract":    map[string]any{"max_attempts": 1},
	}
	if _, _, err := l.call(ctx, "POST", "/agl/v1/contracts", operatorKey, contract, 201); err != nil {
		l.fail(err)
		return
	}
	l.each(func(a *agent) error {
		if _, _, err := l.call(ctx, "PUT", "/agl/v1/agents/"+a.aglAgent, operatorKey, map[string]any{
			"principal": a.principal, "tools": []string{sendOp}, "effect_ceiling": []string{"external_write", "email_send"}}, 200); err != nil {
			return err
		}
		g, _, err := l.call(ctx, "POST", "/agl/v1/grants", authorityKey, map[string]any{
			"subject": a.principal, "operations": []string{sendOp}, "ttl_seconds": 3600,
			"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{a.mailbox}}}}, 201)
		if err != nil {
			return err
		}
		a.grant = str(g, "grant_token")
		return nil
	})
}

// each runs fn for every agent at once and waits for all.
func (l *load) each(fn func(a *agent) error) {
	var wg sync.WaitGroup
	for _, a := range l.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(a); err != nil {
				l.fail(fmt.Errorf("agent %d: %w", a.n, err))
			}
		}()
	}
	wg.Wait()
}

// round: every agent, at once, makes its three exchanges of round r.
func (l *load) round(ctx context.Context, r int) {
	l.each(func(a *agent) error {
		return errors.Join(l.gate(ctx, a, r), l.preflight(ctx, a, r), l.dispatch(ctx, a, r))
	})
}

// gate: an AGTP request for a pair the agent has no contract for, which
// the four-lock gate serves by synthesising one.
func (l *load) gate(ctx context.Context, a *agent, r int) error {
	l.count()
	id := fmt.Sprintf("a%d-r%d", a.n, r)
	req, err := wire.NewRequest("BOOK", "/room/"+id, fmt.Appendf(nil, `{"method":"BOOK","parameters":{"id":%q}}`, id))
	if err != nil {
		return err
	}
	req.Header.Set("Agent-ID", a.agtpID)
	req.Header.Set("Allow-RCNS", "true")
	req.Header.Set("Content-Type", wire.MediaType)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := a.agtp.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("AGTP BOOK %s: %w", req.Path, err)
	}
	if resp.Status != 201 {
		return fmt.Errorf("AGTP BOOK %s answered %d, want 201: %.300s", req.Path, resp.Status, resp.Body)
	}
	sid, att := resp.Header.Get("Contract-Synthesized"), resp.Header.Get("RCNS-Attempt-Id")
	if sid == "" || att == "" {
		return fmt.Errorf("AGTP BOOK %s: not served through the gate: %v", req.Path, resp.Header)
	}
	// The reference host answers with each step's output; the count step's
	// is the counter after this request's increment.
	var body struct {
		Result struct {
			Steps []struct {
				Primitive string `json:"primitive"`
				Output    struct {
					Value *int `json:"value"`
				} `json:"output"`
			} `json:"steps"`
		} `json:"result"`
	}
	n := -1
	if json.Unmarshal(resp.Body, &body) == nil {
		for _, st := range body.Result.Steps {
			if st.Primitive == "count-booking" && st.Output.Value != nil {
				n = *st.Output.Value
			}
		}
	}
	if n < 0 {
		return fmt.Errorf("AGTP BOOK %s: no count step in the answer: %.300s", req.Path, resp.Body)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sids[sid] || l.attempts[att] {
		return fmt.Errorf("AGTP BOOK %s: contract %s or attempt %s answered twice", req.Path, sid, att)
	}
	l.sids[sid], l.attempts[att] = true, true
	l.bookings[n]++
	return nil
}

func (l *load) preflight(ctx context.Context, a *agent, r int) error {
	body := map[string]any{
		"intent":     map[string]any{"kind": "mission.start", "description": fmt.Sprintf("load %d/%d", a.n, r), "plan_hash": fmt.Sprintf("blake3:%02x%02x", a.n, r)},
		"actor":      map[string]any{"session_id": fmt.Sprintf("load-session-%d", a.n)},
		"capability": "tool.echo",
		"plan":       []any{map[string]any{"kind": "tool.echo", "params": map[string]any{"text": "x"}, "provenance": map[string]any{"text": map[string]any{"source": "operator"}}}},
		"context":    map[string]any{"zone": "default", "environment": "edge", "rollback_contract": "rb", "expected_evidence": []string{"audit_id"}},
	}
	d, raw, err := l.call(ctx, "POST", "/v1/preflight", "", body, 200)
	if err != nil {
		return err
	}
	id := str(d, "preflight_id")
	if id == "" {
		return fmt.Errorf("preflight decision without preflight_id: %.300s", raw)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.preflights[id] {
		return fmt.Errorf("preflight_id %s answered twice", id)
	}
	l.preflights[id] = true
	l.decisions[id] = raw
	return nil
}

// dispatch drafts an email, proposes sending it, has the resolver approve
// it and dispatches it with the permit.
func (l *load) dispatch(ctx context.Context, a *agent, r int) error {
	d, _, err := l.call(ctx, "POST", "/agl/v1/resources/email-drafts", "", map[string]any{"owner": a.principal,
		"payload": map[string]any{"from": a.mailbox, "to": []string{"bob@example.com"}, "subject": fmt.Sprintf("round %d", r), "body": "See attached."}}, 201)
	if err != nil {
		return err
	}
	action := map[string]any{"execution_id": a.exec, "principal": a.principal, "agent_id": a.aglAgent,
		"operation": sendOp, "arguments": map[string]any{"draft": str(d, "handle")}, "grant_token": a.grant}
	p, _, err := l.call(ctx, "POST", "/agl/v1/proposals", "", action, 201)
	if err != nil {
		return err
	}
	ar, _, err := l.call(ctx, "POST", "/agl/v1/proposals/"+str(p, "proposal_id")+"/approval-requests", "", map[string]any{"role": "operator", "ttl_seconds": 600}, 201)
	if err != nil {
		return err
	}
	dec, _, err := l.call(ctx, "POST", "/agl/v1/approval-requests/"+str(ar, "request_id")+"/decision", resolverKey,
		map[string]any{"approver": "carol", "role": "operator", "decision": "granted", "digest": str(p, "digest")}, 201)
	if err != nil {
		return err
	}
	action["permit_token"] = str(dec, "permit", "permit_token")
	op, raw, err := l.call(ctx, "POST", "/agl/v1/dispatch", "", action, 200)
	if err != nil {
		return err
	}
	id := str(op, "operation_id")
	if id == "" || str(op, "state") != "Completed" {
		return fmt.Errorf("dispatch did not complete: %.300s", raw)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops[id] {
		return fmt.Errorf("operation %s answered twice", id)
	}
	l.ops[id] = true
	return nil
}

// checkAGTP: every gated request ran each of its steps exactly once. The
// counter values the answers reported are exactly 1..want, each once (a lost
// increment repeats a value, a doubled one skips one), and the Tier A listing
// holds exactly the rooms the requests stored.
func (l *load) checkAGTP(ctx context.Context, want int) {
	if len(l.sids) != want {
		l.fail(fmt.Errorf("AGTP: %d distinct contracts answered, want %d", len(l.sids), want))
	}
	for v := 1; v <= want; v++ {
		if l.bookings[v] != 1 {
			l.fail(fmt.Errorf("AGTP: %d answers reported the bookings counter at %d, want 1", l.bookings[v], v))
		}
	}
	if len(l.bookings) != want {
		l.fail(fmt.Errorf("AGTP: the answers reported %d distinct counter values, want %d", len(l.bookings), want))
	}
	req, _ := wire.NewRequest("REPORT", "/rooms", nil)
	req.Header.Set("Agent-ID", agtpID(0))
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := l.agents[0].agtp.Do(ctx, req)
	if err != nil {
		l.fail(fmt.Errorf("AGTP REPORT /rooms: %w", err))
		return
	}
	var body struct {
		Result struct {
			Items []struct {
				Key string `json:"key"`
			} `json:"items"`
		} `json:"result"`
	}
	if resp.Status != 200 || json.Unmarshal(resp.Body, &body) != nil {
		l.fail(fmt.Errorf("AGTP REPORT /rooms answered %d: %.300s", resp.Status, resp.Body))
		return
	}
	rooms := map[string]int{}
	for _, it := range body.Result.Items {
		rooms[it.Key]++
	}
	if len(rooms) != want || len(body.Result.Items) != want {
		l.fail(fmt.Errorf("AGTP: %d rooms stored (%d distinct) after %d gated requests", len(body.Result.Items), len(rooms), want))
	}
}

// checkPreflight reads the WAL back: every decision exactly once, frames
// numbered without a gap, and each decision served verbatim by GET.
func (l *load) checkPreflight(ctx context.Context, want int) {
	if len(l.preflights) != want {
		l.fail(fmt.Errorf("preflight: %d distinct decisions answered, want %d", len(l.preflights), want))
	}
	w, _, err := l.call(ctx, "GET", "/conformance/seams/contractrefine/wal", "", nil, 200)
	if err != nil {
		l.fail(err)
		return
	}
	frames, _ := w["frames"].([]any)
	seen := map[string]int{}
	var last int64
	for _, f := range frames {
		fm, _ := f.(map[string]any)
		seq, _ := strconv.ParseInt(string(fm["seq"].(json.Number)), 10, 64)
		if seq != last+1 {
			l.fail(fmt.Errorf("WAL: frame %d follows frame %d", seq, last))
		}
		last = seq
		if str(fm, "kind") == "autonomy.preflight" {
			seen[str(fm, "attrs", "preflight_id")]++
		}
	}
	for id := range l.preflights {
		if seen[id] != 1 {
			l.fail(fmt.Errorf("WAL: decision %s has %d frames", id, seen[id]))
		}
	}
	if len(seen) != len(l.preflights) {
		l.fail(fmt.Errorf("WAL: %d decisions in the WAL, %d answered", len(seen), len(l.preflights)))
	}
	l.each(func(a *agent) error {
		var errs []error
		for i, id := range l.idsOf(a.n, len(l.agents)) {
			_, raw, err := l.call(ctx, "GET", "/v1/preflight/"+id, "", nil, 200)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(l.decisions[id])) {
				errs = append(errs, fmt.Errorf("GET /v1/preflight/%s (%d) is not the decision POST answered", id, i))
			}
		}
		return errors.Join(errs...)
	})
}

// idsOf shares the decisions out among the agents for reading back.
func (l *load) idsOf(n, of int) []string {
	var ids []string
	i := 0
	for id := range l.decisions {
		if i%of == n {
			ids = append(ids, id)
		}
		i++
	}
	return ids
}

// checkAGL: the host lists exactly the dispatched operations, each
// Completed with one claim and one outcome in the audit trail, and the
// destination received each exactly once.
func (l *load) checkAGL(ctx context.Context, want int) {
	if len(l.ops) != want {
		l.fail(fmt.Errorf("AGL: %d distinct operations answered, want %d", len(l.ops), want))
	}
	var mu sync.Mutex
	listed := map[string]int{}
	l.each(func(a *agent) error {
		ops, raw, err := l.call(ctx, "GET", "/agl/v1/operations?execution_id="+a.exec, "", nil, 200)
		if err != nil {
			return err
		}
		list, _ := ops["operations"].([]any)
		for _, o := range list {
			om, _ := o.(map[string]any)
			if str(om, "state") != "Completed" {
				return fmt.Errorf("operation %s is %s: %.300s", str(om, "operation_id"), str(om, "state"), raw)
			}
			mu.Lock()
			listed[str(om, "operation_id")]++
			mu.Unlock()
		}
		audit, _, err := l.call(ctx, "GET", "/agl/v1/audit?execution_id="+a.exec, operatorKey, nil, 200)
		if err != nil {
			return err
		}
		claims, outcomes := map[string]int{}, map[string]int{}
		recs, _ := audit["records"].([]any)
		for _, rec := range recs {
			rm, _ := rec.(map[string]any)
			switch str(rm, "event") {
			case "claimed":
				claims[str(rm, "operation_id")]++
			case "outcome":
				outcomes[str(rm, "operation_id")]++
			}
		}
		for _, o := range list {
			id := str(o.(map[string]any), "operation_id")
			if claims[id] != 1 || outcomes[id] != 1 {
				return fmt.Errorf("operation %s has %d claim and %d outcome audit records", id, claims[id], outcomes[id])
			}
		}
		return nil
	})
	for id := range l.ops {
		if listed[id] != 1 {
			l.fail(fmt.Errorf("AGL: operation %s is listed %d times", id, listed[id]))
		}
		if n := l.email.CountFor(id); n != 1 {
			l.fail(fmt.Errorf("AGL: the destination received operation %s %d times", id, n))
		}
	}
	if len(listed) != len(l.ops) {
		l.fail(fmt.Errorf("AGL: the host lists %d operations, %d were dispatched", len(listed), len(l.ops)))
	}
	if n := l.email.Count(); n != want {
		l.fail(fmt.Errorf("AGL: the destination received %d messages for %d dispatches", n, want))
	}
}
