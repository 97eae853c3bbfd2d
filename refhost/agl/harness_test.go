package agl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/refhost/hostenv"
)

var testKeys = Keys{Operator: "op-key", Authority: "authz-key", Resolver: "resolver-key"}

// client speaks the binding over HTTP, as the suite's steps do.
type client struct {
	t    testing.TB
	base string
	hc   *http.Client
}

type resp struct {
	Status int
	Body   map[string]any
	Raw    []byte
}

func (r resp) str(path ...string) string {
	var v any = r.Body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

func (r resp) code() string { return r.str("error", "code") }

func (c *client) do(method, path, key string, body any) resp {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			require.NoError(c.t, err)
			rd = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{Status: res.StatusCode, Raw: raw}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		dec.Decode(&out.Body)
	}
	// Binding-wide rule: a non-retryable refusal never looks like a
	// retryable transport failure.
	if e, ok := out.Body["error"].(map[string]any); ok && e["retryable"] == false {
		switch res.StatusCode {
		case 408, 429, 502, 503, 504:
			c.t.Errorf("non-retryable denial %v answered with retryable status %d", e["code"], res.StatusCode)
		}
		if res.Header.Get("Retry-After") != "" {
			c.t.Errorf("non-retryable denial %v carries Retry-After", e["code"])
		}
	}
	return out
}

// testHost runs a host in-process behind httptest, seams mounted.
type testHost struct {
	h     *Host
	srv   *httptest.Server
	c     *client
	email *fakemail.Server
	hook  *fakemail.Server
	clock *fakeClock
}

type fakeClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Add(f.off)
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.off += d
	f.mu.Unlock()
}

func newTestHost(t *testing.T, mut func(*Config)) *testHost {
	t.Helper()
	email, hook := fakemail.New(false), fakemail.New(false)
	es, hs := httptest.NewServer(email), httptest.NewServer(hook)
	t.Cleanup(es.Close)
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	cfg := Config{
		DatabasePath: filepath.Join(dir, "ops.db"),
		Email:        Destination{URL: es.URL, Account: "acme"},
		Webhook:      Destination{URL: hs.URL, Account: "acme-ledger"},
		Keys:         testKeys,
		ClaimLeaseMS: 500,
	}
	if mut != nil {
		mut(&cfg)
	}
	clk := &fakeClock{}
	h, err := Open(cfg, hostenv.Env{DataDir: dir, Now: clk.now})
	require.NoError(t, err)
	h.exit = func(code int) { panic(fmt.Sprintf("host exit %d", code)) }
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h.Handler())
	mux.Handle(SeamPrefix, h.Seams())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &testHost{h: h, srv: srv, c: &client{t: t, base: srv.URL, hc: srv.Client()}, email: email, hook: hook, clock: clk}
}

// scenario is one principal with an agent and a grant, as each suite
// scenario creates its own.
type scenario struct {
	c          *client
	principal  string
	agent      string
	exec       string
	grantID    string
	grantToken string
	mailbox    string
}

func implFP(c *client, name string) string {
	r := c.do("GET", "/agl/v1/implementations", "", nil)
	for _, im := range r.Body["implementations"].([]any) {
		m := im.(map[string]any)
		if m["name"] == name {
			return m["fingerprint"].(string)
		}
	}
	c.t.Fatalf("no implementation %s", name)
	return ""
}

func emailContract(c *client, name string) map[string]any {
	return map[string]any{
		"qualified_name": name, "contract_version": "1", "implementation": "email.send/v1",
		"implementation_fingerprint": implFP(c, "email.send/v1"),
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
}

func transferContract(c *client, name string) map[string]any {
	return map[string]any{
		"qualified_name": name, "contract_version": "1", "implementation": "webhook.post/v1",
		"implementation_fingerprint": implFP(c, "webhook.post/v1"),
		"input_type": map[string]any{"type": "object", "required": []string{"account", "recipient", "amount"},
			"properties": map[string]any{
				"account":   map[string]any{"type": "string"},
				"recipient": map[string]any{"type": "string"},
				"amount":    map[string]any{"type": "integer", "minimum": 1},
				"currency":  map[string]any{"type": "string", "enum": []string{"EUR", "USD"}, "default": "EUR"},
			}},
		"authority_requirements": []any{map[string]any{"kind": "account", "select": "/account"}},
		"possible_effects":       []string{"external_write", "financial_write"},
		"approval_requirement":   map[string]any{"required": true, "role": "treasurer"},
		"idempotency_contract":   map[string]any{"kind": "none"},
		"scheduling_contract":    map[string]any{"max_attempts": 1},
	}
}

func newScenario(t testing.TB, c *client, tools []string) *scenario {
	id := uuid.NewString()[:8]
	s := &scenario{c: c, principal: "alice-" + id, agent: "agent-" + id, exec: "exec-" + id, mailbox: "ops-" + id + "@example.com"}
	r := c.do("PUT", "/agl/v1/agents/"+s.agent, testKeys.Operator, map[string]any{
		"principal": s.principal, "tools": tools, "effect_ceiling": []string{"external_write", "email_send", "financial_write"}})
	require.Equal(t, 200, r.Status, string(r.Raw))
	r = c.do("POST", "/agl/v1/grants", testKeys.Authority, map[string]any{
		"subject": s.principal, "operations": tools, "ttl_seconds": 3600,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}, map[string]any{"kind": "account", "ids": []string{"acct-" + id}}}})
	require.Equal(t, 201, r.Status, string(r.Raw))
	s.grantID, s.grantToken = r.str("grant_id"), r.str("grant_token")
	return s
}

func (s *scenario) account() string { return "acct-" + strings.TrimPrefix(s.principal, "alice-") }

func (s *scenario) draft(t testing.TB, to ...string) (id, handle string) {
	if len(to) == 0 {
		to = []string{"bob@example.com"}
	}
	r := s.c.do("POST", "/agl/v1/resources/email-drafts", "", map[string]any{"owner": s.principal,
		"payload": map[string]any{"from": s.mailbox, "to": to, "subject": "Quarterly numbers", "body": "See attached."}})
	require.Equal(t, 201, r.Status, string(r.Raw))
	return r.str("resource_id"), r.str("handle")
}

func (s *scenario) action(op string, args any) map[string]any {
	return map[string]any{"execution_id": s.exec, "principal": s.principal, "agent_id": s.agent,
		"operation": op, "arguments": args, "grant_token": s.grantToken}
}

// approve proposes, requests approval and has the resolver grant it.
func (s *scenario) approve(t testing.TB, op string, args any, role string) (proposal resp, permitToken, permitID string) {
	proposal = s.c.do("POST", "/agl/v1/proposals", "", s.action(op, args))
	require.Equal(t, 201, proposal.Status, string(proposal.Raw))
	ar := s.c.do("POST", "/agl/v1/proposals/"+proposal.str("proposal_id")+"/approval-requests", "", map[string]any{"role": role, "ttl_seconds": 600})
	require.Equal(t, 201, ar.Status, string(ar.Raw))
	dec := s.c.do("POST", "/agl/v1/approval-requests/"+ar.str("request_id")+"/decision", testKeys.Resolver,
		map[string]any{"approver": "carol", "role": role, "decision": "granted", "digest": proposal.str("digest")})
	require.Equal(t, 201, dec.Status, string(dec.Raw))
	return proposal, dec.str("permit", "permit_token"), dec.str("permit", "permit_id")
}

func (s *scenario) dispatch(op string, args any, permit string) resp {
	body := s.action(op, args)
	body["permit_token"] = permit
	return s.c.do("POST", "/agl/v1/dispatch", "", body)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
