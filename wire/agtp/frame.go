// Package agtp implements the AGTP/1.0 wire: the frame codec (request and
// status lines, headers, Content-Length framing), a client for the suite's
// steps, and a connection loop for servers. Every read is bounded by size
// limits so a hostile peer gets a clear error instead of unbounded memory or
// a hang; deadlines are the caller's (client and server loops set them).
package agtp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
)

// Protocol is the version token on every request and status line.
const Protocol = "AGTP/1.0"

// MediaType is the content type of AGTP JSON bodies.
const MediaType = "application/vnd.agtp+json"

// Limits bounds what a reader accepts. The drafts set no limits; a robust
// peer must, and answers an over-large frame with an error.
type Limits struct {
	MaxLineBytes   int   // request/status line and each header line, CRLF included
	MaxHeaders     int   // number of header lines
	MaxHeaderBytes int   // all header lines together
	MaxBodyBytes   int64 // Content-Length ceiling
}

// DefaultLimits are generous for JSON envelopes and small for abuse.
func DefaultLimits() Limits {
	return Limits{MaxLineBytes: 8 << 10, MaxHeaders: 64, MaxHeaderBytes: 64 << 10, MaxBodyBytes: 4 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = d.MaxHeaders
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	return l
}

// FrameError describes a frame that could not be parsed. Status is the AGTP
// status a server should answer with (400, 413, 431) and Reason a short
// machine-readable word for the error body.
type FrameError struct {
	Status int
	Reason string
	Msg    string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("agtp: malformed frame (%d %s): %s", e.Status, e.Reason, e.Msg)
}

func frameErr(status int, reason, format string, args ...any) *FrameError {
	return &FrameError{Status: status, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// ErrNoFrame reports a clean end of stream before the first byte of a frame:
// the peer closed an idle connection.
var ErrNoFrame = errors.New("agtp: connection closed before a frame started")

// Header maps canonical header names to their values.
type Header map[string][]string

// CanonicalKey is the case-insensitive normal form of a header name.
func CanonicalKey(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }

func (h Header) Get(name string) string {
	v := h[CanonicalKey(name)]
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
func (h Header) Values(name string) []string { return h[CanonicalKey(name)] }
func (h Header) Set(name, value string)      { h[CanonicalKey(name)] = []string{value} }
func (h Header) Add(name, value string) {
	k := CanonicalKey(name)
	h[k] = append(h[k], value)
}
func (h Header) Del(name string) { delete(h, CanonicalKey(name)) }
func (h Header) Has(name string) bool {
	_, ok := h[CanonicalKey(name)]
	return ok
}

// Clone returns a deep copy.
func (h Header) Clone() Header {
	c := make(Header, len(h))
	for k, v := range h {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// Request is one AGTP request frame.
type Request struct {
	Method   string
	Target   string // as on the wire: /path[?query]
	Path     string
	RawQuery string
	Header   Header
	Body     []byte
}

// Response is one AGTP response frame.
type Response struct {
	Status int
	Reason string // informative only
	Header Header
	Body   []byte
}

// NewRequest builds a request for method and target, splitting the target.
func NewRequest(method, target string, body []byte) (*Request, error) {
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	p, q, err := splitTarget(target)
	if err != nil {
		return nil, err
	}
	return &Request{Method: method, Target: target, Path: p, RawQuery: q, Header: Header{}, Body: body}, nil
}

func checkMethod(m string) error {
	if len(m) < 3 || len(m) > 32 {
		return frameErr(400, "malformed-request-line", "method must be 3 to 32 upper-case letters, got %d bytes", len(m))
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 'A' || m[i] > 'Z' {
			return frameErr(400, "malformed-request-line", "method %q has a character other than A-Z", m)
		}
	}
	return nil
}

func splitTarget(t string) (path, query string, err error) {
	if t == "" || t[0] != '/' {
		return "", "", frameErr(400, "malformed-target", "target must start with /")
	}
	if strings.ContainsRune(t, '#') {
		return "", "", frameErr(400, "fragment-in-target", "target carries a # fragment")
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] == 0x7f {
			return "", "", frameErr(400, "malformed-target", "target has a control or space character")
		}
	}
	path, query, _ = strings.Cut(t, "?")
	return path, query, nil
}

// readLine reads one CRLF-terminated line of at most max bytes (CRLF
// included) and returns it without the CRLF.
func readLine(r *bufio.Reader, max int, what string) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, frameErr(431, "line-too-long", "%s exceeds %d bytes", what, max)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(line) == 0 {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, frameErr(400, "bare-lf", "%s does not end in CRLF", what)
	}
	return line[:len(line)-2], nil
}

// ReadRequest reads one request frame. A clean close before the first byte
// is ErrNoFrame; a malformed frame is a *FrameError; anything else is the
// transport's error (deadline, reset, truncated frame).
func ReadRequest(r *bufio.Reader, lim Limits) (*Request, error) {
	lim = lim.withDefaults()
	line, err := readLine(r, lim.MaxLineBytes, "request line")
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrNoFrame
		}
		return nil, err
	}
	proto, rest, ok1 := bytes.Cut(line, []byte{' '})
	method, target, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 {
		return nil, frameErr(400, "malformed-request-line", "request line is not 'AGTP/1.0 METHOD target'")
	}
	if string(proto) != Protocol {
		return nil, frameErr(400, "unsupported-version", "protocol token %q is not %s", truncate(proto), Protocol)
	}
	if err := checkMethod(string(method)); err != nil {
		return nil, err
	}
	if bytes.IndexByte(target, ' ') >= 0 {
		return nil, frameErr(400, "malformed-request-line", "target contains a space")
	}
	req := &Request{Method: string(method), Target: string(target)}
	if req.Path, req.RawQuery, err = splitTarget(req.Target); err != nil {
		return nil, err
	}
	if req.Header, req.Body, err = readHeadersAndBody(r, lim); err != nil {
		return nil, err
	}
	return req, nil
}

// ReadResponse reads one response frame; errors as for ReadRequest.
func ReadResponse(r *bufio.Reader, lim Limits) (*Response, error) {
	lim = lim.withDefaults()
	line, err := readLine(r, lim.MaxLineBytes, "status line")
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrNoFrame
		}
		return nil, err
	}
	proto, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok || string(proto) != Protocol {
		return nil, frameErr(400, "malformed-status-line", "status line does not start with %s", Protocol)
	}
	code, reason, _ := bytes.Cut(rest, []byte{' '})
	if len(code) != 3 || code[0] < '1' || code[0] > '5' || !isDigits(code) {
		return nil, frameErr(400, "malformed-status-line", "status code %q is not three digits 100-599", truncate(code))
	}
	for _, c := range reason {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, frameErr(400, "malformed-status-line", "reason text has a control character")
		}
	}
	n, _ := strconv.Atoi(string(code))
	resp := &Response{Status: n, Reason: string(reason)}
	if resp.Header, resp.Body, err = readHeadersAndBody(r, lim); err != nil {
		return nil, err
	}
	return resp, nil
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func readHeadersAndBody(r *bufio.Reader, lim Limits) (Header, []byte, error) {
	h := Header{}
	total, count := 0, 0
	for {
		line, err := readLine(r, lim.MaxLineBytes, "header line")
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		if len(line) == 0 {
			break
		}
		count++
		total += len(line) + 2
		if count > lim.MaxHeaders {
			return nil, nil, frameErr(431, "too-many-headers", "more than %d header lines", lim.MaxHeaders)
		}
		if total > lim.MaxHeaderBytes {
			return nil, nil, frameErr(431, "headers-too-large", "header block exceeds %d bytes", lim.MaxHeaderBytes)
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, nil, frameErr(400, "malformed-header", "folded header lines are not allowed")
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 {
			return nil, nil, frameErr(400, "malformed-header", "header line has no 'Name:'")
		}
		for _, c := range name {
			if !isTokenChar(c) {
				return nil, nil, frameErr(400, "malformed-header", "header name %q has an invalid character", truncate(name))
			}
		}
		value = bytes.Trim(value, " \t")
		for _, c := range value {
			if c < ' ' && c != '\t' || c == 0x7f {
				return nil, nil, frameErr(400, "malformed-header", "header %q has a control character", truncate(name))
			}
		}
		h.Add(string(name), string(value))
	}
	if h.Has("Transfer-Encoding") {
		return nil, nil, frameErr(400, "transfer-encoding", "Content-Length is the only framing; Transfer-Encoding is refused")
	}
	n, err := contentLength(h, lim)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return h, nil, nil
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("agtp: reading %d-byte body: %w", n, err)
	}
	return h, body, nil
}

func contentLength(h Header, lim Limits) (int64, error) {
	vals := h.Values("Content-Length")
	if len(vals) == 0 {
		return 0, nil
	}
	for _, v := range vals[1:] {
		if v != vals[0] {
			return 0, frameErr(400, "bad-content-length", "conflicting Content-Length values")
		}
	}
	v := vals[0]
	if !isDigits([]byte(v)) || len(v) > 18 {
		return 0, frameErr(400, "bad-content-length", "Content-Length %q is not a decimal integer", v)
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	if n > lim.MaxBodyBytes {
		return 0, frameErr(413, "body-too-large", "Content-Length %d exceeds %d", n, lim.MaxBodyBytes)
	}
	return n, nil
}

// writeHeaders writes headers in sorted order (deterministic frames) with a
// Content-Length that always matches the body.
func writeHeaders(b *bytes.Buffer, h Header, body []byte) error {
	keys := make([]string, 0, len(h))
	for k := range h {
		if CanonicalKey(k) == "Content-Length" || CanonicalKey(k) == "Transfer-Encoding" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, c := range []byte(k) {
			if !isTokenChar(c) {
				return fmt.Errorf("agtp: invalid header name %q", k)
			}
		}
		for _, v := range h[k] {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("agtp: header %s value contains CR, LF or NUL", k)
			}
			fmt.Fprintf(b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return nil
}

// Write serialises the request in one write.
func (r *Request) Write(w io.Writer) error {
	if err := checkMethod(r.Method); err != nil {
		return err
	}
	if _, _, err := splitTarget(r.Target); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", Protocol, r.Method, r.Target)
	if err := writeHeaders(&b, r.Header, r.Body); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Write serialises the response in one write; an empty Reason is filled from
// the status table.
func (r *Response) Write(w io.Writer) error {
	if r.Status < 100 || r.Status > 599 {
		return fmt.Errorf("agtp: status %d out of range", r.Status)
	}
	reason := r.Reason
	if reason == "" {
		reason = StatusText(r.Status)
	}
	if strings.ContainsAny(reason, "\r\n") {
		return errors.New("agtp: reason text contains CR or LF")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %03d %s\r\n", Protocol, r.Status, reason)
	if err := writeHeaders(&b, r.Header, r.Body); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

var statusText = map[int]string{
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
	261: "Negotiation In Progress", 262: "Authorization Required", 263: "Proposal Approved",
	400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
	408: "Timeout", 410: "Gone", 413: "Content Too Large", 429: "Too Many Requests",
	431: "Header Fields Too Large", 455: "Scope Violation", 456: "Budget Exceeded",
	457: "Zone Violation", 458: "Counterparty Unverified", 459: "Method Violation",
	460: "Endpoint Violation", 461: "RCNS Contract Available", 462: "Insufficient Budget",
	463: "Proposal Rejected", 464: "RCNS No Contract", 500: "Internal Error",
	501: "Not Implemented", 503: "Service Unavailable", 550: "Delegation Failure",
	551: "Authority Chain Broken",
}

// StatusText names an AGTP status code ("Status NNN" if unknown).
func StatusText(code int) string {
	if s, ok := statusText[code]; ok {
		return s
	}
	return "Status " + strconv.Itoa(code)
}
