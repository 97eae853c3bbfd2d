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
	"github.com/parley-conformance/parley/wire/version"
)

// workspaceHeader names the workspace an inbound exchange belongs to.
const workspaceHeader = "OpenWOP-Workspace-Id"

// The forms an inbound A2A exchange takes: a GET of the agent card (the
// plain HTTP form) or a JSON-RPC request to the endpoint the card names.
const (
	formCard = "fetches the host's agent card"
	formRPC  = "sends a JSON-RPC message to the A2A endpoint the host advertises"
)

// exchange is one inbound negotiation the suite made as a client.
type exchange struct {
	protocol  string // A2A or MCP
	form      string // for A2A: formCard or formRPC
	tenant    string // "" for an anonymous caller
	workspace string // the marker its record must carry
	named     string // the version the suite named
	resp      *steps.Response
	version   string // what the host answered with, "" when it refused
	refused   bool
	// Set once the record reached the tenant's live stream (durable.go).
	eventID string
	data    string
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

const (
	a2aForms = `(fetches the host's agent card|sends a JSON-RPC message to the A2A endpoint the host advertises)`
)

// inboundWhen makes one inbound exchange as c, after subscribing to every
// tenant's stream, and keeps it as the scenario's last.
func inboundWhen(ctx context.Context, c caller, protocol, form, version string, header *string) error {
	if err := openStreams(ctx); err != nil {
		return steps.Precondition(preSubscribed, err)
	}
	x, err := inbound(ctx, c, protocol, form, version, header, workspaceFor(strings.ToLower(protocol)))
	if err != nil {
		return err
	}
	st(ctx).setInbound(x)
	return nil
}

// inbound makes one exchange of the protocol in the given form. header, for
// MCP, is what the MCP-Protocol-Version header says (nil: the revision
// named, as a client that agrees with itself sends it).
func inbound(ctx context.Context, c caller, protocol, form, version string, header *string, workspace string) (*exchange, error) {
	switch {
	case protocol == "MCP":
		h := version
		if header != nil {
			h = *header
		}
		return inboundMCP(ctx, c, version, h, workspace)
	case form == formRPC:
		return inboundA2ARPC(ctx, c, version, workspace)
	default:
		return inboundA2A(ctx, c, version, workspace)
	}
}

func registerInbound(c *steps.Catalog) {
	c.When(`^tenant "([^"]*)" `+a2aForms+` naming A2A version "([^"]*)"$`, func(ctx context.Context, tenant, form, version string) error {
		who, err := st(ctx).caller(tenant)
		if err != nil {
			return err
		}
		return inboundWhen(ctx, who, "A2A", form, version, nil)
	})
	c.When(`^an anonymous caller `+a2aForms+` naming A2A version "([^"]*)"$`, func(ctx context.Context, form, version string) error {
		return inboundWhen(ctx, caller{}, "A2A", form, version, nil)
	})
	c.When(`^tenant "([^"]*)" initializes an MCP session with the host naming revision "([^"]*)"$`, func(ctx context.Context, tenant, version string) error {
		who, err := st(ctx).caller(tenant)
		if err != nil {
			return err
		}
		return inboundWhen(ctx, who, "MCP", "", version, nil)
	})
	c.When(`^tenant "([^"]*)" initializes an MCP session naming revision "([^"]*)" in protocolVersion, with the MCP-Protocol-Version header "([^"]*)"$`, func(ctx context.Context, tenant, version, header string) error {
		who, err := st(ctx).caller(tenant)
		if err != nil {
			return err
		}
		if header == version {
			return steps.Fault("the scenario means the header to differ from protocolVersion, both are %q", version)
		}
		return inboundWhen(ctx, who, "MCP", "", version, &header)
	})
	c.When(`^an anonymous caller initializes an MCP session with the host naming revision "([^"]*)"$`, func(ctx context.Context, version string) error {
		return inboundWhen(ctx, caller{}, "MCP", "", version, nil)
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
	c.Then(`^the host refuses the exchange or answers in a version not below its preferred (A2A version|MCP revision)$`, func(ctx context.Context, what string) error {
		w, s := steps.From(ctx), st(ctx)
		x, err := s.lastInbound()
		if err != nil {
			return err
		}
		pref := s.preferred(x.protocol)
		named := "naming no version"
		if x.named != "" {
			named = fmt.Sprintf("naming %q", x.named)
		}
		// Refusing is always allowed (nothing was lowered); an answer must be
		// in a version the suite can read, at or above the preferred one.
		given := fmt.Sprintf("%q", x.version)
		if x.version == "" {
			given = "no version the suite can read"
		}
		return w.Assert(x.refused || (x.version != "" && version.Compare(x.version, pref) >= 0),
			"%s, %s, was answered in %s %s, not at or above the preferred %q the host is configured with: an exchange with no tenant must never be lowered below the preferred version (nobody could ever read its record): %s",
			x.callerName(), named, what, given, pref, x.detail())
	})
}

func (x *exchange) callerName() string {
	if x.tenant == "" {
		return "an anonymous caller"
	}
	return fmt.Sprintf("tenant %q", x.tenant)
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
// workspace; an anonymous caller sends no Authorization header at all.
func inboundHeader(c caller, workspace string) http.Header {
	h := http.Header{workspaceHeader: {workspace}}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	return h
}

// inboundA2A fetches the host's agent card as c, naming version in
// A2A-Version (none when version is empty) and the workspace in
// OpenWOP-Workspace-Id.
func inboundA2A(ctx context.Context, c caller, version, workspace string) (*exchange, error) {
	w := steps.From(ctx)
	card, err := inboundURL(ctx, "A2A")
	if err != nil {
		return nil, err
	}
	base, path, err := splitURL(card)
	if err != nil {
		return nil, err
	}
	hdr := inboundHeader(c, workspace)
	hdr.Set("Accept", "application/json")
	if version != "" {
		hdr.Set(a2a.VersionHeader, version)
	}
	st(ctx).noteOwn(c, workspace)
	r, err := w.Exchange(ctx, base, http.MethodGet, path, nil, hdr)
	if err != nil {
		return nil, err
	}
	x := &exchange{protocol: "A2A", form: formCard, tenant: c.tenant, workspace: workspace, named: version, resp: r}
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

// inboundA2ARPC sends one JSON-RPC message/send to the A2A endpoint the
// host's agent card advertises, as c, naming version in A2A-Version.
func inboundA2ARPC(ctx context.Context, c caller, version, workspace string) (*exchange, error) {
	w := steps.From(ctx)
	endpoint, err := rpcEndpoint(ctx)
	if err != nil {
		return nil, err
	}
	base, path, err := splitURL(endpoint)
	if err != nil {
		return nil, err
	}
	hdr := inboundHeader(c, workspace)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json")
	if version != "" {
		hdr.Set(a2a.VersionHeader, version)
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": map[string]any{
			"role": "user", "kind": "message", "messageId": uuid.NewString(),
			"parts": []any{map[string]string{"kind": "text", "text": "parley negotiates A2A " + version}},
		}},
	})
	if err != nil {
		return nil, steps.Fault("cannot encode message/send: %v", err)
	}
	st(ctx).noteOwn(c, workspace)
	r, err := w.Exchange(ctx, base, http.MethodPost, path, body, hdr)
	if err != nil {
		return nil, err
	}
	x := &exchange{protocol: "A2A", form: formRPC, tenant: c.tenant, workspace: workspace, named: version, resp: r}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	decoded := json.Unmarshal(r.Body, &msg) == nil
	isError := decoded && len(msg.Error) > 0 && string(msg.Error) != "null"
	switch {
	case isError:
		// A JSON-RPC error answer (A2A's VersionNotSupportedError, or any
		// other) is a refusal.
		x.refused = true
	case r.Status >= 200 && r.Status < 300 && decoded && len(msg.Result) > 0:
		// The JSON-RPC result carries no version: the host names the one it
		// speaks in the A2A-Version response header.
		x.version = strings.TrimSpace(r.Header.Get(a2a.VersionHeader))
	default:
		x.refused = r.Status >= 400 && r.Status < 500
	}
	return x, nil
}

// rpcEndpoint is the A2A JSON-RPC endpoint the host's agent card
// advertises: the card's url when its preferredTransport is JSONRPC (the
// A2A default when it names none), else the url of a JSONRPC entry of
// additionalInterfaces (or of supportedInterfaces, as later A2A revisions
// name the list). The card is fetched once per scenario, as the first
// configured tenant at the preferred version, under a workspace of its own.
func rpcEndpoint(ctx context.Context) (string, error) {
	w, s := steps.From(ctx), st(ctx)
	s.mu.Lock()
	cached := s.rpc
	var tenant string
	if len(s.tenants) > 0 {
		tenant = s.tenants[0]
	}
	s.mu.Unlock()
	if cached != "" {
		return cached, nil
	}
	if tenant == "" {
		return "", steps.Fault("finding the A2A endpoint needs the host's tenants among the Given steps")
	}
	who, err := s.caller(tenant)
	if err != nil {
		return "", err
	}
	x, err := inboundA2A(ctx, who, s.preferred("A2A"), workspaceFor("card"))
	if err != nil {
		return "", steps.Precondition(preRPCEndpoint, err)
	}
	if err := w.Assert(x.resp.Status == http.StatusOK, "fetching the agent card to find the A2A endpoint, as tenant %q at the preferred version: %s", tenant, x.detail()); err != nil {
		return "", steps.Precondition(preRPCEndpoint, err)
	}
	var card struct {
		URL                  string `json:"url"`
		PreferredTransport   string `json:"preferredTransport"`
		AdditionalInterfaces []struct {
			URL       string `json:"url"`
			Transport string `json:"transport"`
		} `json:"additionalInterfaces"`
		SupportedInterfaces []struct {
			URL             string `json:"url"`
			ProtocolBinding string `json:"protocolBinding"`
		} `json:"supportedInterfaces"`
	}
	if err := json.Unmarshal(x.resp.Body, &card); err != nil {
		return "", steps.Precondition(preRPCEndpoint, w.Assert(false, "the agent card is not a JSON object (%v): %s", err, x.detail()))
	}
	var raw, field string
	if card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, "JSONRPC")) {
		raw, field = card.URL, "the agent card's url"
	}
	for _, i := range card.AdditionalInterfaces {
		if raw == "" && strings.EqualFold(i.Transport, "JSONRPC") && i.URL != "" {
			raw, field = i.URL, "the agent card's additionalInterfaces JSONRPC url"
		}
	}
	for _, i := range card.SupportedInterfaces {
		if raw == "" && strings.EqualFold(i.ProtocolBinding, "JSONRPC") && i.URL != "" {
			raw, field = i.URL, "the agent card's supportedInterfaces JSONRPC url"
		}
	}
	if raw == "" {
		return "", w.Inapplicable(fmt.Sprintf("the host's agent card advertises no JSON-RPC interface (preferredTransport %q, url %q, no JSONRPC entry in additionalInterfaces or supportedInterfaces): the JSON-RPC form of an inbound A2A exchange does not arise on this host", card.PreferredTransport, card.URL))
	}
	u, err := advertised(ctx, field, raw)
	if err != nil {
		return "", steps.Precondition(preRPCEndpoint, err)
	}
	s.mu.Lock()
	s.rpc = u
	s.mu.Unlock()
	return u, nil
}

// inboundMCP sends initialize as c, naming version in protocolVersion and
// header in the MCP-Protocol-Version header (either empty: not sent).
func inboundMCP(ctx context.Context, c caller, version, header, workspace string) (*exchange, error) {
	w := steps.From(ctx)
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
	hdr := inboundHeader(c, workspace)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		params["protocolVersion"] = version
	}
	if header != "" {
		hdr.Set(mcp.VersionHeader, header)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
	if err != nil {
		return nil, steps.Fault("cannot encode initialize: %v", err)
	}
	st(ctx).noteOwn(c, workspace)
	r, err := w.Exchange(ctx, base, http.MethodPost, path, body, hdr)
	if err != nil {
		return nil, err
	}
	x := &exchange{protocol: "MCP", tenant: c.tenant, workspace: workspace, named: version, resp: r}
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
		key := c.key
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
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set(mcp.SessionHeader, session)
	resp, err := (&http.Client{Timeout: steps.ExchangeTimeout}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
}

// barrier makes one more accepted exchange of the protocol, as tenant,
// naming the preferred version under a fresh workspace (an A2A barrier
// fetches the agent card). Its record, once it arrives on a tenant's
// stream, marks the point by which any record of an earlier exchange (to
// that tenant or leaked to it) must have arrived as well.
func barrier(ctx context.Context, tenant, protocol string) (string, error) {
	s := st(ctx)
	who, err := s.caller(tenant)
	if err != nil {
		return "", err
	}
	ws := workspaceFor("barrier")
	_, err = inbound(ctx, who, protocol, formCard, s.preferred(protocol), nil, ws)
	return ws, err
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
