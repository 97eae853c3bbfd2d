package openwop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/peers/a2a"
	"github.com/parley-conformance/parley/peers/mcp"
	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
)

// workspaceHeader names the workspace an inbound exchange belongs to.
const workspaceHeader = "OpenWOP-Workspace-Id"

// exchange is one inbound negotiation the suite made as a client.
type exchange struct {
	protocol  string // A2A or MCP
	tenant    string
	workspace string // the marker its record must carry
	named     string // the version the suite named
	resp      *steps.Response
	version   string // what the host answered with, "" when it refused
	refused   bool
}

// detail summarizes the host's answer for a failure message.
func (x *exchange) detail() string {
	if x.protocol == "A2A" {
		return fmt.Sprintf("%d, A2A-Version %q, %s", x.resp.Status, x.resp.Header.Get(a2a.VersionHeader), clip(x.resp.Body))
	}
	return fmt.Sprintf("%d %s", x.resp.Status, clip(x.resp.Body))
}

// workspaceFor returns a fresh workspace id: the marker by which the suite
// finds the record of one exchange among everything a shared host records.
func workspaceFor(what string) string { return "parley-" + what + "-" + uuid.NewString() }

func registerInbound(c *steps.Catalog) {
	c.When(`^tenant "([^"]*)" fetches the host's agent card naming A2A version "([^"]*)"$`, func(ctx context.Context, tenant, version string) error {
		if err := openStreams(ctx); err != nil {
			return steps.Precondition(preSubscribed, err)
		}
		x, err := inboundA2A(ctx, tenant, version, workspaceFor("a2a"))
		if err != nil {
			return err
		}
		st(ctx).setInbound(x)
		return nil
	})
	c.When(`^tenant "([^"]*)" initializes an MCP session with the host naming revision "([^"]*)"$`, func(ctx context.Context, tenant, version string) error {
		if err := openStreams(ctx); err != nil {
			return steps.Precondition(preSubscribed, err)
		}
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
		return w.Assert(!x.refused && x.version == want, "the host answered %s, want %s %q", x.detail(), what, want)
	})
	c.Then(`^the host refuses the (A2A|MCP) exchange$`, func(ctx context.Context, protocol string) error {
		w := steps.From(ctx)
		x, err := st(ctx).lastInbound()
		if err != nil {
			return err
		}
		if x.protocol != protocol {
			return steps.Fault("the last inbound exchange was %s, not %s", x.protocol, protocol)
		}
		return w.Assert(x.refused, "the host did not refuse: it answered %s", x.detail())
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

// splitURL splits an absolute URL into the base and the path the World's
// exchanges take.
func splitURL(raw string) (base, path string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", steps.Fault("the inbound URL %q the Setup step resolved does not parse: %v", raw, err)
	}
	return u.Scheme + "://" + u.Host, u.RequestURI(), nil
}

// inboundHeader is what attributes an inbound exchange to a tenant and a
// workspace.
func inboundHeader(key, workspace string) http.Header {
	return http.Header{"Authorization": {"Bearer " + key}, workspaceHeader: {workspace}}
}

// inboundA2A fetches the host's agent card as tenant, naming version in
// A2A-Version and the workspace in OpenWOP-Workspace-Id.
func inboundA2A(ctx context.Context, tenant, version, workspace string) (*exchange, error) {
	w := steps.From(ctx)
	key, err := st(ctx).key(tenant)
	if err != nil {
		return nil, err
	}
	card, err := inboundURL(ctx, "A2A")
	if err != nil {
		return nil, err
	}
	base, path, err := splitURL(card)
	if err != nil {
		return nil, err
	}
	hdr := inboundHeader(key, workspace)
	hdr.Set("Accept", "application/json")
	if version != "" {
		hdr.Set(a2a.VersionHeader, version)
	}
	r, err := w.Exchange(ctx, base, http.MethodGet, path, nil, hdr)
	if err != nil {
		return nil, err
	}
	x := &exchange{protocol: "A2A", tenant: tenant, workspace: workspace, named: version, resp: r}
	switch {
	case r.Status >= 200 && r.Status < 300:
		// The negotiated version travels in the A2A-Version header; a card
		// without it answers in its own protocolVersion.
		x.version = strings.TrimSpace(r.Header.Get(a2a.VersionHeader))
		if x.version == "" {
			var card struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(r.Body, &card) == nil {
				x.version = card.ProtocolVersion
			}
		}
	default:
		x.refused = r.Status >= 400 && r.Status < 500
	}
	return x, nil
}

// inboundMCP sends initialize as tenant, naming version in protocolVersion
// (and the MCP-Protocol-Version header) and the workspace.
func inboundMCP(ctx context.Context, tenant, version, workspace string) (*exchange, error) {
	w := steps.From(ctx)
	key, err := st(ctx).key(tenant)
	if err != nil {
		return nil, err
	}
	server, err := inboundURL(ctx, "MCP")
	if err != nil {
		return nil, err
	}
	base, path, err := splitURL(server)
	if err != nil {
		return nil, err
	}
	params := map[string]any{
		"capabilities": map[string]any{},
		"clientInfo":   map[string]string{"name": "parley", "version": "1"},
	}
	hdr := inboundHeader(key, workspace)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		params["protocolVersion"] = version
		hdr.Set(mcp.VersionHeader, version)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
	if err != nil {
		return nil, steps.Fault("cannot encode initialize: %v", err)
	}
	r, err := w.Exchange(ctx, base, http.MethodPost, path, body, hdr)
	if err != nil {
		return nil, err
	}
	x := &exchange{protocol: "MCP", tenant: tenant, workspace: workspace, named: version, resp: r}
	reply, hasError := initializeReply(r)
	switch {
	case hasError:
		// A JSON-RPC error answer to initialize is a refusal.
		x.refused = true
	case r.Status >= 200 && r.Status < 300:
		x.version = reply
	default:
		x.refused = r.Status >= 400 && r.Status < 500
	}
	if sid := r.Header.Get(mcp.SessionHeader); sid != "" && !x.refused {
		// Leave nothing behind on a shared host.
		w.Cleanup(func() { endMCPSession(server, key, sid) })
	}
	return x, nil
}

// initializeReply reads the host's answer to initialize (id 1): the
// revision it chose, or whether it answered a JSON-RPC error. A Streamable
// HTTP server may answer as an event stream; the answer is then the first
// frame that is this request's reply.
func initializeReply(r *steps.Response) (version string, isError bool) {
	payload := r.Body
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "text/event-stream" {
		payload = nil
		_ = sse.Parse(bytes.NewReader(r.Body), len(r.Body)+1, func(f sse.Frame) bool {
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal([]byte(f.Data), &probe) == nil && string(probe.ID) == "1" {
				payload = []byte(f.Data)
				return false
			}
			return true
		}, nil)
	}
	var msg struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if payload == nil || json.Unmarshal(payload, &msg) != nil {
		return "", false
	}
	return msg.Result.ProtocolVersion, len(msg.Error) > 0 && string(msg.Error) != "null"
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
