package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/parley-conformance/parley/peers/internal/wire"
)

// Client calls a host as an inbound A2A caller. The zero value works: no
// credentials, a 10 s deadline, a 1 MiB response limit.
type Client struct {
	// APIKey, when set, is sent as a bearer token: it is what attributes the
	// exchange to a tenant.
	APIKey string
	// Workspace, when set, is sent in the OpenWOP-Workspace-Id header.
	Workspace string
	HTTP      *http.Client
	Timeout   time.Duration
	MaxBody   int64
}

// Response is what the host answered.
type Response struct {
	Status int
	// Version is the A2A-Version response header (the host's choice).
	Version string
	Header  http.Header
	Body    []byte
	// JSON is the body decoded as an object, nil when it is not one.
	JSON map[string]any
}

// FetchAgentCard GETs cardURL naming version in A2A-Version; an empty
// version sends no header at all.
func (c *Client) FetchAgentCard(ctx context.Context, cardURL, version string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return c.do(req, version)
}

// SendMessage posts a JSON-RPC message/send with a text part to the host's
// A2A endpoint, naming version in A2A-Version.
func (c *Client) SendMessage(ctx context.Context, endpointURL, version, text string) (*Response, error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{"message": map[string]any{
			"role": "user", "parts": []any{map[string]string{"kind": "text", "text": text}}, "messageId": "parley-1",
		}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpointURL, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, version)
}

func (c *Client) do(req *http.Request, version string) (*Response, error) {
	if version != "" {
		req.Header.Set(VersionHeader, version)
	}
	wire.Authorize(req, c.APIKey, c.Workspace)
	resp, b, err := wire.Fetch(c.HTTP, c.Timeout, c.MaxBody, req)
	if err != nil {
		return nil, err
	}
	out := &Response{Status: resp.StatusCode, Version: resp.Header.Get(VersionHeader), Header: resp.Header, Body: b}
	var obj map[string]any
	if json.Unmarshal(b, &obj) == nil {
		out.JSON = obj
	}
	return out, nil
}
