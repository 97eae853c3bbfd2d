package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/parley-conformance/parley/peers/internal/wire"
	"github.com/parley-conformance/parley/peers/sse"
)

// Client calls a host's MCP endpoint as an inbound MCP client. The zero value
// works: no credentials, a 10 s deadline, a 1 MiB response limit.
type Client struct {
	// APIKey, when set, is sent as a bearer token (tenant attribution).
	APIKey string
	// Workspace, when set, is sent in the OpenWOP-Workspace-Id header.
	Workspace string
	// OmitVersionHeader sends the revision only in initialize's params, not
	// also in the MCP-Protocol-Version header.
	OmitVersionHeader bool
	HTTP              *http.Client
	Timeout           time.Duration
	MaxBody           int64
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// InitializeResult is what the host answered to initialize.
type InitializeResult struct {
	Status    int
	SessionID string
	// ProtocolVersion is result.protocolVersion (the host's choice); empty
	// when the host answered an error.
	ProtocolVersion string
	Error           *RPCError
	Header          http.Header
	Body            []byte
}

// Initialize sends initialize naming protocolVersion in params and, unless
// OmitVersionHeader, in the MCP-Protocol-Version header. An empty
// protocolVersion names nothing anywhere.
func (c *Client) Initialize(ctx context.Context, serverURL, protocolVersion string) (*InitializeResult, error) {
	params := map[string]any{
		"capabilities": map[string]any{},
		"clientInfo":   map[string]string{"name": "parley", "version": "1"},
	}
	if protocolVersion != "" {
		params["protocolVersion"] = protocolVersion
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if protocolVersion != "" && !c.OmitVersionHeader {
		req.Header.Set(VersionHeader, protocolVersion)
	}
	wire.Authorize(req, c.APIKey, c.Workspace)
	resp, b, err := wire.Fetch(c.HTTP, c.Timeout, c.MaxBody, req)
	if err != nil {
		return nil, err
	}
	out := &InitializeResult{Status: resp.StatusCode, SessionID: resp.Header.Get(SessionHeader), Header: resp.Header, Body: b}
	// A Streamable HTTP server may answer as an event stream; the response
	// is then the first frame that decodes as this request's reply.
	payload := b
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		payload = nil
		_ = sse.Parse(bytes.NewReader(b), len(b)+1, func(f sse.Frame) bool {
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
		Error *RPCError `json:"error"`
	}
	if payload != nil && json.Unmarshal(payload, &msg) == nil {
		out.ProtocolVersion, out.Error = msg.Result.ProtocolVersion, msg.Error
	}
	return out, nil
}
