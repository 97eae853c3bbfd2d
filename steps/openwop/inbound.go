package openwop

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/steps"
)

// exchange is one inbound negotiation the suite made as a client.
type exchange struct {
	protocol  string // A2A or MCP
	tenant    string
	workspace string // the marker its record must carry
	named     string // the version the suite named
	status    int
	version   string // what the host answered with, "" when it refused
	refused   bool
	detail    string // for failure messages
}

// workspaceFor returns a fresh workspace id: the marker by which the suite
// finds the record of one exchange among everything a shared host records.
func workspaceFor(what string) string { return "parley-" + what + "-" + uuid.NewString() }

func registerInbound(c *steps.Catalog) {
	c.When(`^tenant "([^"]*)" fetches the host's agent card naming A2A version "([^"]*)"$`, func(ctx context.Context, tenant, version string) error {
		x, err := inboundA2A(ctx, tenant, version, workspaceFor("a2a"))
		if err != nil {
			return err
		}
		st(ctx).setInbound(x)
		return nil
	})
	c.When(`^tenant "([^"]*)" initializes an MCP session with the host naming revision "([^"]*)"$`, func(ctx context.Context, tenant, version string) error {
		x, err := inboundMCP(ctx, tenant, version, workspaceFor("mcp"))
		if err != nil {
			return err
		}
		st(ctx).setInbound(x)
		return nil
	})
	c.Then(`^the host answers in (A2A version|MCP revision) "([^"]*)"$`, func(ctx context.Context, what, want string) error {
		w := steps.From(ctx)
		x, err := st(ctx).lastInbound()
		if err != nil {
			return err
		}
		return w.Assert(!x.refused && x.version == want, "the host answered %s, want %s %q", x.detail, what, want)
	})
	c.Then(`^the host refuses the (A2A|MCP) exchange$`, func(ctx context.Context, protocol string) error {
		w := steps.From(ctx)
		x, err := st(ctx).lastInbound()
		if err != nil {
			return err
		}
		return w.Assert(x.refused, "the host did not refuse: it answered %s", x.detail)
	})
}

func (s *state) setInbound(x *exchange) {
	s.mu.Lock()
	s.inbound = x
	s.mu.Unlock()
}

func (s *state) lastInbound() (*exchange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inbound == nil {
		return nil, steps.Fault("no inbound exchange yet")
	}
	return s.inbound, nil
}

// inboundURL finds where the host serves a protocol inbound, from its
// discovery document. A host that does not advertise the facet does not
// serve the protocol inbound, and the inbound leg is inapplicable to it
// (RFC 0242 §D gates it on these fields).
func inboundURL(ctx context.Context, protocol string) (string, error) {
	w := steps.From(ctx)
	doc, err := discovery(ctx, false)
	if err != nil {
		return "", err
	}
	var raw string
	switch protocol {
	case "A2A":
		raw, _ = lookupString(doc, "a2a.agentCardUrl")
	case "MCP":
		if l, _ := steps.Lookup(doc, "mcp.serverUrls"); l != nil {
			if urls, ok := l.([]any); ok && len(urls) > 0 {
				raw, _ = urls[0].(string)
			}
		}
		if raw == "" {
			raw, _ = lookupString(doc, "mcp.serverMount")
		}
	}
	if raw == "" {
		field := map[string]string{"A2A": "a2a.agentCardUrl", "MCP": "mcp.serverUrls or mcp.serverMount"}[protocol]
		return "", w.Inapplicable(fmt.Sprintf("the host's discovery document advertises no %s: it serves no %s inbound", field, protocol))
	}
	u, err := advertised(ctx, raw)
	if err != nil {
		return "", w.Assert(false, "%v", err)
	}
	return u, nil
}

// lookupString is steps.Lookup for a string field.
func lookupString(doc map[string]any, path string) (string, bool) {
	v, ok := steps.Lookup(doc, path)
	s, isStr := v.(string)
	return s, ok && isStr
}

// inboundA2A fetches the host's agent card as tenant, naming version in
// A2A-Version and the workspace in OpenWOP-Workspace-Id.
func inboundA2A(ctx context.Context, tenant, version, workspace string) (*exchange, error) {
	key, err := st(ctx).key(tenant)
	if err != nil {
		return nil, err
	}
	card, err := inboundURL(ctx, "A2A")
	if err != nil {
		return nil, err
	}
	c := a2a.Client{APIKey: key, Workspace: workspace, Timeout: steps.ExchangeTimeout}
	r, err := c.FetchAgentCard(ctx, card, version)
	if err != nil {
		return nil, fmt.Errorf("fetching the agent card at %s: %w", card, err)
	}
	x := &exchange{protocol: "A2A", tenant: tenant, workspace: workspace, named: version, status: r.Status}
	x.detail = fmt.Sprintf("%d, A2A-Version %q, %s", r.Status, r.Version, clip(r.Body))
	if r.Status >= 200 && r.Status < 300 {
		// The negotiated version travels in the A2A-Version header; a card
		// without it answers in its own protocolVersion.
		x.version = strings.TrimSpace(r.Version)
		if x.version == "" && r.JSON != nil {
			x.version, _ = r.JSON["protocolVersion"].(string)
		}
	} else {
		x.refused = r.Status >= 400 && r.Status < 500
	}
	return x, nil
}

// inboundMCP sends initialize as tenant, naming version in protocolVersion
// (and the MCP-Protocol-Version header) and the workspace.
func inboundMCP(ctx context.Context, tenant, version, workspace string) (*exchange, error) {
	key, err := st(ctx).key(tenant)
	if err != nil {
		return nil, err
	}
	server, err := inboundURL(ctx, "MCP")
	if err != nil {
		return nil, err
	}
	c := mcp.Client{APIKey: key, Workspace: workspace, Timeout: steps.ExchangeTimeout}
	r, err := c.Initialize(ctx, server, version)
	if err != nil {
		return nil, fmt.Errorf("initialize at %s: %w", server, err)
	}
	x := &exchange{protocol: "MCP", tenant: tenant, workspace: workspace, named: version, status: r.Status}
	x.detail = fmt.Sprintf("%d %s", r.Status, clip(r.Body))
	switch {
	case r.Error != nil:
		// A JSON-RPC error answer to initialize is a refusal.
		x.refused = true
	case r.Status >= 200 && r.Status < 300:
		x.version = r.ProtocolVersion
	default:
		x.refused = r.Status >= 400 && r.Status < 500
	}
	if r.SessionID != "" && !x.refused {
		// Leave nothing behind on a shared host.
		steps.From(ctx).Cleanup(func() { endMCPSession(server, key, r.SessionID) })
	}
	return x, nil
}

// endMCPSession deletes a session the suite opened; failures are ignored.
func endMCPSession(server, key, session string) {
	ctx, cancel := context.WithTimeout(context.Background(), steps.ExchangeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, server, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set(mcp.SessionHeader, session)
	resp, err := (&http.Client{Timeout: steps.ExchangeTimeout}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
}

// barrier makes one more exchange of the same protocol, as tenant, naming
// the preferred version under a fresh workspace. Its record, once it arrives
// on a tenant's stream, marks the point by which any record of an earlier
// exchange (to that tenant or leaked to it) must have arrived as well.
func barrier(ctx context.Context, tenant, protocol string) (string, error) {
	s := st(ctx)
	s.mu.Lock()
	pref := s.a2a.preferred
	if protocol == "MCP" {
		pref = s.mcp.preferred
	}
	s.mu.Unlock()
	ws := workspaceFor("barrier")
	var err error
	switch protocol {
	case "A2A":
		_, err = inboundA2A(ctx, tenant, pref, ws)
	default:
		_, err = inboundMCP(ctx, tenant, pref, ws)
	}
	return ws, err
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
