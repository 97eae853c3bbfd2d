package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/parley-conformance/parley/verdict"
)

// Response is one exchange as the suite saw it on the wire: the full request
// the suite sent (never an excerpt) and what came back.
type Response struct {
	Method string
	URL    string
	// ReqHeader and ReqBody are what the suite sent.
	ReqHeader http.Header
	ReqBody   []byte

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
		w.SetLast(r)
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
		return nil, Fail("the host exposes no HTTP endpoint (its ready line has no \"http\" address), and %s %s needs one", method, path)
	}
	return w.Exchange(ctx, h.HTTP, method, path, body, header)
}

// Exchange performs one HTTP exchange with a host at base (the scenario's
// host or another one it drives), under the exchange deadline
// (ExchangeContext) and body limit. A transport error, a timeout or an oversized body is the host's
// failure. The exchange is observed but not recorded as the last response.
func (w *World) Exchange(ctx context.Context, base, method, path string, body []byte, header http.Header) (*Response, error) {
	ctx, cancel := ExchangeContext(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, Fault("cannot build the request %s %s%s: %v", method, base, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	sent := &Response{Method: method, URL: path, ReqHeader: req.Header.Clone(), ReqBody: body}
	resp, err := w.HTTP.Do(req)
	if err != nil {
		return nil, w.transportFailure(sent, fmt.Sprintf("%s %s: no answer: %v", method, path, exchangeErr(ctx, err)))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	sent.Status, sent.Header = resp.StatusCode, resp.Header
	if err != nil {
		return nil, w.transportFailure(sent, fmt.Sprintf("%s %s: answered %d but the body could not be read: %v", method, path, resp.StatusCode, err))
	}
	if len(b) > MaxBodyBytes {
		return nil, w.transportFailure(sent, fmt.Sprintf("%s %s: the host sent a body over %d bytes", method, path, MaxBodyBytes))
	}
	sent.Body = b
	NoteAnswer()
	w.Observe(sent)
	return sent, nil
}

func (w *World) transportFailure(r *Response, msg string) error {
	w.Observe(r)
	return &Failure{Msg: msg, Exchange: r}
}

// Seam performs an exchange with one of the host's test seams. A seam the
// host does not have (it answers 404, 405 or 501) blocks the scenario; a
// seam that answers anything else is the host's, and the caller asserts on
// it. A scenario that reads through a seam asks for seams among its Given
// steps; forgetting to is a suite fault.
func (w *World) Seam(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, error) {
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	if !h.Config.Seams() {
		return nil, Fault("the scenario reads the seam %s without asking for seams among its Given steps", path)
	}
	if h.HTTP == "" {
		// Seams live on the HTTP surface; a host without one has none,
		// which blocks as a 404 there would.
		return nil, Block(verdict.CauseSeamAbsent, "the host has no seam %s %s (its ready line names no \"http\" address to serve seams on); docs/host-interface.md describes it", method, path)
	}
	r, err := w.Fetch(ctx, method, path, body, header)
	if err != nil {
		return nil, err
	}
	if seamAbsent(r.Status) {
		return nil, Block(verdict.CauseSeamAbsent, "the host has no seam %s %s (it answered %d); docs/host-interface.md describes it", method, path, r.Status)
	}
	return r, nil
}

// OptionalSeam calls a seam a scenario can do without (a clock it could
// wait for instead). It answers false, having sent nothing, when the host
// runs a configuration without seams or has no HTTP surface to serve one on
// (an AGTP host), and false when the host has no such seam (404, 405, 501);
// otherwise the seam's answer, which the caller checks like any other.
func (w *World) OptionalSeam(ctx context.Context, method, path string, body []byte, header http.Header) (*Response, bool, error) {
	h, err := w.Host(ctx)
	if err != nil {
		return nil, false, err
	}
	if !h.Config.Seams() || h.HTTP == "" {
		return nil, false, nil
	}
	r, err := w.Fetch(ctx, method, path, body, header)
	if err != nil {
		return nil, false, err
	}
	return r, !seamAbsent(r.Status), nil
}

// PassTime lets d of the host's time pass: through its clock seam (a POST
// of body to path, whose answer check judges) where the host runs with
// seams and has that seam, otherwise by waiting d in real time.
// check nil accepts a 200 only: a clock seam that exists but errs is the
// host's failure.
func (w *World) PassTime(ctx context.Context, d time.Duration, path string, body []byte, check func(*Response) error) error {
	r, ok, err := w.OptionalSeam(ctx, http.MethodPost, path, body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	if ok {
		if check != nil {
			return check(r)
		}
		return w.Assert(r.Status == http.StatusOK, "the host's clock seam did not move its clock: %s", r)
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return Fault("the run was interrupted while waiting %s in real time: %v", d, ctx.Err())
	}
}

// seamAbsent is how a host answers for a seam it does not have.
func seamAbsent(status int) bool {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// DoJSON sends v as a JSON body with Content-Type application/json.
func (w *World) DoJSON(ctx context.Context, method, path string, v any, header http.Header) (*Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, Fault("cannot encode the request body: %v", err)
	}
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return w.Do(ctx, method, path, b, header)
}

// SetLast makes r the exchange later checks assert on.
func (w *World) SetLast(r *Response) {
	w.mu.Lock()
	w.last = r
	w.mu.Unlock()
}

// LastResponse returns the exchange checks assert on; asking before any is a
// scenario that checks before it acts.
func (w *World) LastResponse() (*Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		return nil, Fault("a check ran before any exchange")
	}
	return w.last, nil
}

// String summarizes the exchange for a failure message.
func (r *Response) String() string {
	body := string(r.Body)
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	return fmt.Sprintf("%s %s answered %d %s", r.Method, r.URL, r.Status, strings.TrimSpace(body))
}

// StatusName reads a status code with its reason phrase where HTTP has one
// ("201 Created"), else the bare code (an AGTP-only status such as 463).
func StatusName(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprint(code)
}

// Unexpected says what the host sent where other statuses were expected:
// "POST /v1/x answered 200 OK where 201 Created was expected: {...}".
func (r *Response) Unexpected(want ...int) string {
	names := make([]string, len(want))
	for i, c := range want {
		names[i] = StatusName(c)
	}
	exp := strings.Join(names, " or ")
	body := strings.TrimSpace(string(r.Body))
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	msg := fmt.Sprintf("%s %s answered %s where %s was expected", r.Method, r.URL, StatusName(r.Status), exp)
	if body != "" {
		msg += ": " + body
	}
	return msg
}

// JSON decodes the body as a JSON object; numbers stay json.Number. A body
// that is not one is the host's failure.
func (r *Response) JSON() (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &Failure{Msg: fmt.Sprintf("expected a JSON object: %s (%v)", r, err), Exchange: r}
	}
	return m, nil
}

// Last returns the exchange checks assert on, or nil before the first; for
// messages and for steps that make an exchange without displacing it.
func (w *World) Last() *Response {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
