// Package sabotage proves the suite can fail. For every requirement id there
// is a rule that breaks exactly that requirement: it alters the configuration
// a host is started with (a host whose default is wrong), or it rewrites what
// the host says on the wire through a mutating proxy (a host that drops a
// field, turns a refusal into a success, or records nothing). The reference
// host's production code carries no sabotage switches.
package sabotage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"sync"

	"github.com/parley-conformance/parley/target"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Rule breaks one requirement. A requirement may have several rules, each
// breaking it for other scenarios (another outline row, another input), so
// that every scenario is shown to fail against some broken host.
type Rule struct {
	// ID is the requirement the rule breaks.
	ID string
	// Variant tells apart the rules of one requirement ("" for the first).
	Variant string
	// Broken says, for the matrix, how the sabotaged host misbehaves.
	Broken string
	// Config alters the configuration the host is started with; sections
	// are keyed by family.
	Config func(cfg map[string]map[string]any)
	// Intercept answers a request instead of the host when it returns non-nil.
	Intercept func(x *Exchange) *Response
	// Response rewrites the host's answer in place.
	Response func(x *Exchange, r *Response)
	// Logs filters what the host's log is seen to contain.
	Logs func(lines []string) []string
	// Stream rewrites a text/event-stream answer as it flows, one frame at a
	// time: frame is one event block (its lines, each ending in a newline,
	// without the blank line that ends the block; a comment-only block is a
	// frame too), and the frames returned are sent in its place, each
	// followed by a blank line. Event streams never reach Response, which
	// needs the whole body; without Stream they pass through untouched.
	Stream func(x *Exchange, frame []byte) [][]byte
	// AGTPRequest sees each AGTP/1.0 request before it reaches the host
	// and may rewrite x.Request, or answer instead of the host by
	// returning non-nil (sabotage/agtpproxy.go).
	AGTPRequest func(x *AGTPExchange) *agtp.Response
	// AGTP rewrites the host's AGTP/1.0 answer in place.
	AGTP func(x *AGTPExchange, r *agtp.Response)
}

// Exchange is what a rule sees of a request.
type Exchange struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	// Config is the configuration the scenario asked for, by family.
	Config map[string]map[string]any
	// Upstream is the host's base URL behind the proxy, for a rule that
	// must make the host act again (replay or alter a request itself).
	// An Intercept that returns nil may also rewrite Body: the rewritten
	// body is what reaches the host.
	Upstream string
}

// Section returns one family's configuration section (never nil).
func (x *Exchange) Section(family string) map[string]any {
	if s := x.Config[family]; s != nil {
		return s
	}
	return map[string]any{}
}

// Response is the host's answer as a rule may rewrite it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object, or returns nil.
func (r *Response) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// SetJSON replaces the body.
func (r *Response) SetJSON(v any) {
	b, _ := json.Marshal(v)
	r.Body = b
}

// Target starts hosts through an inner target and puts the rule between them
// and the suite.
type Target struct {
	Inner target.Target
	Rule  Rule

	mu      sync.Mutex
	proxies []*http.Server
	byCfg   map[string]string // configuration digest -> proxy URL
	agtp    agtpProxies       // AGTP/1.0 proxies, when the rule has an AGTP hook
	// upstream is the inner host's address each key's proxies front: a
	// key whose host was replaced (a host changed by a restart under
	// another configuration is retired, and the next Acquire starts a new
	// one) gets new proxies.
	upstream map[string]string
	// runs caches runConfig by configuration digest and instance: making
	// the altered configuration anew on every lease (decode, alter,
	// canonicalize) was a fourteenth of a fairness run's CPU.
	runs sync.Map
}

// askedCache holds, by configuration digest, the sections a scenario asked
// for, which the proxies and rules only read: decoding them again on every
// lease was a sixth of a matrix run's work. Shared by every Target (the
// fixtures are a few dozen configurations).
var askedCache sync.Map

func (t *Target) Kind() string                    { return t.Inner.Kind() }
func (t *Target) Subject() target.Subject         { return t.Inner.Subject() }
func (t *Target) Configurations() []target.Config { return t.Inner.Configurations() }

// askedFor is the configuration cfg asks for, by family, to be read only.
func askedFor(cfg target.Config) map[string]map[string]any {
	d := cfg.Digest()
	if m, ok := askedCache.Load(d); ok {
		return m.(map[string]map[string]any)
	}
	m, _ := askedCache.LoadOrStore(d, sections(cfg))
	return m.(map[string]map[string]any)
}

// sections decodes cfg's family sections afresh (the caller may change them).
func sections(cfg target.Config) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, f := range cfg.Families() {
		var m map[string]any
		_ = json.Unmarshal(cfg.Section(f), &m)
		if m == nil {
			m = map[string]any{}
		}
		out[f] = m
	}
	return out
}

// Acquire starts (or reuses) the host with the rule's configuration and a
// proxy in front of it.
func (t *Target) Acquire(ctx context.Context, cfg target.Config) (*target.Host, error) {
	run, err := t.runConfig(cfg)
	if err != nil {
		return nil, err
	}
	h, err := t.Inner.Acquire(ctx, run)
	if err != nil {
		return nil, err
	}
	return t.wrap(cfg, h)
}

// runConfig is the configuration the broken host really runs with. It
// depends only on cfg's document and instance (Rule.Config is a function
// of the sections it is given), so it is made once for each.
func (t *Target) runConfig(cfg target.Config) (target.Config, error) {
	if t.Rule.Config == nil {
		return cfg, nil
	}
	key := cfg.Digest() + "#" + cfg.Instance()
	if c, ok := t.runs.Load(key); ok {
		return c.(target.Config), nil
	}
	c, err := t.alteredConfig(cfg)
	if err == nil {
		t.runs.Store(key, c)
	}
	return c, err
}

func (t *Target) alteredConfig(cfg target.Config) (target.Config, error) {
	altered := sections(cfg)
	t.Rule.Config(altered)
	fams := map[string]any{}
	for k, v := range altered {
		fams[k] = v
	}
	if f := cfg.Fixture(); f != "" {
		fams["fixture"] = f
	}
	c, err := target.NewConfig(fams, cfg.Seams())
	if err == nil && cfg.StateDir() != "" {
		c, err = c.WithStateDir(cfg.StateDir())
	}
	return c.WithInstance(cfg.Instance()), err
}

// Restart restarts the inner host and puts new proxies in front of it (its
// addresses may have changed).
func (t *Target) Restart(ctx context.Context, cfg target.Config, crash bool) (*target.Host, error) {
	r, ok := t.Inner.(target.Restarter)
	if !ok {
		return nil, target.ErrCannotRestart
	}
	return t.restartWith(cfg, func(run target.Config) (*target.Host, error) { return r.Restart(ctx, run, crash) })
}

// RestartWith restarts the inner host under the changed configuration (as
// the rule alters it) and puts new proxies in front of it.
func (t *Target) RestartWith(ctx context.Context, cfg, changed target.Config, crash bool) (*target.Host, error) {
	r, ok := t.Inner.(target.Reconfigurer)
	if !ok {
		return nil, fmt.Errorf("%w: the %s target cannot restart a host under a changed configuration", target.ErrUnsatisfiable, t.Inner.Kind())
	}
	asked, err := target.ChangedRun(cfg, changed)
	if err != nil {
		return nil, err
	}
	base, err := t.runConfig(cfg)
	if err != nil {
		return nil, err
	}
	run, err := t.runConfig(asked)
	if err != nil {
		return nil, err
	}
	return t.restartAs(cfg, asked, func() (*target.Host, error) { return r.RestartWith(ctx, base, run, crash) })
}

// PowerCut cuts the power under the inner host and puts new proxies in
// front of the host started again.
func (t *Target) PowerCut(ctx context.Context, cfg target.Config, disk target.Disk) (*target.Host, error) {
	pc, ok := t.Inner.(target.PowerCutter)
	if !ok {
		return nil, fmt.Errorf("%w: the %s target cannot cut the power under a host", target.ErrUnsatisfiable, t.Inner.Kind())
	}
	return t.restartWith(cfg, func(run target.Config) (*target.Host, error) { return pc.PowerCut(ctx, run, disk) })
}

func (t *Target) restartWith(cfg target.Config, restart func(run target.Config) (*target.Host, error)) (*target.Host, error) {
	run, err := t.runConfig(cfg)
	if err != nil {
		return nil, err
	}
	return t.restartAs(cfg, cfg, func() (*target.Host, error) { return restart(run) })
}

// restartAs restarts the host of cfg, which then runs asked (cfg, or a
// changed configuration of the same host), with new proxies in front.
func (t *Target) restartAs(cfg, asked target.Config, restart func() (*target.Host, error)) (*target.Host, error) {
	h, err := restart()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	delete(t.byCfg, cfg.Key())
	t.mu.Unlock()
	t.agtp.mu.Lock()
	delete(t.agtp.byCfg, cfg.Key())
	t.agtp.mu.Unlock()
	return t.wrap(asked, h)
}

// wrap puts the rule's proxies between the suite and a host the inner
// target gave.
func (t *Target) wrap(cfg target.Config, h *target.Host) (*target.Host, error) {
	t.mu.Lock()
	if was, ok := t.upstream[cfg.Key()]; ok && was != h.HTTP {
		delete(t.byCfg, cfg.Key())
		t.agtp.mu.Lock()
		delete(t.agtp.byCfg, cfg.Key())
		t.agtp.mu.Unlock()
	}
	if t.upstream == nil {
		t.upstream = map[string]string{}
	}
	t.upstream[cfg.Key()] = h.HTTP
	t.mu.Unlock()
	asked := askedFor(cfg)
	h = target.WithConfig(h, cfg)
	var logs func() []string
	if t.Rule.Logs != nil {
		if _, ok := h.Logs(); ok {
			logs = func() []string { l, _ := h.Logs(); return t.Rule.Logs(l) }
		}
	}
	agtpAddr, err := t.agtpAddr(h, cfg, asked)
	if err != nil {
		return nil, err
	}
	if h.HTTP == "" || (t.Rule.Intercept == nil && t.Rule.Response == nil && t.Rule.Stream == nil) {
		return target.Wrap(h, h.HTTP, agtpAddr, logs), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	proxyURL, ok := t.byCfg[cfg.Key()]
	if !ok {
		proxyURL, err = t.proxy(h.HTTP, asked)
		if err != nil {
			return nil, err
		}
		if t.byCfg == nil {
			t.byCfg = map[string]string{}
		}
		t.byCfg[cfg.Key()] = proxyURL
	}
	return target.Wrap(h, proxyURL, agtpAddr, logs), nil
}

func (t *Target) proxy(upstream string, cfg map[string]map[string]any) (string, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return "", err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		x, _ := resp.Request.Context().Value(exchangeKey{}).(*Exchange)
		if x == nil {
			return nil
		}
		if isEventStream(resp.Header) {
			// An event stream may never end, so it is not buffered: it is
			// rewritten frame by frame (ReverseProxy flushes event streams
			// after every write), or passed through as it is.
			if t.Rule.Stream != nil {
				resp.Body = newFrameRewriter(resp.Body, func(f []byte) [][]byte { return t.Rule.Stream(x, f) })
				resp.Header.Del("Content-Length")
				resp.ContentLength = -1
			}
			return nil
		}
		if t.Rule.Response == nil {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
		t.Rule.Response(x, r)
		resp.StatusCode = r.Status
		resp.Status = strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
		resp.Header = r.Header
		resp.Header.Set("Content-Length", strconv.Itoa(len(r.Body)))
		resp.ContentLength = int64(len(r.Body))
		resp.Body = io.NopCloser(bytes.NewReader(r.Body))
		return nil
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		x := &Exchange{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(), Header: req.Header.Clone(), Body: body, Config: cfg, Upstream: upstream}
		if t.Rule.Intercept != nil {
			if r := t.Rule.Intercept(x); r != nil {
				for k, vs := range r.Header {
					w.Header()[k] = vs
				}
				w.WriteHeader(r.Status)
				_, _ = w.Write(r.Body)
				return
			}
			if !bytes.Equal(x.Body, body) {
				body = x.Body
				req.ContentLength = int64(len(body))
				req.Header.Set("Content-Length", strconv.Itoa(len(body)))
			}
		}
		// Keep "no body" distinct from "empty body" on the way through.
		if req.ContentLength != 0 || len(body) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(body))
		} else {
			req.Body = http.NoBody
		}
		rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), exchangeKey{}, x)))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.proxies = append(t.proxies, srv)
	return "http://" + ln.Addr().String(), nil
}

type exchangeKey struct{}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// maxStreamFrame bounds one event-stream frame the proxy holds, like the
// bound on a buffered body.
const maxStreamFrame = 8 << 20

// frameRewriter reads an event stream, splits it into frames at blank lines
// (LF or CRLF line ends) and yields what edit makes of each frame as soon as
// the frame is complete.
type frameRewriter struct {
	src  *bufio.Reader
	body io.Closer
	edit func([]byte) [][]byte
	out  []byte
	err  error
}

func newFrameRewriter(body io.ReadCloser, edit func([]byte) [][]byte) io.ReadCloser {
	return &frameRewriter{src: bufio.NewReader(body), body: body, edit: edit}
}

func (f *frameRewriter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.fill()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// fill reads one frame and queues its replacement; at the end of the stream
// an unterminated tail passes through as it is.
func (f *frameRewriter) fill() {
	var frame []byte
	for {
		line, err := f.src.ReadBytes('\n')
		if len(frame)+len(line) > maxStreamFrame {
			f.err = fmt.Errorf("sabotage proxy: an event-stream frame exceeds %d bytes", maxStreamFrame)
			return
		}
		if err != nil {
			f.out = append(frame, line...)
			f.err = err
			return
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if len(frame) == 0 {
				continue // a stray blank line dispatches nothing
			}
			for _, g := range f.edit(frame) {
				f.out = append(f.out, g...)
				if !bytes.HasSuffix(g, []byte("\n")) {
					f.out = append(f.out, '\n')
				}
				f.out = append(f.out, '\n')
			}
			return
		}
		frame = append(frame, line...)
	}
}

func (f *frameRewriter) Close() error { return f.body.Close() }

// Close stops the proxies and the inner target.
func (t *Target) Close() error {
	t.mu.Lock()
	ps := t.proxies
	t.proxies = nil
	t.mu.Unlock()
	for _, p := range ps {
		_ = p.Close()
	}
	t.agtp.close()
	return t.Inner.Close()
}

// Key names a rule: its requirement id, and its variant when it has one.
func (r Rule) Key() string {
	if r.Variant == "" {
		return r.ID
	}
	return r.ID + "#" + r.Variant
}

// Rules returns every rule, sorted by key.
func Rules() []Rule {
	var out []Rule
	seen := map[string]bool{}
	for _, set := range [][]Rule{contractRefineRules, openWOPRules, agtpRules, aglRules, aglCheckerRules} {
		for _, r := range set {
			if seen[r.Key()] {
				panic(fmt.Sprintf("sabotage: two rules named %s (give one a Variant)", r.Key()))
			}
			seen[r.Key()] = true
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// ByID groups the rules by the requirement they break.
func ByID() map[string][]Rule {
	out := map[string][]Rule{}
	for _, r := range Rules() {
		out[r.ID] = append(out[r.ID], r)
	}
	return out
}
