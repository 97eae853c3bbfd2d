package openwop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// peerOrigin validates a peer URL named by a seam and returns its origin in
// serialized form (lowercase scheme and host, default port dropped), which is
// what peerDigest hashes.
func peerOrigin(raw string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return nil, "", errors.New("peer URL must be http or https")
	}
	if u.User != nil {
		return nil, "", errors.New("peer URL must not carry credentials")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return nil, "", errors.New("peer URL has no host")
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	origin := scheme + "://"
	switch {
	case port != "":
		origin += net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		origin += "[" + host + "]"
	default:
		origin += host
	}
	return u, origin, nil
}

// peerRefusal is a peer that answered but declined the version; anything
// else that goes wrong is the peer being unreachable or unreadable.
type peerRefusal struct{ detail string }

func (e *peerRefusal) Error() string { return "peer refused: " + e.detail }

// readLimited reads at most max bytes of a peer response and fails rather
// than truncating silently.
func readLimited(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("peer response exceeds %d bytes", max)
	}
	return b, nil
}

// a2aCardURL is where the host fetches a peer's agent card: the URL as given
// when it names a path, else the A2A well-known location under it.
func a2aCardURL(u *url.URL) string {
	c := *u
	if c.Path == "" || c.Path == "/" {
		c.Path = "/.well-known/agent-card.json"
	}
	return c.String()
}

// negotiateA2AOutbound asks the peer for requested by fetching its agent card
// and returns the version the peer said it will speak.
func (h *Host) negotiateA2AOutbound(ctx context.Context, peer *url.URL, requested string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a2aCardURL(peer), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("A2A-Version", requested)
	req.Header.Set("Accept", "application/json")
	resp, err := h.out.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, h.cfg.maxBody)
	if err != nil {
		return "", err
	}
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return "", &peerRefusal{detail: fmt.Sprintf("status %d", resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("peer answered status %d", resp.StatusCode)
	}
	var card struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(body, &card); err != nil {
		return "", fmt.Errorf("peer agent card is not JSON: %w", err)
	}
	// The header is the negotiated answer; the card's own field is the
	// fallback for peers that predate the header.
	if v := strings.TrimSpace(resp.Header.Get("A2A-Version")); v != "" {
		return v, nil
	}
	return card.ProtocolVersion, nil
}

// negotiateMCPOutbound sends initialize asking for requested and returns the
// revision the server answered with. An accepted answer is followed by the
// initialized notification, as an MCP client owes the server.
func (h *Host) negotiateMCPOutbound(ctx context.Context, server *url.URL, requested string, acceptable func(string) bool) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{
			"protocolVersion": requested,
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]string{"name": "parley-openwop-refhost", "version": "1"},
		},
	})
	resp, err := h.mcpPost(ctx, server.String(), body, requested, "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return "", &peerRefusal{detail: fmt.Sprintf("status %d", resp.StatusCode)}
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("server answered status %d", resp.StatusCode)
	}
	msg, err := h.readRPCResponse(resp)
	if err != nil {
		return "", err
	}
	if msg.Error != nil {
		return "", &peerRefusal{detail: fmt.Sprintf("json-rpc error %d", msg.Error.Code)}
	}
	var result struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(msg.Result, &result); err != nil {
		return "", fmt.Errorf("initialize result is malformed: %w", err)
	}
	if acceptable(result.ProtocolVersion) {
		note, _ := json.Marshal(map[string]string{"jsonrpc": "2.0", "method": "notifications/initialized"})
		if r2, err := h.mcpPost(ctx, server.String(), note, result.ProtocolVersion, resp.Header.Get(mcpSessionHeader)); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(r2.Body, h.cfg.maxBody))
			r2.Body.Close()
		} else {
			h.log.Warn("mcp initialized notification failed", "err", err)
		}
	}
	return result.ProtocolVersion, nil
}

func (h *Host) mcpPost(ctx context.Context, target string, body []byte, version, session string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcpVersionHeader, version)
	if session != "" {
		req.Header.Set(mcpSessionHeader, session)
	}
	return h.out.Do(req)
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// readRPCResponse reads the initialize response, which a Streamable-HTTP
// server may send as plain JSON or as the first matching message of an SSE
// stream. Both are bounded by the body limit.
func (h *Host) readRPCResponse(resp *http.Response) (rpcResponse, error) {
	var msg rpcResponse
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	limited := io.LimitReader(resp.Body, h.cfg.maxBody)
	if mt != "text/event-stream" {
		b, err := readLimited(resp.Body, h.cfg.maxBody)
		if err != nil {
			return msg, err
		}
		return msg, json.Unmarshal(b, &msg)
	}
	sc := bufio.NewScanner(limited)
	sc.Buffer(make([]byte, 0, 4096), int(h.cfg.maxBody))
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 {
				if json.Unmarshal([]byte(data.String()), &msg) == nil && string(msg.ID) == "1" {
					return msg, nil
				}
				data.Reset()
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(v, " "))
		}
	}
	if err := sc.Err(); err != nil {
		return msg, err
	}
	return msg, errors.New("event stream ended without the initialize response")
}
