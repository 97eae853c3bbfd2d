package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Response is one HTTP exchange as the suite saw it on the wire.
type Response struct {
	Method string
	URL    string
	Status int
	Header http.Header
	Body   []byte
}

// Do performs one HTTP exchange with the current host, within the exchange
// deadline and body limit, and records it as the last response. body nil
// sends no body at all.
func (w *World) Do(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, error) {
	r, err := w.Fetch(ctx, method, path, body, header)
	if err == nil {
		w.mu.Lock()
		w.Last = r
		w.mu.Unlock()
	}
	return r, err
}

// Fetch is Do without recording the exchange as the last response: for reads
// through a seam that must not displace what the scenario asserts on.
func (w *World) Fetch(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, error) {
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	if h.HTTP == "" {
		return nil, w.Block("the host exposes no HTTP endpoint")
	}
	ctx, cancel := context.WithTimeout(ctx, ExchangeTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.HTTP+path, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := w.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the body: %w", method, path, err)
	}
	if len(b) > MaxBodyBytes {
		return nil, fmt.Errorf("%s %s: the host sent a body over %d bytes", method, path, MaxBodyBytes)
	}
	return &Response{Method: method, URL: path, Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// DoJSON sends v as a JSON body with Content-Type application/json.
func (w *World) DoJSON(ctx context.Context, method, path string, v any, header http.Header) (*Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return w.Do(ctx, method, path, b, header)
}

// LastResponse returns the last exchange or an error when there was none.
func (w *World) LastResponse() (*Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Last == nil {
		return nil, fmt.Errorf("scenario error: no exchange yet")
	}
	return w.Last, nil
}

// String summarizes the exchange for a failure message.
func (r *Response) String() string {
	body := string(r.Body)
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("%s %s answered %d %s", r.Method, r.URL, r.Status, strings.TrimSpace(body))
}

// JSON decodes the body as a JSON object; numbers stay json.Number.
func (r *Response) JSON() (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: the body is not a JSON object (%v)", r, err)
	}
	return m, nil
}
