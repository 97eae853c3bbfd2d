// Package openwop binds the OpenWOP RFC 0242 features (features/openwop) to a
// host's wire: discovery (GET /.well-known/openwop), the inbound A2A agent
// card, A2A JSON-RPC and MCP initialize, the host-event stream (GET /host/events), a run's
// log (GET /runs/{runId}/events/poll) and, for the outbound direction, the
// sample invoke seams driven against fake peers that the suite itself runs.
//
// Scenarios share one host per configuration and run concurrently, so every
// inbound exchange names a fresh workspace (OpenWOP-Workspace-Id) and a step
// picks its own record out of a tenant's stream by that workspace, never by
// trusting the host to filter for it. Every tenant's stream is opened before
// the scenario's first inbound exchange, so that a record the host delivers
// only live (without replaying history) is seen too, on whichever stream it
// reaches.
//
// Durable host events (durable.go): a new subscription must replay what was
// recorded before it opened, a resumed one (Last-Event-ID) must continue
// after the record it names, and both hold across a restart or crash of a
// host of the scenario's own; a record without a tenant must reach no
// tenant's stream.
//
// Preconditions (scenarios/openwop.toml [[precondition]]): reading discovery
// to find where the host serves a protocol inbound, the JSON-RPC endpoint
// the agent card names, subscribing to each tenant's host-event stream, the
// barrier exchange whose own record proves that a stream has caught up, and
// a new subscription replaying (what a durability check reads with). When
// the host gets one wrong, a scenario that does not witness the requirement
// behind it is blocked naming that requirement, whose own scenario fails.
package openwop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/steps"
)

const family = "openwop"

// Precondition ids (scenarios/openwop.toml).
const (
	// preDiscovery: discovery answers a JSON document whose inbound facet
	// names a URL the suite can follow.
	preDiscovery = "openwop.precondition.discovery"
	// preBarrierA2A and preBarrierMCP: an accepted inbound exchange at the
	// preferred version reaches its tenant's stream as a record.
	preBarrierA2A = "openwop.precondition.a2a-barrier-recorded"
	preBarrierMCP = "openwop.precondition.mcp-barrier-recorded"
	// preSubscribed: every tenant can subscribe to its host-event stream.
	preSubscribed = "openwop.precondition.host-events-subscription"
	// preRPCEndpoint: the agent card names the A2A JSON-RPC endpoint.
	preRPCEndpoint = "openwop.precondition.a2a-jsonrpc-endpoint"
	// preReplay: a new subscription without Last-Event-ID delivers records
	// made before it opened (what a durability check reads with).
	preReplay = "openwop.precondition.fresh-subscription-replays"
	// preAgreedVersion: an accepted negotiation's record names the version
	// agreed (the downgrade id's rule), which a scenario about another
	// member of the record only relies on.
	preAgreedVersion = "openwop.precondition.record-agreed-version"
)

// Preconditions lists every precondition id the package names, for the
// test that holds them to the registry.
func Preconditions() []string {
	return []string{preDiscovery, preBarrierA2A, preBarrierMCP, preSubscribed, preRPCEndpoint, preReplay, preAgreedVersion}
}

// Register binds every OpenWOP step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerOutbound(c)
	registerInbound(c)
	registerEvents(c)
	registerRecord(c)
	registerDurable(c)
	registerIsolation(c)
	registerLegacy(c)
	registerModel(c)
	registerConcurrent(c)
}

// versionRange is what a Given step configured for one protocol.
type versionRange struct {
	versions         []string
	floor, preferred string
}

// state is one scenario's OpenWOP state.
type state struct {
	mu      sync.Mutex
	keys    map[string]string // tenant name -> API key
	tenants []string          // in the order the Given step named them
	a2a     versionRange
	mcp     versionRange
	disc    map[string]any    // discovery document, once read
	serves  map[string]string // protocol -> inbound URL, once a Setup step found it
	want    map[string]bool   // protocols a Setup step asked to serve inbound
	rpc     string            // the A2A JSON-RPC endpoint the agent card advertises, once read
	peer    *a2a.Peer
	server  *mcp.Server
	seam    *seamCall
	inbound *exchange
	// made lists, in order, every inbound exchange the scenario made to
	// build on (durable.go); own maps a tenant to the workspaces of every
	// exchange made as that tenant.
	made    []*exchange
	own     map[string]map[string]bool
	streams map[string]*tenantStream
	// retired keeps, per tenant, the frames of streams a restart ended, so
	// that what a tenant was delivered before it stays known.
	retired map[string][]frameRec
	hooked  bool
	extra   *tenantStream // a stream opened by a resume or fresh-subscription step
	anchor  *exchange     // the exchange a replay precondition was shown with
	record  *record
	model   *modelRun  // what the model sequences found (model.go)
	concur  *concurRun // the concurrent history (concurrent.go)
}

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		return &state{keys: map[string]string{}, streams: map[string]*tenantStream{}, serves: map[string]string{},
			want: map[string]bool{}, own: map[string]map[string]bool{}, retired: map[string][]frameRec{}}
	}).(*state)
}

// caller is who makes an inbound exchange: a configured tenant with its
// key, or an anonymous caller (no Authorization header at all).
type caller struct {
	tenant string // "" for an anonymous caller
	key    string
}

func (c caller) String() string {
	if c.tenant == "" {
		return "an anonymous caller"
	}
	return fmt.Sprintf("tenant %q", c.tenant)
}

func (s *state) caller(tenant string) (caller, error) {
	k, err := s.key(tenant)
	if err != nil {
		return caller{}, err
	}
	return caller{tenant: tenant, key: k}, nil
}

// noteOwn records that tenant made an exchange under workspace.
func (s *state) noteOwn(c caller, workspace string) {
	if c.tenant == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own[c.tenant] == nil {
		s.own[c.tenant] = map[string]bool{}
	}
	s.own[c.tenant][workspace] = true
}

// preferred is the version the scenario configured the host to prefer.
func (s *state) preferred(protocol string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if protocol == "MCP" {
		return s.mcp.preferred
	}
	return s.a2a.preferred
}

// section is the OpenWOP section of the scenario's fixture.
func section(ctx context.Context) (map[string]any, string, error) {
	w := steps.From(ctx)
	f, ok := w.Fixture()
	if !ok || f.Family != family {
		return nil, "", steps.Fault("the scenario describes an OpenWOP host but runs on no OpenWOP fixture (tag it @fixture:openwop-...)")
	}
	cfg, err := w.Config()
	if err != nil {
		return nil, "", err
	}
	var m map[string]any
	if err := json.Unmarshal(cfg.Section(family), &m); err != nil || m == nil {
		return nil, "", steps.Fault("fixture %s has no OpenWOP section", f.Name)
	}
	return m, f.Name, nil
}

// providesRange checks that the fixture speaks the range a Given step
// describes.
func providesRange(ctx context.Context, protocol string, r versionRange) error {
	m, name, err := section(ctx)
	if err != nil {
		return err
	}
	got, _ := m[protocol].(map[string]any)
	vs, _ := got["versions"].([]any)
	same := got["floor"] == r.floor && got["preferred"] == r.preferred && len(vs) == len(r.versions)
	for _, v := range r.versions {
		same = same && slices.Contains(vs, any(v))
	}
	if !same {
		return steps.Fault("the scenario describes a host speaking %s %v (floor %s, preferred %s), and fixture %s speaks %s", protocol, r.versions, r.floor, r.preferred, name, steps.Text(got))
	}
	return nil
}

func (s *state) key(tenant string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[tenant]
	if !ok {
		return "", steps.Fault("tenant %q is not among the host's configured tenants", tenant)
	}
	return k, nil
}

func splitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an OpenWOP host that speaks A2A versions "([^"]*)" with floor "([^"]*)" and preferred "([^"]*)"$`, func(ctx context.Context, vs, floor, pref string) error {
		r := versionRange{versions: splitCSV(vs), floor: floor, preferred: pref}
		s := st(ctx)
		s.mu.Lock()
		s.a2a = r
		s.mu.Unlock()
		return providesRange(ctx, "a2a", r)
	})
	c.Given(`^that speaks MCP revisions "([^"]*)" with floor "([^"]*)" and preferred "([^"]*)"$`, func(ctx context.Context, vs, floor, pref string) error {
		r := versionRange{versions: splitCSV(vs), floor: floor, preferred: pref}
		s := st(ctx)
		s.mu.Lock()
		s.mcp = r
		s.mu.Unlock()
		return providesRange(ctx, "mcp", r)
	})
	c.Given(`^the OpenWOP host has tenants "([^"]*)" and "([^"]*)"$`, func(ctx context.Context, a, b string) error {
		if a == b {
			return steps.Fault("two tenants need two names")
		}
		// The names are the scenario's own: each stands for a tenant of the
		// fixture's roster leased for this scenario alone, so that its
		// host-event stream holds no other scenario's records.
		w, s := steps.From(ctx), st(ctx)
		f, ok := w.Fixture()
		if !ok {
			return steps.Fault("the scenario leases tenants but runs on no fixture (tag it @fixture:openwop-...)")
		}
		for _, t := range []string{a, b} {
			i, _, err := w.Lease(fixtures.OWTenants)
			if err != nil {
				return err
			}
			key := fixtures.OWAPIKey(w.Env(), f.Name, i)
			w.Secret(key)
			s.mu.Lock()
			s.keys[t] = key
			s.tenants = append(s.tenants, t)
			s.mu.Unlock()
		}
		return nil
	})
	c.Given(`^the outbound negotiation seams are enabled$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
	c.Setup(preDiscovery, `^the host serves (A2A|MCP) inbound$`, func(ctx context.Context, protocol string) error {
		return servesInbound(ctx, protocol)
	})
	c.When(`^the suite reads the host's discovery document$`, func(ctx context.Context) error {
		_, err := discovery(ctx, true)
		return err
	})
	c.Then(`^the host advertises an inbound A2A or MCP facet, each naming an http\(s\) URL$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		doc, err := discovery(ctx, false)
		if err != nil {
			return err
		}
		advertisedAny := false
		for _, protocol := range []string{"A2A", "MCP"} {
			f := inboundFacet(doc, protocol)
			if !f.present {
				continue
			}
			advertisedAny = true
			if err := w.Assert(f.problem == "", "the discovery document advertises %s, but %s: %s", f.field, f.problem, steps.Text(doc)); err != nil {
				return err
			}
			if _, err := advertised(ctx, f.field, f.raw); err != nil {
				return err
			}
		}
		if !advertisedAny {
			return w.Inapplicable("the discovery document advertises none of a2a.agentCardUrl, mcp.serverUrls, mcp.serverMount: the host serves neither protocol inbound, so RFC 0242 §B.3 does not bind it")
		}
		return nil
	})
	c.Then(`^its hostEvents\.types lists "([^"]*)" with delivery "([^"]*)"$`, func(ctx context.Context, typ, delivery string) error {
		w := steps.From(ctx)
		doc, err := discovery(ctx, false)
		if err != nil {
			return err
		}
		he, ok := doc["hostEvents"].(map[string]any)
		if err := w.Assert(ok, "the host advertises an inbound facet but no hostEvents object: %s", steps.Text(doc)); err != nil {
			return err
		}
		types, ok := he["types"].([]any)
		if err := w.Assert(ok, "hostEvents.types is not an array: %s", steps.Text(he)); err != nil {
			return err
		}
		listed := false
		for _, t := range types {
			if e, _ := t.(map[string]any); e != nil && e["type"] == typ && e["delivery"] == delivery {
				listed = true
			}
		}
		return w.Assert(listed, "hostEvents.types does not list {type: %q, delivery: %q}: %s", typ, delivery, steps.Text(types))
	})
}

// facet is what the discovery document says about one protocol inbound.
type facet struct {
	present bool   // the document advertises the protocol inbound
	field   string // the field that advertises it
	raw     string // the URL (or mount path) it names
	problem string // why that is not a URL, when it is not
}

// inboundFacet reads where the host serves protocol inbound (RFC 0242 §B.3
// names the fields): A2A at a2a.agentCardUrl; MCP at the first of
// mcp.serverUrls, else at mcp.serverMount.
func inboundFacet(doc map[string]any, protocol string) facet {
	str := func(field string) facet {
		v, ok := steps.Lookup(doc, field)
		if !ok || v == nil || v == "" {
			return facet{field: field}
		}
		s, isStr := v.(string)
		if !isStr {
			return facet{present: true, field: field, problem: "it is " + steps.Text(v) + ", not a string"}
		}
		return facet{present: true, field: field, raw: s}
	}
	if protocol == "A2A" {
		return str("a2a.agentCardUrl")
	}
	if v, ok := steps.Lookup(doc, "mcp.serverUrls"); ok && v != nil {
		l, isList := v.([]any)
		switch {
		case !isList:
			return facet{present: true, field: "mcp.serverUrls", problem: "it is " + steps.Text(v) + ", not an array"}
		case len(l) > 0:
			s, isStr := l[0].(string)
			if !isStr || s == "" {
				return facet{present: true, field: "mcp.serverUrls", problem: "its first entry is " + steps.Text(l[0]) + ", not a URL"}
			}
			return facet{present: true, field: "mcp.serverUrls", raw: s}
		}
	}
	f := str("mcp.serverMount")
	if !f.present {
		f.field = "mcp.serverUrls or mcp.serverMount"
	}
	return f
}

// servesInbound is the precondition of every inbound scenario: the host's
// discovery document names where it serves the protocol inbound. A host
// that does not advertise the facet does not serve the protocol inbound, and
// the requirement is inapplicable to it (RFC 0242 §D gates the inbound leg
// on these fields).
func servesInbound(ctx context.Context, protocol string) error {
	w, s := steps.From(ctx), st(ctx)
	doc, err := discovery(ctx, false)
	if err != nil {
		return err
	}
	f := inboundFacet(doc, protocol)
	if !f.present {
		return w.Inapplicable("the host's discovery document advertises no " + f.field + ": it serves no " + protocol + " inbound")
	}
	if err := w.Assert(f.problem == "", "the discovery document advertises %s, but %s", f.field, f.problem); err != nil {
		return err
	}
	u, err := advertised(ctx, f.field, f.raw)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.serves[protocol] = u
	s.want[protocol] = true
	s.mu.Unlock()
	return nil
}

// inboundURL is where the host serves protocol inbound, as the scenario's
// Setup step found it. After a restart (the host's address may have
// changed) it reads discovery again.
func inboundURL(ctx context.Context, protocol string) (string, error) {
	s := st(ctx)
	s.mu.Lock()
	u, ok := s.serves[protocol]
	want := s.want[protocol]
	s.mu.Unlock()
	if ok {
		return u, nil
	}
	if !want {
		return "", steps.Fault("an inbound %s exchange needs \"Given the host serves %s inbound\" among the scenario's steps", protocol, protocol)
	}
	if err := servesInbound(ctx, protocol); err != nil {
		return "", steps.Precondition(preDiscovery, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serves[protocol], nil
}

// discovery reads GET /.well-known/openwop once per scenario. record makes
// the read the scenario's last response.
func discovery(ctx context.Context, record bool) (map[string]any, error) {
	w, s := steps.From(ctx), st(ctx)
	s.mu.Lock()
	doc := s.disc
	s.mu.Unlock()
	if doc != nil && !record {
		return doc, nil
	}
	hdr := http.Header{"Accept": {"application/json"}}
	var r *steps.Response
	var err error
	if record {
		r, err = w.Do(ctx, http.MethodGet, "/.well-known/openwop", nil, hdr)
	} else {
		r, err = w.Fetch(ctx, http.MethodGet, "/.well-known/openwop", nil, hdr)
	}
	if err != nil {
		return nil, err
	}
	if err := w.Assert(r.Status == http.StatusOK, "discovery: expected 200: %s", r); err != nil {
		return nil, err
	}
	doc, err = r.JSON()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.disc = doc
	s.mu.Unlock()
	return doc, nil
}

// advertised resolves a URL the discovery document names (in field) against
// the host's base URL. Only http and https are followed; anything else is
// the host's failure.
func advertised(ctx context.Context, field, raw string) (string, error) {
	w := steps.From(ctx)
	h, err := w.Host(ctx)
	if err != nil {
		return "", err
	}
	base, err := url.Parse(h.HTTP + "/")
	if err != nil {
		return "", steps.Fail("the host's HTTP address %q is not a URL: %v", h.HTTP, err)
	}
	ref, perr := url.Parse(raw)
	if err := w.Assert(perr == nil, "the discovery document's %s is %q, not a URL (%v)", field, raw, perr); err != nil {
		return "", err
	}
	u := base.ResolveReference(ref)
	if err := w.Assert(u.Scheme == "http" || u.Scheme == "https", "the discovery document's %s is %q, which is not an http(s) URL", field, raw); err != nil {
		return "", err
	}
	return u.String(), nil
}
