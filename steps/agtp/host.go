// Package agtp binds the AGTP RCNS features (features/agtp) to a host's
// AGTP/1.0 wire, through wire/agtp's client with its deadlines and limits.
// Every scenario runs on one of the AGTP fixtures (fixtures/agtp.go,
// docs/hosts/agtp.md "Fixtures"): a host the scenarios of that fixture
// share, started once with its RCNS knobs, its agent rosters and the
// suite's reference policy. A scenario leases the agents it declares from
// the fixture's rosters, and its record places ({room}, ...) are its own,
// so it never sees another's state; the Given steps that name a knob check
// that the fixture provides it. Every scenario runs over TLS 1.3 (the
// run's throwaway certificate) and over plaintext loopback (the fixture's
// second listener). Steps assert on what came back on the wire; the only
// seams used are the operator's recipe seam and, where the fixture has
// seams, none other (docs/host-interface.md).
package agtp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

const family = "agtp"

// Transports a scenario names.
const (
	TransportTLS       = "TLS 1.3"
	TransportPlaintext = "plaintext loopback"
)

// Register binds every AGTP step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerActions(c)
	registerAssertions(c)
	registerPropose(c)
	registerWitness(c)
	registerModel(c)
	registerIdempotencyModel(c) // model_idempotency.go
}

type agent struct {
	name   string
	id     string
	tier   int
	scopes []string
}

// operator reports whether the agent's identity document grants
// inspect:all (its inventory listings show every agent's contracts).
func (a *agent) operator() bool {
	for _, sc := range a.scopes {
		if sc == "inspect:all" {
			return true
		}
	}
	return false
}

// state is one scenario's AGTP memory.
type state struct {
	// idemHistory is the idempotency model's recorded requests
	// (model_idempotency.go).
	idemHistory []porcupine.Operation
	salt        string
	transport   string
	fx          *fixtureView      // the fixture the scenario runs on, once read
	knobs       map[string]any    // the fixture's [policies.rcns] knobs
	agents      map[string]*agent // by the name the scenario gives them
	places      map[string]string // {room}, {room2}, {slot} -> this scenario's value
	recipes     map[string]string // a recipe the scenario leased: its name in the scenario -> its name on the host

	client *wire.Client
	form   string // the request body form the host declared (target.BodyForm*)

	current     string            // "the contract"
	named       map[string]string // remembered contracts
	previewHash map[string]string // synthesis_id -> contract_hash of its 461
	attempts    map[string]bool   // RCNS-Attempt-Ids seen
	batch       []*steps.Response // the responses of the last repeated send
	firstByKey  map[string]*steps.Response
	sweep       *steps.Response
	mine        map[string]bool // every synthesis_id issued to one of the scenario's agents

	issued        map[string]time.Time // synthesis_id -> when the suite first saw it issued
	issuedFloor   map[string]time.Time // synthesis_id -> when the suite sent the request that issued it
	lastSent      time.Time            // when send began the scenario's latest request
	expiresAt     map[string]string    // synthesis_id -> the expires_at its 461 or 263 named
	proposal      string               // the last proposal_id a 261 named
	lastAttempt   string               // the RCNS-Attempt-Id last inspected
	attemptReason string               // the reason the answer carrying lastAttempt gave
	lastResp      *steps.Response      // the last AGTP answer of any agent
	sessionBound  []sessionBound       // syntheses of the current session not said to be persistent

	preview     preview         // the last 461 preview
	gateEvals   map[string]int  // agent name -> opted-in requests it sent that reached the gate
	controlSid  string          // the control agent's contract, once shown served by the resolver
	proposed    proposedPair    // the pair the last proposal named
	onPurpose   map[string]bool // what the scenario says it sends malformed on purpose
	readChecked bool            // the Tier A write and read were shown to work
}

// preview is a 461 the suite was sent: who asked, for what, and the
// synthesis_id it named ("" when it named none).
type preview struct {
	agent, method, target, sid string
}

// proposedPair is the (method, path) a proposal named.
type proposedPair struct{ method, path string }

// sessionBound is a synthesis an agent obtained by PROPOSE in the current
// session and that its 263 did not call persistent.
type sessionBound struct{ agent, sid string }

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		salt := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		s := &state{salt: salt, knobs: map[string]any{}, agents: map[string]*agent{},
			named: map[string]string{}, issued: map[string]time.Time{}, issuedFloor: map[string]time.Time{}, previewHash: map[string]string{}, attempts: map[string]bool{},
			firstByKey: map[string]*steps.Response{}, places: map[string]string{}, gateEvals: map[string]int{}, onPurpose: map[string]bool{},
			mine: map[string]bool{}, recipes: map[string]string{}, expiresAt: map[string]string{}}
		for _, p := range []string{"room", "room2", "slot", "suite", "desk", "hall"} {
			s.places[p] = p + "-" + salt
		}
		return s
	}).(*state)
}

// The suite's own agents, leased like the scenario's when a step first
// needs them.
const (
	// readerName writes a control room record and reads room records
	// through the Tier A endpoints, so that whether an action ran is
	// visible on the wire.
	readerName = "parley-reader"
	// controlName obtains a contract of its own so that the Tier C
	// resolver is shown serving one before the suite reads a refusal as
	// "no contract".
	controlName = "parley-control"
)

var suiteAgents = map[string]struct {
	tier   int
	scopes []string
}{
	readerName:  {1, []string{"rooms:*"}},
	controlName: {1, []string{"rooms:*", "rcns:negotiate"}},
}

// fixtureView is what the steps read of the scenario's fixture: its name
// and the AGTP section the host runs with.
type fixtureView struct {
	name    string
	rcns    map[string]any
	propose map[string]any
	recipes []map[string]any
	methods []string
}

// fixture reads the scenario's fixture once. An AGTP scenario always names
// one (@fixture:NAME).
func (s *state) fixture(ctx context.Context) (*fixtureView, error) {
	if s.fx != nil {
		return s.fx, nil
	}
	w := steps.From(ctx)
	f, ok := w.Fixture()
	if !ok {
		return nil, steps.Fault("AGTP scenarios run on a fixture: tag the scenario with @fixture:NAME (fixtures/agtp.go, docs/hosts/agtp.md)")
	}
	if f.Family != family {
		return nil, steps.Fault("fixture %s is of family %s, not %s", f.Name, f.Family, family)
	}
	// Every scenario of the run reads the same view (read only): decoding a
	// fixture's section, hundreds of agents long, once per scenario cost a
	// tenth of a run's CPU.
	v, err := w.FixtureMemo("agtp-view:"+f.Name, func() (any, error) {
		cfg, err := w.FixtureConfig()
		if err != nil {
			return nil, err
		}
		var sec struct {
			RCNS    map[string]any   `json:"rcns"`
			Propose map[string]any   `json:"propose"`
			Recipes []map[string]any `json:"recipes"`
			Methods []string         `json:"methods"`
		}
		if err := json.Unmarshal(cfg.Section(family), &sec); err != nil {
			return nil, steps.Fault("fixture %s's agtp section does not decode: %v", f.Name, err)
		}
		if sec.RCNS == nil {
			sec.RCNS = map[string]any{}
		}
		if sec.Propose == nil {
			sec.Propose = map[string]any{}
		}
		return &fixtureView{name: f.Name, rcns: sec.RCNS, propose: sec.Propose, recipes: sec.Recipes, methods: sec.Methods}, nil
	})
	if err != nil {
		return nil, err
	}
	s.fx = v.(*fixtureView)
	s.knobs = s.fx.rcns
	return s.fx, nil
}

// sameJSON reports whether two values encode alike (2 and 2.0 do).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// provides checks that the fixture's table (rcns or propose) sets knob to
// want, or leaves it unset when want is nil: the scenario's Given step
// describes the fixture, never configures it.
func (s *state) provides(ctx context.Context, table, knob string, want any) error {
	fx, err := s.fixture(ctx)
	if err != nil {
		return err
	}
	t := fx.rcns
	if table == "propose" {
		t = fx.propose
	}
	got, set := t[knob]
	switch {
	case want == nil && set:
		b, _ := json.Marshal(got)
		return steps.Fault("the scenario says [policies.%s] leaves %s unset, and fixture %s sets it to %s: tag the scenario with a fixture that leaves it unset", table, knob, fx.name, b)
	case want == nil:
		return nil
	case !set:
		b, _ := json.Marshal(want)
		return steps.Fault("the scenario says [policies.%s] sets %s = %s, and fixture %s leaves it unset: tag the scenario with a fixture that sets it", table, knob, b, fx.name)
	case !sameJSON(got, want):
		g, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		return steps.Fault("the scenario says [policies.%s] sets %s = %s, and fixture %s sets it to %s: tag the scenario with a fixture that sets it", table, knob, b, fx.name, g)
	}
	return nil
}

// customMethod checks that the fixture declares method as a custom method
// (the optional member custom-methods), and says the scenario relies on it.
func (s *state) customMethod(ctx context.Context, method string) error {
	fx, err := s.fixture(ctx)
	if err != nil {
		return err
	}
	for _, m := range fx.methods {
		if m == method {
			return steps.From(ctx).Needs(fixtures.AGTPCustomMethodsMember)
		}
	}
	return steps.Fault("the scenario says the server declares custom method %s, and fixture %s declares %v", method, fx.name, fx.methods)
}

// proposeList checks that the fixture's [policies.propose] list (review or
// refused) names the pair, and says the scenario relies on the member that
// list is.
func (s *state) proposeList(ctx context.Context, list, member, method, path string) error {
	fx, err := s.fixture(ctx)
	if err != nil {
		return err
	}
	pairs, _ := fx.propose[list].([]any)
	for _, p := range pairs {
		if p == method+" "+path {
			return steps.From(ctx).Needs(member)
		}
	}
	return steps.Fault("the scenario says [policies.propose] %s lists %s %s, and fixture %s's lists %v", list, method, path, fx.name, pairs)
}

// recipe returns the fixture's recipe named name.
func (s *state) recipe(ctx context.Context, name string) (map[string]any, error) {
	fx, err := s.fixture(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range fx.recipes {
		if r["name"] == name {
			return r, nil
		}
	}
	return nil, steps.Fault("fixture %s has no recipe %q", fx.name, name)
}

// leasedRecipe returns the host's name of the recipe the scenario leased as
// name. Only a leased recipe may be edited or removed: every other recipe
// belongs to the fixture, and an edit of it would change what every other
// scenario on the host reads.
func (s *state) leasedRecipe(name string) (string, error) {
	if real, ok := s.recipes[name]; ok {
		return real, nil
	}
	return "", steps.Fault("recipe %q is not one the scenario leased: an operator edit of a fixture's recipe changes the host for every scenario on it; lease one (recipe \"NAME\" is its own copy of room-booking, ...) and edit that", name)
}

// leaseRecipe gives the scenario a recipe of its own from the fixture's
// recipe roster, a copy of room-booking, known in the scenario as name and
// reached at /{name}/{id}.
func (s *state) leaseRecipe(ctx context.Context, name, pattern string) error {
	fx, err := s.fixture(ctx)
	if err != nil {
		return err
	}
	if _, dup := s.recipes[name]; dup {
		return steps.Fault("recipe %q is declared twice", name)
	}
	if _, clash := s.places[name]; clash {
		return steps.Fault("recipe %q would shadow the record place {%s}", name, name)
	}
	i, _, err := steps.From(ctx).Lease(fixtures.AGTPRecipeRoster)
	if err != nil {
		return err
	}
	real, path := fixtures.AGTPLeasedRecipe(i)
	seg := strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/{id}")
	if want := "/{" + name + "}/{id}"; pattern != want {
		return steps.Fault("the scenario's recipe %q is reached at %s, not %s", name, want, pattern)
	}
	r, err := s.recipe(ctx, real)
	if err != nil {
		return err
	}
	base, err := s.recipe(ctx, "room-booking")
	if err != nil {
		return err
	}
	for _, k := range []string{"version", "method", "composed_of", "success_status"} {
		if !sameJSON(r[k], base[k]) {
			return steps.Fault("fixture %s's leased recipe %s differs from room-booking in %s (%v, not %v)", fx.name, real, k, r[k], base[k])
		}
	}
	if r["path"] != path {
		return steps.Fault("fixture %s's leased recipe %s serves %v, not %s", fx.name, real, r["path"], path)
	}
	s.recipes[name] = real
	s.places[name] = seg
	return nil
}

// lease gives the scenario's agent name an identity of its own from the
// fixture's roster of its class (trust tier and granted scopes).
func (s *state) lease(ctx context.Context, name string, tier int, scopes []string) (*agent, error) {
	if _, err := s.fixture(ctx); err != nil {
		return nil, err
	}
	if a, ok := s.agents[name]; ok {
		return nil, steps.Fault("agent %q is declared twice (it is already %s)", name, a.id)
	}
	roster, ok := fixtures.AGTPRoster(tier, scopes)
	if !ok {
		return nil, steps.Fault("no AGTP agent class has trust tier %d and scopes %v (fixtures/agtp.go lists the classes fixtures lend)", tier, scopes)
	}
	_, id, err := steps.From(ctx).Lease(roster)
	if err != nil {
		return nil, err
	}
	a := &agent{name: name, id: id, tier: tier, scopes: append([]string(nil), scopes...)}
	s.agents[name] = a
	return a, nil
}

// agent returns the scenario's agent called name, leasing the suite's own
// agents when first used.
func (s *state) agent(ctx context.Context, name string) (*agent, error) {
	if a := s.agents[name]; a != nil {
		return a, nil
	}
	if sa, ok := suiteAgents[name]; ok {
		return s.lease(ctx, name, sa.tier, sa.scopes)
	}
	return nil, steps.Fault("no Given step declared agent %q", name)
}

// expand replaces {room}, {room2}, {slot}, {suite}, {desk} with the scenario's own values and
// {fresh} with a new one each time.
func (s *state) expand(target string) string {
	for k, v := range s.places {
		target = strings.ReplaceAll(target, "{"+k+"}", v)
	}
	for strings.Contains(target, "{fresh}") {
		target = strings.Replace(target, "{fresh}", "fresh-"+strings.ReplaceAll(uuid.NewString(), "-", "")[:12], 1)
	}
	return target
}

// literal reads the value a Given step writes after "=" (a JSON literal:
// true, 2, "optimistic").
func literal(text string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, steps.Fault("cannot read the knob value %s: %v", text, err)
	}
	if f, ok := v.(float64); ok && f == float64(int(f)) {
		return int(f), nil
	}
	return v, nil
}

// knobInt reads an integer knob of the fixture's.
func (s *state) knobInt(name string) (int, bool) {
	f, ok := s.knobs[name].(float64)
	return int(f), ok && f > 0
}

// The run-wide record of who was issued each contract: the evidence that
// tells a scenario which saw another lease's state (an identity lent twice,
// a suite fault) from a host that shows one agent's contract to another (the
// host's fault). Keyed by the fixture set's salt, so runs never mix.
var issuedTo sync.Map // salt + "\x00" + synthesis_id -> issue

type issue struct{ scenario, agentID string }

// noteIssue records that the scenario's agent was issued sid.
func (s *state) noteIssue(w *steps.World, a *agent, sid string) {
	if sid == "" {
		return
	}
	s.mine[sid] = true
	issuedTo.LoadOrStore(w.Env().Salt+"\x00"+sid, issue{scenario: s.salt, agentID: a.id})
}

// checkOwnListing holds an agent's own DISCOVER /contracts listing to the
// leases: a contract listed there that another scenario of this run was
// issued as the same identity means the identity was lent twice, and the
// scenario sees another lease's state (a suite fault, never the host's).
// A listed contract that was issued to another identity is the host's
// business, which the listing checks assert on.
func (s *state) checkOwnListing(w *steps.World, a *agent, r *steps.Response) error {
	if a.operator() || r.Status != 200 {
		return nil
	}
	doc, _ := r.JSON()
	var foreign []string
	for _, o := range objects(doc) {
		sid, _ := o["synthesis_id"].(string)
		if sid == "" || s.mine[sid] {
			continue
		}
		v, ok := issuedTo.Load(w.Env().Salt + "\x00" + sid)
		if !ok {
			continue
		}
		if is := v.(issue); is.scenario != s.salt && is.agentID == a.id {
			foreign = append(foreign, sid)
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	sort.Strings(foreign)
	return steps.Fault("the scenario saw another lease's state: DISCOVER /contracts for %q (identity %s) lists %s, which another scenario of this run was issued as the same identity: the identity was lent twice",
		a.name, a.id, strings.Join(foreign, ", "))
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an AGTP server reached over (TLS 1\.3|plaintext loopback)$`, func(ctx context.Context, transport string) error {
		w, s := steps.From(ctx), st(ctx)
		if _, err := s.fixture(ctx); err != nil {
			return err
		}
		s.transport = transport
		w.Secret(w.Env().TLS.KeyPEM)
		if transport == TransportPlaintext {
			return w.Needs(fixtures.AGTPPlaintextMember)
		}
		return nil
	})
	c.Given(`^its \[policies\.(rcns|propose)\] sets ([a-z_]+) = (.+)$`, func(ctx context.Context, table, knob, text string) error {
		v, err := literal(text)
		if err != nil {
			return err
		}
		return st(ctx).provides(ctx, table, knob, v)
	})
	c.Given(`^its \[policies\.rcns\] leaves ([a-z_]+) unset$`, func(ctx context.Context, knob string) error {
		return st(ctx).provides(ctx, "rcns", knob, nil)
	})
	c.Given(`^its recipe "([a-z-]+)" is at version "([^"]+)"$`, func(ctx context.Context, name, version string) error {
		s := st(ctx)
		r, err := s.recipe(ctx, name)
		if err != nil {
			return err
		}
		if r["version"] != version {
			return steps.Fault("the scenario says recipe %s is at version %q, and fixture %s has it at %q", name, version, s.fx.name, r["version"])
		}
		return nil
	})
	c.Given(`^recipe "([a-z]+)" is its own copy of room-booking, for BOOK (/\S+)$`, func(ctx context.Context, name, pattern string) error {
		return st(ctx).leaseRecipe(ctx, name, pattern)
	})
	c.Given(`^the server declares custom method ([A-Z]+)$`, func(ctx context.Context, method string) error {
		return st(ctx).customMethod(ctx, method)
	})
	// An outline whose rows mix catalog verbs with a custom method: a method
	// the fixture does not declare is a catalog verb (the fixture-grammar
	// test holds every method sent to the catalog or the declared ones).
	c.Given(`^method ([A-Z]+) is a catalog verb or a custom method the server declares$`, func(ctx context.Context, method string) error {
		s := st(ctx)
		fx, err := s.fixture(ctx)
		if err != nil {
			return err
		}
		for _, m := range fx.methods {
			if m == method {
				return s.customMethod(ctx, method)
			}
		}
		return nil
	})
	c.Given(`^the operator reviews proposals for ([A-Z]+) (/\S+)$`, func(ctx context.Context, method, path string) error {
		return st(ctx).proposeList(ctx, "review", fixtures.AGTPProposeReviewMember, method, path)
	})
	c.Given(`^the PROPOSE policy refuses ([A-Z]+) (/\S+)$`, func(ctx context.Context, method, path string) error {
		return st(ctx).proposeList(ctx, "refused", fixtures.AGTPProposeRefusalsMember, method, path)
	})
	c.Given(`^agent "([a-z]+)" has trust tier ([123]) and is granted "([^"]*)"$`, func(ctx context.Context, name string, tier int, grant string) error {
		var scopes []string
		for _, t := range strings.Split(grant, ",") {
			if t = strings.TrimSpace(t); t != "" {
				scopes = append(scopes, t)
			}
		}
		_, err := st(ctx).lease(ctx, name, tier, scopes)
		return err
	})
	// A scenario that sends a value outside the spec's grammar on purpose
	// says so; the fixture-grammar test holds every other one to it.
	c.Given(`^the scenario sends a malformed (method and path|method|path) on purpose$`, func(ctx context.Context, what string) error {
		for _, w := range strings.Split(what, " and ") {
			st(ctx).onPurpose[w] = true
		}
		return nil
	})
	c.Given(`^the operator's recipe seam is available$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
}

// conn returns the scenario's AGTP client, acquiring the host first: the
// fixture's TLS listener ("agtp") or its plaintext one ("agtp_plaintext").
func (s *state) conn(ctx context.Context) (*wire.Client, error) {
	if s.client != nil {
		return s.client, nil
	}
	w := steps.From(ctx)
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	// A restarted host listens elsewhere; the next exchange dials it anew
	// (and, the connection being the AGTP session, in a new session).
	w.OnRestart(func(*target.Host) {
		if s.client == c {
			_ = c.Close()
			s.client = nil
		}
	})
	s.client = c
	return c, nil
}

// dial opens a new connection to the host over the scenario's transport,
// closed when the scenario ends: conn keeps one for the scenario, and the
// idempotency model opens one per request.
func (s *state) dial(ctx context.Context) (*wire.Client, error) {
	w := steps.From(ctx)
	if s.transport == "" {
		return nil, steps.Fault("no step said which transport reaches the AGTP server")
	}
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	if h.AGTP == "" {
		return nil, steps.Fail(`the host exposes no AGTP listener (its ready line has no "agtp" address)`)
	}
	// The exchange's deadline is its context's (steps.ExchangeContext);
	// the client's own only caps it.
	opt := wire.ClientOptions{Timeout: steps.ExchangeCap, DialTimeout: 5 * time.Second,
		Limits: wire.Limits{MaxBodyBytes: steps.MaxBodyBytes}}
	addr := h.AGTP
	switch s.transport {
	case TransportTLS:
		pool, err := w.Env().TLS.Pool()
		if err != nil {
			return nil, steps.Fault("the run's TLS material: %v", err)
		}
		opt.TLS = &tls.Config{RootCAs: pool}
	case TransportPlaintext:
		if h.Isolated {
			// The published port is loopback on this side, but the host sees
			// the connection arrive from its namespace's gateway, off loopback.
			return nil, w.Block(verdict.CauseTarget, "plaintext AGTP is for loopback peers only, and a host in a network namespace of its own (container target) is not reached from loopback; certify plaintext rows with the exec or refhost target")
		}
		if h.AGTPPlaintext == "" {
			return nil, steps.Fail("fixture %s asks for a plaintext AGTP listener on loopback beside the TLS one (plaintext_listener), and the host's ready line names no agtp_plaintext address, nor declares member %s unsupported", s.fx.name, fixtures.AGTPPlaintextMember)
		}
		addr = h.AGTPPlaintext
	}
	s.form = h.AGTPBodyForm
	if s.form == "" {
		s.form = target.BodyFormEnvelope
	}
	c, err := wire.NewClient(addr, opt)
	if errors.Is(err, wire.ErrPlaintextNotLoopback) {
		return nil, steps.Fail("the host's plaintext AGTP listener %s is not on loopback, and plaintext is for loopback peers only", addr)
	}
	if err != nil {
		return nil, steps.Fail("the host's AGTP address %q cannot be dialled: %v", addr, err)
	}
	w.Cleanup(func() { _ = c.Close() })
	return c, nil
}
