// Package agl binds the AGL behavioral-contracts features (features/agl) to a
// host through the parley HTTP/JSON binding agl-binding/1
// (docs/agl-binding.md): contracts, agents, grants, email drafts, proposals,
// approvals, permits, dispatch, operations, reconciliation and the audit
// trail, plus the fault seams under /conformance/seams/agl/.
//
// Every scenario creates its own principal, agent, grant and keys, and runs
// its own fake destinations (peers/fakemail) whose URLs go into the
// host configuration: the effects counted there, by the suite, are the
// witness of "no effect" and "exactly one effect". A step never takes the
// host's word for an effect.
package agl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
)

const (
	family   = "agl"
	api      = "/agl/v1"
	seamPath = "/conformance/seams/agl"
)

// Register binds every AGL step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerActions(c)
	registerChecks(c)
	registerRuntime(c)
	registerChecker(c)         // the workflow checker, checker.go
	registerInterfaces(c)      // receipts, repeats and contract interfaces, interface.go
	registerModel(c)           // the permit model, model.go
	registerRevisionModel(c)   // the revision model, model_revisions.go
	registerOperationsModel(c) // the operations model, model_operations.go
	registerEvidence(c)        // evidence obligations, evidence.go
	registerDelegation(c)      // bounded delegation, delegation.go
	registerRestart(c)         // a restart under a changed deployment, restart.go
}

// destination is a fake destination account the scenario leased from its
// fixture's roster: a fakemail server of its own, routed at the account's
// path on the run's fakes. It logs every request it receives (effect or
// not), and keeps apart any that names another account: a host that sends
// one lease's operation to another's path would otherwise be counted as
// the wrong scenario's effect.
type destination struct {
	fake    *fakemail.Server
	url     string
	account string
	path    string

	mu      sync.Mutex
	foreign []string
}

type sendRecord struct{ key, operation string }

// ServeHTTP hands the request to the fake under the account's path, noting
// a message addressed to another account.
func (d *destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/send") {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		r.Body.Close()
		var m struct {
			Account string `json:"account"`
		}
		if err != nil || json.Unmarshal(raw, &m) != nil || m.Account != d.account {
			d.mu.Lock()
			d.foreign = append(d.foreign, fmt.Sprintf("a message for account %q arrived at %s, the path of account %s", m.Account, d.path, d.account))
			d.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
	}
	http.StripPrefix(d.path, d.fake).ServeHTTP(w, r)
}

// strange says what the destination saw that belongs to another lease.
func (d *destination) strange() []string {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.foreign...)
}

// leaseDestination leases an account of the scenario's fixture from roster
// and routes its path on the run's fakes to a fake destination of the
// scenario's own.
func leaseDestination(w *steps.World, roster string) (*destination, error) {
	if err := w.CallsBack(); err != nil {
		return nil, err
	}
	f, ok := w.Fixture()
	if !ok {
		return nil, steps.Fault("an AGL scenario runs on an AGL fixture (tag it @fixture:agl-core or another agl- fixture)")
	}
	fakes, err := w.Fakes()
	if err != nil {
		return nil, err
	}
	i, _, err := w.Lease(roster)
	if err != nil {
		return nil, err
	}
	account, path := fixtures.AGLAccount(f.Name, roster, i)
	d := &destination{fake: fakemail.New(roster == fixtures.AGLRosterEmailDedup), account: account, path: path, url: fakes.URL(path)}
	unroute, err := fakes.Route(path+"/", d)
	if err != nil {
		return nil, steps.Fault("%v", err)
	}
	w.Cleanup(unroute)
	return d, nil
}

// leaseCheck fails the host when a destination of the scenario received a
// message addressed to another account: the suite hands out each account
// once (two scenarios routing one lease's path is refused when the second
// leases it, a suite fault), and every account's path is in the fixture,
// so a message under one account's name at another's path is the host's
// misrouting, not a scenario seeing another's state. A request at a lease
// no running scenario holds (a retry arriving after its scenario ended)
// touches no scenario and is answered 404.
func (s *state) leaseCheck(w *steps.World) error {
	var odd []string
	for _, d := range []*destination{s.mail, s.ledger, s.mail2} {
		odd = append(odd, d.strange()...)
	}
	if len(odd) > 0 {
		return w.Assert(false, "the host sent an operation to another account's destination than its own: %s", strings.Join(odd, "; "))
	}
	return nil
}

// sends lists every send the destination was asked for, whether it took
// effect or not.
func (d *destination) sends() []sendRecord {
	var out []sendRecord
	for _, r := range d.fake.Requests() {
		if r.Path == "/send" {
			out = append(out, sendRecord{key: r.Key, operation: r.OperationID})
		}
	}
	return out
}

// keys are the three trusted roles' bearer keys, fresh per scenario.
type keys struct{ operator, authority, resolver string }

// actor is a principal with its agent and grant.
type actor struct {
	principal, agent, mailbox, account string
	grantID, grantToken                string
}

// state is one scenario's AGL state.
type state struct {
	mu sync.Mutex
	// inflight counts the exchanges the scenario started and left running
	// (a dispatch started by name or in the background): waits for the
	// host go on while there are some (steps.Await).
	inflight atomic.Int32
	// history is the calls of the permit or revision model's clients (model.go, model_revisions.go).
	history []porcupine.Operation
	keys    keys
	// id makes the scenario's names its own on a host other scenarios
	// share: its contracts' qualified names end in it.
	id                           string
	sendOp, transferOp, statusOp string
	described                    bool         // an AGL host was described
	dedup                        bool         // its email account deduplicates by key
	handlerTimeout               int          // the contracts' handler deadline (scheduling_contract.timeout_ms), when set
	mail                         *destination // the email destination
	ledger                       *destination // the webhook ("ledger") destination
	mail2                        *destination // the second host's email destination, when it has its own
	// delayed names the boundaries where the host paused for a fixed time
	// because its fault seam has no "hold" (hold.go).
	delayed map[string]bool

	shared           bool
	second           *target.Host
	secondDeployment []string // the second host's allowed recipient domains, when it has its own

	wantSetup      bool
	ready          bool
	emailIdem      string
	emailAttempts  int
	emailBackoff   int            // the email contract's backoff_ms, when set
	emailRetryOn   []string       // the email contract's retry selector, when set
	emailOutput    map[string]any // the email contract's output type, when not the default
	implementation map[string]string

	exec   string
	me     actor
	helper *actor
	// helperDispatch is the dispatch body of the helper's approved action,
	// when the scenario dispatches it in a later step.
	helperDispatch map[string]any

	draftID, latestHandle string
	propHandle            string
	prop                  map[string]any  // the last proposal the host accepted
	lastProposal          *steps.Response // the last proposal attempt, accepted or not
	lastProposalOp        string
	propOp                string           // the operation of the last proposal the host accepted
	decisionResp          *steps.Response  // the last decision's answer
	props                 []map[string]any // every proposal, in order
	requestID             string
	permitID, permitToken string
	decision              map[string]any
	opID                  string
	transfer              map[string]any // the approved transfer's arguments
	shown                 map[string]any // the approval request as the approver saw it

	grantOverride string       // grant token actions present instead of the principal's
	pendingMods   dispatchMods // what the next dispatch of the approved action gets wrong
	crashArmed    bool
	crasher       *target.Host // the host of the scenario's own that it crashes
	crashed       bool
	lastErr       error
	async         chan asyncResult
	results       []*steps.Response
	editResult    *steps.Response
	race          *contention // how the scenario races contenders
	lastTo        string      // the recipient of the last approved send
	audit         []map[string]any

	legacyArgs map[string]any       // the arguments of the last legacy call
	calls      []string             // operation ids of a series of dispatches, in order
	drafts     map[string][2]string // named drafts: resource id and handle
	sensitive  []any                // sensitive argument values of the audited operation

	named     map[string]*named // dispatches in flight, by name
	lastNamed string            // the dispatch started last
	// recoveryDecided: the host's recovery seam answered after the last
	// restart, so what recovery decided is in the store already.
	recoveryDecided bool
	rootScope       string            // the execution's budget scope
	scopes          map[string]string // child scopes, by name
	approved        []approvedSend    // several approved sends held at once
	branchSends     []approvedSend    // the approved send each branch of a map presented

	permitTTL   int            // the TTL the next approval asks for, when not the default
	askedTTL    int            // the TTL the last approval request asked for, in seconds
	clockSeam   bool           // the host moves its clock through the seam (probed by the Given that says so)
	sparePermit string         // an approved permit left unused, for the retention sweep to remove
	sweep       map[string]any // the last retention sweep's answer
	asked       int            // requests the destination had received when the suite last looked
}

type asyncResult struct {
	r   *steps.Response
	err error
}

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		id := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		return &state{emailIdem: "none", emailAttempts: 1, id: id,
			sendOp: "mail.send_email." + id, transferOp: "ledger.transfer." + id, statusOp: "mail.delivery_status." + id}
	}).(*state)
}

// opName is the scenario's own qualified name for an operation a feature
// names: every contract a scenario registers carries its id, so that
// scenarios sharing a host never register, read or arm a fault for one
// another's operations.
func (s *state) opName(name string) string {
	switch name {
	case "mail.send_email":
		return s.sendOp
	case "ledger.transfer":
		return s.transferOp
	case "mail.delivery_status":
		return s.statusOp
	}
	if strings.Contains(name, "/") {
		return name // an implementation, not a contract
	}
	return name + "." + s.id
}

var quoted = regexp.MustCompile(`"([^"]*)"`)

func random(prefix string) string { return prefix + strings.ReplaceAll(uuid.NewString(), "-", "") }

// newHost leases the scenario's destination accounts from its fixture and
// takes the fixture's role keys: the host is the fixture's, shared.
func (s *state) newHost(ctx context.Context, dedup bool) error {
	w := steps.From(ctx)
	if s.described {
		return steps.Fault("the AGL host is described twice")
	}
	f, ok := w.Fixture()
	if !ok || f.Family != family {
		return steps.Fault("an AGL scenario runs on an AGL fixture (tag it @fixture:agl-core or another agl- fixture)")
	}
	s.described, s.dedup = true, dedup
	op, authz, res := fixtures.AGLKeys(w.Env(), f.Name)
	s.keys = keys{operator: op, authority: authz, resolver: res}
	w.Secret(s.keys.operator, s.keys.authority, s.keys.resolver)
	roster := fixtures.AGLRosterEmail
	if dedup {
		roster = fixtures.AGLRosterEmailDedup
	}
	var err error
	if s.mail, err = leaseDestination(w, roster); err != nil {
		return err
	}
	if s.ledger, err = leaseDestination(w, fixtures.AGLRosterLedger); err != nil {
		return err
	}
	return nil
}

// onFixture says the scenario's fixture is name: a host-wide knob a Given
// step states is the fixture's, never the scenario's to set.
func (s *state) onFixture(ctx context.Context, name, what string) error {
	w := steps.From(ctx)
	if !s.described {
		return steps.Fault("describe the AGL host first")
	}
	if f, _ := w.Fixture(); f.Name != name {
		return steps.Fault("%s is fixture %s's setting; the scenario runs on fixture %s (tag it @fixture:%s)", what, name, f.Name, name)
	}
	return nil
}

// secondHost acquires the second host on the shared store: the same section
// (another email destination or deployment policy when asked), labelled
// "second", with the seams on like the first.
func (s *state) secondHost(ctx context.Context) (*target.Host, error) {
	if s.second != nil {
		return s.second, nil
	}
	if !s.shared {
		return nil, steps.Fault("no second host was described")
	}
	h, err := s.storeHost(ctx, "second", s.mail2, s.secondDeployment)
	if err != nil {
		return nil, err
	}
	s.second = h
	return h, nil
}

// storeHost acquires a host of the scenario's own on the first host's
// operation store: the first host's configuration and state directory,
// labelled instance_name, with the scenario's email account sent to moved
// instead and another deployment policy when asked. It is never lent to
// another scenario and stops when the scenario ends.
func (s *state) storeHost(ctx context.Context, label string, moved *destination, deployment []string) (*target.Host, error) {
	w := steps.From(ctx)
	first, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(first.Config.JSON(), &doc); err != nil {
		return nil, steps.Fault("the first host's configuration does not decode: %v", err)
	}
	sec, _ := doc[family].(map[string]any)
	if sec == nil || first.Config.StateDir() == "" {
		return nil, steps.Fault("the first host has no AGL section or no state directory to share")
	}
	if moved != nil {
		if err := moveAccount(sec, s.mail.account, moved.url); err != nil {
			return nil, err
		}
	}
	if deployment != nil {
		sec["deployment"] = map[string]any{"allowed_recipient_domains": deployment}
	}
	// Its own label makes it another configuration, hence another host;
	// the same state directory makes it open the same operation store, and
	// it has its seams too, so that it meets the first at the barrier the
	// two hosts share in their store.
	sec["instance_name"] = label
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, steps.Fault("the %s host's configuration does not encode: %v", label, err)
	}
	cfg, err := target.ParseConfig(raw)
	if err != nil {
		return nil, steps.Fault("the %s host's configuration does not encode: %v", label, err)
	}
	// Held to the published configuration schema, as the fixtures are.
	if err := schemas.ValidateJSON("host-config.json", cfg.JSON()); err != nil {
		return nil, steps.Fault("the %s host's configuration does not satisfy schemas/host-config.json: %v", label, err)
	}
	return w.Acquire(ctx, cfg.WithInstance("agl-"+label+":"+s.id))
}

// base returns the URL of the first or second host. Once a crash is armed,
// the first host is the scenario's own crashing host and the second the
// host it shares its store with (the fixture's), which survives.
func (s *state) base(ctx context.Context, second bool) (string, error) {
	if s.crasher != nil {
		if !second {
			return s.crasher.HTTP, nil
		}
		h, err := steps.From(ctx).Host(ctx)
		if err != nil {
			return "", err
		}
		return h.HTTP, nil
	}
	if second {
		h, err := s.secondHost(ctx)
		if err != nil {
			return "", err
		}
		return h.HTTP, nil
	}
	h, err := steps.From(ctx).Host(ctx)
	if err != nil {
		return "", err
	}
	return h.HTTP, nil
}

// readSecond says where state is read back: at the second host once the
// first has crashed.
func (s *state) readSecond() bool { return s.crashed }

// role names who authenticates a request.
const (
	roleNone      = ""
	roleOperator  = "operator"
	roleAuthority = "authority"
	roleResolver  = "resolver"
)

func (s *state) bearer(role string) string {
	switch role {
	case roleOperator:
		return s.keys.operator
	case roleAuthority:
		return s.keys.authority
	case roleResolver:
		return s.keys.resolver
	case roleNone:
		return ""
	}
	return role // a raw token
}

// exchange is one HTTP exchange with a host under the suite's deadline and
// size limit (World.Exchange).
func exchange(ctx context.Context, w *steps.World, base, method, path string, body []byte, header http.Header) (*steps.Response, error) {
	return w.Exchange(ctx, base, method, path, body, header)
}

// call sends a JSON body (or none) as role to the first or second host.
// record makes it the scenario's last response.
func (s *state) call(ctx context.Context, second bool, method, path, role string, body any, record bool) (*steps.Response, error) {
	w := steps.From(ctx)
	base, err := s.base(ctx, second)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		if raw, err = json.Marshal(b); err != nil {
			return nil, steps.Fault("cannot encode the request body of %s %s: %v", method, path, err)
		}
	}
	if raw != nil {
		h.Set("Content-Type", "application/json")
	}
	if tok := s.bearer(role); tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	r, err := exchange(ctx, w, base, method, path, raw, h)
	if err != nil {
		return nil, err
	}
	if record {
		w.SetLast(r)
	}
	return r, nil
}

// do records the exchange; read does not.
func (s *state) do(ctx context.Context, method, path, role string, body any) (*steps.Response, error) {
	return s.call(ctx, false, method, path, role, body, true)
}

func (s *state) read(ctx context.Context, path, role string) (*steps.Response, map[string]any, error) {
	r, err := s.call(ctx, s.readSecond(), http.MethodGet, path, role, nil, false)
	if err != nil {
		return nil, nil, err
	}
	m, err := r.JSON()
	if err != nil {
		return r, nil, err
	}
	return r, m, nil
}

// got and want turn an unexpected answer to a set-up exchange into the
// failure of the precondition it establishes: the host refused (or did not
// answer, or answered no JSON object to) a step the scenario depends on.
type result struct {
	r   *steps.Response
	err error
}

func got(r *steps.Response, err error) result { return result{r, err} }

func (x result) want(precondition string, statuses ...int) (map[string]any, error) {
	if x.err != nil {
		return nil, steps.Precondition(precondition, x.err)
	}
	for _, st := range statuses {
		if x.r.Status == st {
			m, err := x.r.JSON()
			return m, steps.Precondition(precondition, err)
		}
	}
	return nil, steps.Precondition(precondition, &steps.Failure{Msg: "a step the scenario depends on: " + x.r.Unexpected(statuses...), Exchange: x.r})
}

func str(m map[string]any, path string) string {
	v, _ := steps.Lookup(m, path)
	s, _ := v.(string)
	return s
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an AGL host with a fake email destination the suite counts$`, func(ctx context.Context) error {
		return st(ctx).newHost(ctx, false)
	})
	c.Given(`^an AGL host whose fake email destination deduplicates by idempotency key$`, func(ctx context.Context) error {
		return st(ctx).newHost(ctx, true)
	})
	c.Given(`^the AGL test seams are enabled$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
	c.Given(`^the host's deployment policy allows recipients only in "([^"]*)"$`, func(ctx context.Context, domain string) error {
		if domain != "example.com" {
			return steps.Fault("fixture %s allows recipients in example.com; the scenario asks for %q", fixtures.AGLRestricted, domain)
		}
		return st(ctx).onFixture(ctx, fixtures.AGLRestricted, "a deployment policy")
	})
	c.Given(`^the hosts presume a silent host crashed after (\d+) ms$`, func(ctx context.Context, ms int) error {
		if ms != 1000 {
			return steps.Fault("fixture %s presumes a silent host crashed after 1000 ms; the scenario asks for %d", fixtures.AGLStore, ms)
		}
		return st(ctx).onFixture(ctx, fixtures.AGLStore, "the crash lease")
	})
	c.Given(`^a second AGL host shares the first host's operation store( but sends email to another destination| but its deployment policy allows recipients only in "[^"]*")?$`, func(ctx context.Context, other string) error {
		s, w := st(ctx), steps.From(ctx)
		if !s.described {
			return steps.Fault("describe the AGL host first")
		}
		if m := quoted.FindStringSubmatch(other); m != nil {
			s.secondDeployment = csv(m[1])
			other = ""
		}
		s.shared = true
		if other != "" {
			var err error
			roster := fixtures.AGLRosterEmail
			if s.dedup {
				roster = fixtures.AGLRosterEmailDedup
			}
			if s.mail2, err = leaseDestination(w, roster); err != nil {
				return err
			}
		}
		if err := w.RequireSeams(); err != nil {
			return err
		}
		// The first host keeps its store in a state directory of the
		// scenario's own; the second is given the same directory.
		return w.KeepState()
	})
	c.Given(`^the email contract is registered as deduplicated by destination key with up to (\d+) attempts(?:, (\d+) ms apart)?(?:, retrying only on (\w+))?$`, func(ctx context.Context, n int, backoff, retryOn string) error {
		s := st(ctx)
		if s.ready {
			return steps.Fault("the contracts are already registered")
		}
		s.emailIdem, s.emailAttempts = "destination_key", n
		if backoff != "" {
			if _, err := fmt.Sscan(backoff, &s.emailBackoff); err != nil {
				return steps.Fault("backoff %q: %v", backoff, err)
			}
		}
		if retryOn != "" {
			s.emailRetryOn = []string{retryOn}
		}
		return nil
	})
	c.Given(`^a principal whose agent may use the email and transfer operations under a grant from the authorization service$`, func(ctx context.Context) error {
		st(ctx).wantSetup = true
		return nil
	})
}

// ensure performs the set-up the Given steps described, at the first
// exchange: the two contracts, the agent and the principal's grant.
func (s *state) ensure(ctx context.Context) error {
	if s.ready {
		return nil
	}
	if !s.wantSetup || !s.described {
		return steps.Fault("no AGL host and principal were described")
	}
	s.ready = true
	id := s.id
	s.exec = "exec-" + id
	s.me = actor{principal: "alice-" + id, agent: "agent-" + id, mailbox: "ops-" + id + "@example.com", account: "acct-" + id}
	if _, err := got(s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, s.emailContract(ctx, s.sendOp, "1", s.emailAttempts))).want(preContracts, 201); err != nil {
		return err
	}
	if _, err := got(s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, s.transferContract(ctx, s.transferOp, []string{"external_write", "financial_write"}))).want(preContracts, 201); err != nil {
		return err
	}
	if err := s.putAgent(ctx, s.me, []string{s.sendOp, s.transferOp}, []string{"external_write", "email_send", "financial_write"}); err != nil {
		return err
	}
	r, err := s.do(ctx, http.MethodPost, api+"/grants", roleAuthority, s.grantBody(s.me.principal, []string{s.sendOp, s.transferOp},
		[]string{s.me.mailbox}, []string{s.me.account}, nil))
	g, err := got(r, err).want(preGrant, 201)
	if err != nil {
		return err
	}
	s.me.grantID, s.me.grantToken = str(g, "grant_id"), str(g, "grant_token")
	steps.From(ctx).Secret(s.me.grantToken)
	if s.me.grantID == "" || s.me.grantToken == "" {
		return steps.Precondition(preGrant, &steps.Failure{Msg: "the grant the authorization service issued carries no grant_id or grant_token: " + r.String(), Exchange: r})
	}
	return nil
}

func (s *state) putAgent(ctx context.Context, a actor, tools, ceiling []string) error {
	_, err := got(s.do(ctx, http.MethodPut, api+"/agents/"+a.agent, roleOperator, map[string]any{
		"principal": a.principal, "tools": tools, "effect_ceiling": ceiling})).want(preAgent, 200)
	return err
}

func (s *state) grantBody(subject string, ops, mailboxes, accounts []string, extra map[string]any) map[string]any {
	res := []any{}
	if len(mailboxes) > 0 {
		res = append(res, map[string]any{"kind": "mailbox", "ids": mailboxes})
	}
	if len(accounts) > 0 {
		res = append(res, map[string]any{"kind": "account", "ids": accounts})
	}
	b := map[string]any{"subject": subject, "operations": ops, "resources": res, "ttl_seconds": 3600}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// implementationFingerprint learns a trusted handler's fingerprint from
// the host's own listing.
func (s *state) implementationFingerprint(ctx context.Context, name string) string {
	if s.implementation == nil {
		s.implementation = map[string]string{}
		if _, m, err := s.read(ctx, api+"/implementations", roleNone); err == nil {
			list, _ := m["implementations"].([]any)
			for _, e := range list {
				im, _ := e.(map[string]any)
				s.implementation[str(im, "name")] = str(im, "fingerprint")
			}
		}
	}
	return s.implementation[name]
}

func (s *state) emailContract(ctx context.Context, name, version string, attempts int) map[string]any {
	c := map[string]any{
		"qualified_name": name, "contract_version": version, "implementation": "email.send/v1",
		"implementation_fingerprint": s.implementationFingerprint(ctx, "email.send/v1"),
		"input_type": map[string]any{"type": "object", "required": []string{"draft"},
			"properties": map[string]any{"draft": map[string]any{"type": "string", "x-agl-handle": "email_draft"}}},
		"output_type": map[string]any{"type": "object", "required": []string{"message_id"},
			"properties": map[string]any{"message_id": map[string]any{"type": "string"}}},
		"authority_requirements": []any{map[string]any{"kind": "mailbox", "select": "/draft/payload/from"}},
		"possible_effects":       []string{"external_write", "email_send"},
		"protocol_preconditions": []any{map[string]any{"argument": "/draft", "state": "Authorized"}},
		"protocol_outcomes":      map[string]any{"success": "Sent", "no_effect": "FailedNoEffect", "uncertain": "Unknown"},
		"approval_requirement":   map[string]any{"required": true, "role": "operator"},
		"idempotency_contract":   map[string]any{"kind": s.emailIdem},
		"scheduling_contract":    s.emailScheduling(attempts),
	}
	if s.emailOutput != nil {
		c["output_type"] = s.emailOutput
	}
	if s.mail != nil {
		c["destination_account"] = s.mail.account
	}
	return c
}

func (s *state) emailScheduling(attempts int) map[string]any {
	sc := map[string]any{"max_attempts": attempts}
	if s.handlerTimeout > 0 {
		sc["timeout_ms"] = s.handlerTimeout
	}
	if s.emailBackoff > 0 {
		sc["backoff_ms"] = s.emailBackoff
	}
	if s.emailRetryOn != nil {
		sc["retry_on"] = s.emailRetryOn
	}
	return sc
}

func (s *state) transferContract(ctx context.Context, name string, effects []string) map[string]any {
	c := map[string]any{
		"qualified_name": name, "contract_version": "1", "implementation": "webhook.post/v1",
		"implementation_fingerprint": s.implementationFingerprint(ctx, "webhook.post/v1"),
		"input_type": map[string]any{"type": "object", "required": []string{"account", "recipient", "amount"},
			"properties": map[string]any{
				"account":   map[string]any{"type": "string"},
				"recipient": map[string]any{"type": "string"},
				"amount":    map[string]any{"type": "integer", "minimum": 1},
				"currency":  map[string]any{"type": "string", "enum": []string{"EUR", "USD"}, "default": "EUR"},
			}},
		"authority_requirements": []any{map[string]any{"kind": "account", "select": "/account"}},
		"possible_effects":       effects,
		"approval_requirement":   map[string]any{"required": true, "role": "treasurer"},
		"idempotency_contract":   map[string]any{"kind": "none"},
		"scheduling_contract":    map[string]any{"max_attempts": 1},
	}
	if s.ledger != nil {
		c["destination_account"] = s.ledger.account
	}
	return c
}

// moveAccount points the email account named account, in a host
// configuration's AGL section, at another destination URL (the same account
// name, moved).
func moveAccount(sec map[string]any, account, url string) error {
	email, _ := sec["email"].(map[string]any)
	list, _ := email["accounts"].([]any)
	for _, e := range list {
		if a, _ := e.(map[string]any); str(a, "account") == account {
			a["url"] = url
			return nil
		}
	}
	return steps.Fault("account %s is not in the host's configuration", account)
}
