// Package openwop binds the OpenWOP RFC 0242 features (features/openwop) to a
// host's wire: discovery (GET /.well-known/openwop), the inbound A2A agent
// card and MCP initialize, the host-event stream (GET /host/events), a run's
// log (GET /runs/{runId}/events/poll) and, for the outbound direction, the
// sample invoke seams driven against fake peers that the suite itself runs.
//
// Scenarios share one host per configuration and run concurrently, so every
// inbound exchange names a fresh workspace (OpenWOP-Workspace-Id) and a step
// picks its own record out of a tenant's stream by that workspace, never by
// trusting the host to filter for it.
package openwop

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/steps"
)

const family = "openwop"

// Register binds every OpenWOP step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerOutbound(c)
	registerInbound(c)
	registerEvents(c)
	registerRecord(c)
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
	a2a     versionRange
	mcp     versionRange
	disc    map[string]any // discovery document, once read
	peer    *a2a.Peer
	server  *mcp.Server
	seam    *seamCall
	inbound *exchange
	streams map[string]*tenantStream
	record  *record
}

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		return &state{keys: map[string]string{}, streams: map[string]*tenantStream{}}
	}).(*state)
}

func configure(ctx context.Context, edit func(map[string]any)) error {
	return steps.From(ctx).Configure(family, edit)
}

// keyFor derives a tenant's API key from its name. It is deterministic, so
// every scenario that names the same tenants describes the same host
// configuration and shares one host.
func keyFor(tenant string) string { return "parley-openwop-key-" + tenant }

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

func rangeSection(r versionRange) map[string]any {
	vs := make([]any, len(r.versions))
	for i, v := range r.versions {
		vs[i] = v
	}
	return map[string]any{"versions": vs, "floor": r.floor, "preferred": r.preferred}
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an OpenWOP host that speaks A2A versions "([^"]*)" with floor "([^"]*)" and preferred "([^"]*)"$`, func(ctx context.Context, vs, floor, pref string) error {
		r := versionRange{versions: splitCSV(vs), floor: floor, preferred: pref}
		s := st(ctx)
		s.mu.Lock()
		s.a2a = r
		s.mu.Unlock()
		return configure(ctx, func(m map[string]any) { m["a2a"] = rangeSection(r) })
	})
	c.Given(`^that speaks MCP revisions "([^"]*)" with floor "([^"]*)" and preferred "([^"]*)"$`, func(ctx context.Context, vs, floor, pref string) error {
		r := versionRange{versions: splitCSV(vs), floor: floor, preferred: pref}
		s := st(ctx)
		s.mu.Lock()
		s.mcp = r
		s.mu.Unlock()
		return configure(ctx, func(m map[string]any) { m["mcp"] = rangeSection(r) })
	})
	c.Given(`^the OpenWOP host has tenants "([^"]*)" and "([^"]*)"$`, func(ctx context.Context, a, b string) error {
		if a == b {
			return steps.Fault("two tenants need two names")
		}
		s := st(ctx)
		var tenants []any
		s.mu.Lock()
		for _, t := range []string{a, b} {
			s.keys[t] = keyFor(t)
			tenants = append(tenants, map[string]any{"id": t, "api_keys": []any{keyFor(t)}})
		}
		s.mu.Unlock()
		return configure(ctx, func(m map[string]any) { m["tenants"] = tenants })
	})
	c.Given(`^the outbound negotiation seams are enabled$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
	c.When(`^the suite reads the host's discovery document$`, func(ctx context.Context) error {
		_, err := discovery(ctx, true)
		return err
	})
	c.Then(`^the host advertises an inbound A2A or MCP facet$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		doc, err := discovery(ctx, false)
		if err != nil {
			return err
		}
		facets := inboundFacets(doc)
		if len(facets) == 0 {
			return w.Inapplicable("the discovery document advertises none of a2a.agentCardUrl, mcp.serverUrls, mcp.serverMount: the host serves neither protocol inbound, so RFC 0242 §B.3 does not bind it")
		}
		return w.Assert(true, "")
	})
	c.Given(`^its hostEvents\.types lists "([^"]*)" with delivery "([^"]*)"$`, func(ctx context.Context, typ, delivery string) error {
		w := steps.From(ctx)
		doc, err := discovery(ctx, false)
		if err != nil {
			return err
		}
		he, ok := doc["hostEvents"].(map[string]any)
		if err := w.Assert(ok, "the host advertises %s but no hostEvents object: %s", strings.Join(inboundFacets(doc), ", "), steps.Text(doc)); err != nil {
			return err
		}
		types, ok := he["types"].([]any)
		if err := w.Assert(ok, "hostEvents.types is not an array: %s", steps.Text(he)); err != nil {
			return err
		}
		for _, t := range types {
			e, _ := t.(map[string]any)
			if e != nil && e["type"] == typ && e["delivery"] == delivery {
				return w.Assert(true, "")
			}
		}
		return w.Assert(false, "hostEvents.types does not list {type: %q, delivery: %q}: %s", typ, delivery, steps.Text(types))
	})
}

// inboundFacets names the discovery fields that say the host serves A2A or
// MCP inbound (RFC 0242 §B.3).
func inboundFacets(doc map[string]any) []string {
	var out []string
	if s, _ := steps.Lookup(doc, "a2a.agentCardUrl"); s != nil && s != "" {
		out = append(out, "a2a.agentCardUrl")
	}
	if v, _ := steps.Lookup(doc, "mcp.serverUrls"); v != nil {
		if l, ok := v.([]any); !ok || len(l) > 0 {
			out = append(out, "mcp.serverUrls")
		}
	}
	if s, _ := steps.Lookup(doc, "mcp.serverMount"); s != nil && s != "" {
		out = append(out, "mcp.serverMount")
	}
	return out
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
	if err := w.Assert(r.Status == http.StatusOK, "discovery: %s", r); err != nil {
		return nil, err
	}
	doc, err = r.JSON()
	if err != nil {
		return nil, w.Assert(false, "discovery: %v", err)
	}
	s.mu.Lock()
	s.disc = doc
	s.mu.Unlock()
	return doc, nil
}

// advertised resolves a URL the discovery document names against the host's
// base URL. Only http and https are followed.
func advertised(ctx context.Context, raw string) (string, error) {
	h, err := steps.From(ctx).Host(ctx)
	if err != nil {
		return "", err
	}
	base, err := url.Parse(h.HTTP + "/")
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("the discovery document names a malformed URL %q: %v", raw, err)
	}
	u := base.ResolveReference(ref)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("the discovery document names %q, which is not an http(s) URL", raw)
	}
	return u.String(), nil
}
