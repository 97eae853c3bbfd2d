package contractrefine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
)

// state is one scenario's ContractRefine memory.
type state struct {
	text      string            // the echo text of this scenario's plan; unique, so a tool result is attributable
	request   map[string]any    // the last preflight request sent
	body      []byte            // its exact bytes
	lastPost  *steps.Response   // the last POST /v1/preflight exchange
	decisions []decision        // every 200 decision that names its preflight_id, in order
	refused   []byte            // the exact bytes of the last malformed request sent
	refusedRQ map[string]any    // the request those bytes were cut from
	unknownID string            // a preflight id no host has issued
	calls     int               // tool calls made
	tool      toolCall          // the last tool call
	toolCalls []toolCall        // every tool call, in the order made
	posts     []*steps.Response // every POST /v1/preflight exchange, in order
	undecided *steps.Response   // the first of them that brought no decision
	restarts  int               // how many times the host was restarted
	ttl       time.Duration     // the binding lifetime of the scenario's agent (0: unset)
	agent     string            // the leased actor.agent_id the scenario's requests and calls name
	box       *mailbox          // the scenario's tool.deliver mailbox, once leased
	fixture   string            // the fixture the mailbox belongs to
}

// agentID is the agent the scenario acts as: a tuned one a Given step
// leased, or else a plain one of its fixture, leased on first use.
func agentID(ctx context.Context) (string, error) {
	s := st(ctx)
	if s.agent == "" {
		_, id, err := steps.From(ctx).Lease(fixtures.CRAgents)
		if err != nil {
			return "", err
		}
		s.agent = id
	}
	return s.agent, nil
}

// request builds a reference request as the scenario's agent.
func request(ctx context.Context, which string) (map[string]any, error) {
	mk, ok := requestVariants[which]
	if !ok {
		return nil, steps.Fault("no reference preflight request is described as %q", which)
	}
	agent, err := agentID(ctx)
	if err != nil {
		return nil, err
	}
	r := mk(st(ctx).text)
	r["actor"].(map[string]any)["agent_id"] = agent
	return r, nil
}

// decisionPrecondition is the registry's precondition for steps that use
// "that preflight": a 200 decision naming its preflight_id.
const decisionPrecondition = "contractrefine.precondition.decision"

type decision struct {
	raw []byte
	doc map[string]any
}

func st(ctx context.Context) *state {
	w := steps.From(ctx)
	fresh := false
	s := w.State(family, func() any {
		fresh = true
		return &state{text: "parley-" + uuid.NewString()}
	}).(*state)
	if fresh {
		// Registered outside State, which holds the World's lock.
		w.OnRestart(func(*target.Host) { s.restarts++ })
	}
	return s
}

// since says, for a failure message, what happened to the host after a
// decision was answered.
func (s *state) since() string {
	if s.restarts == 0 {
		return ""
	}
	return fmt.Sprintf(", answered before the host was restarted (%d time(s))", s.restarts)
}

// last is "that preflight": the last decision. A scenario that asks for it
// before requesting a preflight misuses the step; a host that answered no
// usable decision fails the decision precondition.
func (s *state) last() (decision, error) {
	if s.lastPost == nil {
		return decision{}, steps.Fault("a step uses \"that preflight\" before any preflight was requested")
	}
	if len(s.decisions) == 0 {
		return decision{}, steps.Precondition(decisionPrecondition,
			steps.Fail("the scenario needs a 200 decision naming its preflight_id, and the host gave none: %s", s.lastPost))
	}
	return s.decisions[len(s.decisions)-1], nil
}

// allDecided is "every decision so far" made sound: each preflight the
// scenario requested must have been answered with a decision, or the steps
// that look at every decision would look at fewer than were asked for.
func (s *state) allDecided() error {
	if _, err := s.last(); err != nil {
		return err
	}
	if s.undecided != nil {
		return steps.Precondition(decisionPrecondition,
			steps.Fail("the scenario needs every preflight it requested answered with a 200 decision naming its preflight_id, and the host gave none for one: %s", s.undecided))
	}
	return nil
}

func (d decision) str(path string) string {
	v, _ := steps.Lookup(d.doc, path)
	s, _ := v.(string)
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The suite's three reference requests (docs/host-interface.md): a plan that
// satisfies every contract, the same plan without provenance (repairable),
// and a plan whose step kind differs from the requested capability (deny).
// Each gets its own session and plan hash so concurrent scenarios never share
// a repair budget.
func passingRequest(text string) map[string]any {
	return map[string]any{
		"intent": map[string]any{
			"kind":        "mission.start",
			"description": "parley conformance preflight",
			"plan_hash":   "blake3:" + randomHex(32),
		},
		"actor":      map[string]any{"session_id": "parley-session-" + uuid.NewString()},
		"capability": "tool.echo",
		"plan": []any{map[string]any{
			"kind":       "tool.echo",
			"params":     map[string]any{"text": text},
			"provenance": map[string]any{"text": map[string]any{"source": "operator"}},
		}},
		"context": map[string]any{
			"zone":              "default",
			"environment":       "edge",
			"rollback_contract": "rb-prepared-1",
			"expected_evidence": []any{"audit_id"},
		},
	}
}

func step0(req map[string]any) map[string]any {
	return req["plan"].([]any)[0].(map[string]any)
}

var requestVariants = map[string]func(text string) map[string]any{
	"for a plan that satisfies every contract": passingRequest,
	"for a plan that delivers": func(text string) map[string]any {
		r := passingRequest(text)
		r["capability"] = "tool.deliver"
		step0(r)["kind"] = "tool.deliver"
		return r
	},
	"for a plan whose params lack provenance": func(text string) map[string]any {
		r := passingRequest(text)
		delete(step0(r), "provenance")
		return r
	},
	"whose plan step kind differs from the capability": func(text string) map[string]any {
		r := passingRequest(text)
		step0(r)["kind"] = "tool.write"
		return r
	},
	"without actor.session_id": func(text string) map[string]any {
		r := passingRequest(text)
		delete(r["actor"].(map[string]any), "session_id")
		return r
	},
	"without intent.plan_hash": func(text string) map[string]any {
		r := passingRequest(text)
		delete(r["intent"].(map[string]any), "plan_hash")
		return r
	},
}

// post sends a preflight body and remembers a 200 decision.
func post(ctx context.Context, req map[string]any, header http.Header) error {
	w, s := steps.From(ctx), st(ctx)
	b, err := json.Marshal(req)
	if err != nil {
		return steps.Fault("cannot encode the preflight request: %v", err)
	}
	s.request, s.body = req, b
	return postRaw(ctx, b, header, w, s)
}

func postRaw(ctx context.Context, b []byte, header http.Header, w *steps.World, s *state) error {
	r, err := w.Do(ctx, http.MethodPost, "/v1/preflight", b, header)
	if err != nil {
		return err
	}
	s.lastPost = r
	s.posts = append(s.posts, r)
	if r.Status == http.StatusOK {
		if doc, err := r.JSON(); err == nil {
			if d := (decision{raw: r.Body, doc: doc}); d.str("preflight_id") != "" {
				s.decisions = append(s.decisions, d)
				return nil
			}
		}
	}
	if s.undecided == nil {
		s.undecided = r
	}
	return nil
}

// malformed builds a request body the host must refuse, from a fresh
// passing request whose plan hash and agent id are unique to the scenario;
// both are inside the bytes sent, so a frame written for the request could
// not avoid carrying them.
func malformed(s *state, how string) ([]byte, error) {
	req := passingRequest(s.text)
	req["actor"].(map[string]any)["agent_id"] = "parley-refused-" + uuid.NewString()
	full, err := json.Marshal(req)
	if err != nil {
		return nil, steps.Fault("cannot encode the preflight request: %v", err)
	}
	var b []byte
	switch how {
	case "a truncated preflight request":
		// Cut just after the plan hash (actor and intent precede the plan in
		// the encoding's key order).
		ph, _ := steps.Lookup(req, "intent.plan_hash")
		i := bytes.Index(full, []byte(steps.Text(ph)))
		if i < 0 {
			return nil, steps.Fault("the plan hash is not in the encoded request")
		}
		b = full[:i+len(steps.Text(ph))+1]
	case "a preflight request followed by stray bytes":
		b = append(full, []byte(` {"intent": {}}`)...)
	default:
		return nil, steps.Fault("no malformed request is described as %q", how)
	}
	for _, path := range []string{"intent.plan_hash", "actor.agent_id"} {
		v, _ := steps.Lookup(req, path)
		if !bytes.Contains(b, []byte(steps.Text(v))) {
			return nil, steps.Fault("the malformed request does not carry its %s", path)
		}
	}
	s.refused, s.refusedRQ = b, req
	return b, nil
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

var reasonShape = regexp.MustCompile(`^contract: [a-z][a-z0-9_]*$`)

// expirySlack is how long past a binding's expires_at the suite waits
// before it presents the binding again; clockSkew is how much later than the
// configured lifetime a host may set expires_at (its clock against the
// suite's, and a lifetime rounded up to the second).
const (
	expirySlack = 1500 * time.Millisecond
	clockSkew   = 5 * time.Second
)

func registerPreflight(c *steps.Catalog) {
	c.When(`^the agent requests a preflight (.+)$`, func(ctx context.Context, which string) error {
		r, err := request(ctx, which)
		if err != nil {
			return err
		}
		return post(ctx, r, jsonHeader())
	})
	c.When(`^the agent requests a passing preflight with zone "([^"]*)", environment "([^"]*)", node "([^"]*)" and agent "([^"]*)"$`, func(ctx context.Context, zone, env, node, agent string) error {
		r := passingRequest(st(ctx).text)
		r["context"].(map[string]any)["zone"] = zone
		r["context"].(map[string]any)["environment"] = env
		r["actor"].(map[string]any)["node_id"] = node
		r["actor"].(map[string]any)["agent_id"] = agent
		return post(ctx, r, jsonHeader())
	})
	c.When(`^the agent sends a passing preflight request with no request headers$`, func(ctx context.Context) error {
		r, err := request(ctx, "for a plan that satisfies every contract")
		if err != nil {
			return err
		}
		return post(ctx, r, nil)
	})
	c.When(`^the agent sends that preflight request again$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if s.body == nil {
			return steps.Fault("no preflight request sent yet")
		}
		return postRaw(ctx, s.body, jsonHeader(), w, s)
	})
	c.When(`^the agent requests the same repairable preflight under another (session|plan hash)$`, func(ctx context.Context, key string) error {
		s := st(ctx)
		if s.request == nil {
			return steps.Fault("no preflight request sent yet")
		}
		var r map[string]any
		_ = json.Unmarshal(s.body, &r)
		if key == "session" {
			r["actor"].(map[string]any)["session_id"] = "parley-session-" + uuid.NewString()
		} else {
			r["intent"].(map[string]any)["plan_hash"] = "blake3:" + randomHex(32)
		}
		return post(ctx, r, jsonHeader())
	})
	c.When(`^the agent sends that preflight request (\d+) more times?$`, func(ctx context.Context, n int) error {
		w, s := steps.From(ctx), st(ctx)
		if s.body == nil {
			return steps.Fault("no preflight request sent yet")
		}
		for range n {
			if err := postRaw(ctx, s.body, jsonHeader(), w, s); err != nil {
				return err
			}
		}
		return nil
	})
	c.When(`^the agent sends a repairable preflight request (\d+) times?$`, func(ctx context.Context, n int) error {
		w, s := steps.From(ctx), st(ctx)
		if n < 1 {
			return steps.Fault("a request is sent at least once")
		}
		r, err := request(ctx, "for a plan whose params lack provenance")
		if err != nil {
			return err
		}
		if err := post(ctx, r, jsonHeader()); err != nil {
			return err
		}
		for range n - 1 {
			if err := postRaw(ctx, s.body, jsonHeader(), w, s); err != nil {
				return err
			}
		}
		return nil
	})
	c.When(`^the agent requests, for zone "([^"]*)", a preflight (.+)$`, func(ctx context.Context, zone, which string) error {
		r, err := request(ctx, which)
		if err != nil {
			return err
		}
		r["context"].(map[string]any)["zone"] = zone
		return post(ctx, r, jsonHeader())
	})
	c.Then(`^the last (\d+) answers have outcome "([^"]*)"$`, func(ctx context.Context, n int, want string) error {
		w, s := steps.From(ctx), st(ctx)
		if n < 1 || len(s.posts) < n {
			return steps.Fault("the scenario checks the last %d answers after sending %d requests", n, len(s.posts))
		}
		for i, r := range s.posts[len(s.posts)-n:] {
			doc, err := r.JSON()
			if err != nil {
				return err
			}
			got, _ := steps.Lookup(doc, "outcome")
			if err := w.Assert(r.Status == http.StatusOK && steps.Text(got) == want, "answer %d of the last %d is not a 200 %s decision: %s", i+1, n, want, r); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^every decision so far is returned verbatim by GET$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if err := s.allDecided(); err != nil {
			return err
		}
		for _, d := range s.decisions {
			id := d.str("preflight_id")
			r, err := w.Do(ctx, http.MethodGet, "/v1/preflight/"+url.PathEscape(id), nil, nil)
			if err != nil {
				return err
			}
			if err := w.Assert(r.Status == http.StatusOK, "decision %s (outcome %q)%s is lost: %s", id, d.str("outcome"), s.since(), r); err != nil {
				return err
			}
			if err := w.Assert(steps.JSONEqual(r.Body, d.raw), "GET %s returned another decision than POST answered%s:\nPOST: %s\nGET:  %s", id, s.since(), d.raw, r.Body); err != nil {
				return err
			}
		}
		return nil
	})
	c.When(`^the binding of that preflight has expired$`, func(ctx context.Context) error {
		s := st(ctx)
		d, err := s.last()
		if err != nil {
			return err
		}
		if s.ttl == 0 {
			return steps.Fault("the scenario waits for a binding to expire without configuring how long bindings last")
		}
		exp := d.str("execution_eligibility.expires_at")
		t, perr := time.Parse(time.RFC3339Nano, exp)
		if perr != nil {
			return steps.Fail("that preflight's execution_eligibility.expires_at %q is not an RFC 3339 time: %v", exp, perr)
		}
		wait := time.Until(t) + expirySlack
		if wait > s.ttl+expirySlack+clockSkew {
			return steps.Fail("the host was configured with eligibility_ttl %s, yet that preflight's binding expires at %s, %s from now", s.ttl, exp, time.Until(t).Round(time.Second))
		}
		if wait <= 0 {
			return nil
		}
		body, _ := json.Marshal(map[string]any{"seconds": wait.Seconds()})
		return steps.From(ctx).PassTime(ctx, wait, seamPrefix+"clock/advance", body, nil)
	}).Waits(3*time.Second + expirySlack)
	c.When(`^a client posts (no body|an empty body|a truncated preflight request|a preflight request followed by stray bytes|the body "(.*)") to /v1/preflight$`, func(ctx context.Context, what, literal string) error {
		w, s := steps.From(ctx), st(ctx)
		var b []byte
		switch what {
		case "no body":
		case "an empty body":
			b = []byte{}
		case "a truncated preflight request", "a preflight request followed by stray bytes":
			var err error
			if b, err = malformed(s, what); err != nil {
				return err
			}
		default:
			b = []byte(literal)
		}
		_, err := w.Do(ctx, http.MethodPost, "/v1/preflight", b, jsonHeader())
		return err
	})

	c.Then(`^the response carries no decision$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		// A body that is not a JSON object carries no decision either.
		var found []string
		if doc, jerr := r.JSON(); jerr == nil {
			for _, k := range []string{"preflight_id", "outcome", "execution_eligibility", "decision"} {
				if _, ok := doc[k]; ok {
					found = append(found, k)
				}
			}
		}
		return w.Assert(len(found) == 0, "expected no decision, but the body has %s: %s", strings.Join(found, ", "), r)
	})
	c.Then(`^the response field "([^"]*)" is not "([^"]*)"$`, func(ctx context.Context, path, not string) error {
		w := steps.From(ctx)
		v, ok, err := w.Field(path)
		if err != nil {
			return err
		}
		r, _ := w.LastResponse()
		return w.Assert(ok && steps.Text(v) != not, "expected %s present and not %q: %s", path, not, r)
	})
	c.Then(`^the decision carries at least one repair hint$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		v, ok, err := w.Field("repair_hints")
		if err != nil {
			return err
		}
		hints, isList := v.([]any)
		r, _ := w.LastResponse()
		return w.Assert(ok && isList && len(hints) > 0, "expected a non-empty repair_hints list: %s", r)
	})
	c.Then(`^every decision so far has a distinct "([^"]*)"$`, func(ctx context.Context, field string) error {
		w, s := steps.From(ctx), st(ctx)
		if err := s.allDecided(); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, d := range s.decisions {
			v := d.str(field)
			if err := w.Assert(v != "" && !seen[v], "decision %s repeats or lacks %s %q", d.str("preflight_id"), field, v); err != nil {
				return err
			}
			seen[v] = true
		}
		return w.Assert(len(s.decisions) >= 2, "expected at least two decisions, have %d", len(s.decisions))
	})
	// The subreason alone: the "contract: " prefix is
	// contractrefine.preflight.post.reason-shape's rule, witnessed there, so
	// a scenario about why a decision was made does not fail on it too.
	c.Then(`^the decision's subreason is "([a-z][a-z0-9_]*)"$`, func(ctx context.Context, want string) error {
		w := steps.From(ctx)
		reason, err := w.StringField("reason")
		if err != nil {
			return err
		}
		got := strings.TrimPrefix(reason, "contract: ")
		return w.Assert(got == want, "expected the subreason %s, got the reason %q", want, reason)
	})
	c.Then(`^the decision's reason has the shape "contract: <subreason>"$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		reason, err := w.StringField("reason")
		if err != nil {
			return err
		}
		return w.Assert(reasonShape.MatchString(reason), "reason %q does not have the shape contract: <subreason>", reason)
	})
	c.Then(`^the response field "([^"]*)" is an RFC 3339 time in the future$`, func(ctx context.Context, path string) error {
		w := steps.From(ctx)
		v, err := w.StringField(path)
		if err != nil {
			return err
		}
		t, perr := time.Parse(time.RFC3339Nano, v)
		if err := w.Assert(perr == nil, "%s = %q is not an RFC 3339 time: %v", path, v, perr); err != nil {
			return err
		}
		// Allow a little clock skew between suite and host.
		return w.Assert(t.After(time.Now().Add(-5*time.Second)), "%s = %s is not in the future", path, v)
	})

	c.When(`^the agent retrieves that preflight$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		d, err := s.last()
		if err != nil {
			return err
		}
		_, err = w.Do(ctx, http.MethodGet, "/v1/preflight/"+url.PathEscape(d.str("preflight_id")), nil, nil)
		return err
	})
	c.When(`^the agent retrieves the preflight "([^"]*)"$`, func(ctx context.Context, id string) error {
		_, err := steps.From(ctx).Do(ctx, http.MethodGet, "/v1/preflight/"+id, nil, nil)
		return err
	})
	c.When(`^the agent retrieves an unknown preflight id$`, func(ctx context.Context) error {
		_, err := steps.From(ctx).Do(ctx, http.MethodGet, "/v1/preflight/"+uuid.NewString(), nil, nil)
		return err
	})
	// Disabled differs from advisory and enforce on both endpoints: each
	// answers 503 (contractrefine-preflight.txt, "Mode ladder"). Either 503
	// marks disabled; the status of each endpoint is its own id's
	// (contractrefine.preflight.post.disabled-503, ...get.disabled-503).
	c.Then(`^the endpoints show the "disabled" mode: at least one answers 503$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		get, err := w.LastResponse()
		if err != nil {
			return err
		}
		if s.lastPost == nil || get == s.lastPost {
			return steps.Fault("the scenario tells disabled by a POST and then a GET, and made %v", s.lastPost)
		}
		return w.Assert(s.lastPost.Status == http.StatusServiceUnavailable || get.Status == http.StatusServiceUnavailable,
			"neither endpoint answered 503, as in a mode other than disabled: POST %d, GET %d", s.lastPost.Status, get.Status)
	})
	c.Then(`^the response is the decision that POST returned, verbatim$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		// The GET answer is the last recorded exchange, the POST decision the
		// one before it (GET 200s are not decisions and are not recorded).
		d, err := s.last()
		if err != nil {
			return err
		}
		return w.Assert(steps.JSONEqual(r.Body, d.raw), "GET returned another decision:\nPOST: %s\nGET:  %s", d.raw, r.Body)
	})
}
