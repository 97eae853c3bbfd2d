package sabotage

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/parley-conformance/parley/target"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// AGTPExchange is what an AGTP rule sees of one request. AGTP is not HTTP:
// the proxy in front of a host's AGTP listener speaks AGTP/1.0 on both
// sides with wire/agtp's codec, over TLS 1.3 when the host does (presenting
// the certificate the scenario configured the host with) and plaintext on
// loopback otherwise.
type AGTPExchange struct {
	// Request is the request as the suite sent it; AGTPRequest may rewrite
	// it before it is forwarded.
	Request *agtp.Request
	// Config is the configuration the scenario asked for, by family.
	Config map[string]map[string]any
	// HTTP is the host's own HTTP base URL (its seams), for rules that must
	// read the host's current policy.
	HTTP string
	// Memory is shared by every exchange through one proxy (one host).
	Memory *sync.Map
	// Conn names the suite connection the request came on: one scenario's
	// (a scenario speaks AGTP over one connection), for a rule whose broken
	// host must misbehave the same way whatever other scenarios share it.
	Conn string

	upstream func(ctx context.Context, req *agtp.Request) (*agtp.Response, error)
}

// upstreamLimit bounds the proxy's exchanges with the host. It is longer
// than any deadline the suite sets on the exchange it relays (the suite's
// deadline follows the run's progress, up to steps.ExchangeCap, 100 s): the
// suite's deadline decides when a host is too slow, never the proxy's, so a
// busy machine does not make the proxy answer 502 where the host would have
// answered.
const upstreamLimit = 110 * time.Second

// Upstream sends an extra request to the host on a connection of its own:
// for a rule whose broken host does more than the suite asked.
func (x *AGTPExchange) Upstream(req *agtp.Request) (*agtp.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), upstreamLimit)
	defer cancel()
	return x.upstream(ctx, req)
}

// Params returns the request's parameters (the envelope's parameters
// object, or the bare body), never nil.
func (x *AGTPExchange) Params() map[string]any {
	var body map[string]any
	_ = json.Unmarshal(x.Request.Body, &body)
	if p, ok := body["parameters"].(map[string]any); ok {
		return p
	}
	if body == nil {
		body = map[string]any{}
	}
	return body
}

// SetParam rewrites one request parameter (nil deletes it).
func (x *AGTPExchange) SetParam(name string, v any) {
	var body map[string]any
	_ = json.Unmarshal(x.Request.Body, &body)
	if body == nil {
		body = map[string]any{}
	}
	p, ok := body["parameters"].(map[string]any)
	if !ok {
		p = body
	}
	if v == nil {
		delete(p, name)
	} else {
		p[name] = v
	}
	x.Request.Body, _ = json.Marshal(body)
}

// agtpProxies are a Target's AGTP proxies, one per configuration and
// listener.
type agtpProxies struct {
	mu      sync.Mutex
	byCfg   map[string]string
	plain   map[string]string // the proxy in front of a host's plaintext listener
	servers []*agtp.Server
	clients []*agtp.Client
}

// agtpAddr returns the AGTP address the suite should use for h: the host's
// own, or a proxy in front of it when the rule has an AGTP hook. A host
// that also serves plaintext on loopback beside its TLS listener
// (agtp_plaintext) gets a proxy there too, sharing the rule's memory of
// the host, and h, the caller's copy, is pointed at it: the rule sees the
// scenarios of either transport.
func (t *Target) agtpAddr(h *target.Host, cfg target.Config, asked map[string]map[string]any) (string, error) {
	if h.AGTP == "" || (t.Rule.AGTP == nil && t.Rule.AGTPRequest == nil) {
		return h.AGTP, nil
	}
	p := &t.agtp
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byCfg[cfg.Key()]; ok {
		if h.AGTPPlaintext != "" {
			h.AGTPPlaintext = p.plain[cfg.Key()]
		}
		return a, nil
	}
	var serverTLS, clientTLS *tls.Config
	if m, ok := asked["agtp"]["tls"].(map[string]any); ok {
		certPEM, _ := m["cert_pem"].(string)
		keyPEM, _ := m["key_pem"].(string)
		cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
		if err != nil {
			return "", err
		}
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{"agtp"}}
		// The upstream is the host this target just started on loopback.
		clientTLS = &tls.Config{InsecureSkipVerify: true}
	}
	mem := &sync.Map{}
	addr, err := p.listen(t.Rule, asked, h.HTTP, mem, h.AGTP, serverTLS, clientTLS)
	if err != nil {
		return "", err
	}
	if p.byCfg == nil {
		p.byCfg, p.plain = map[string]string{}, map[string]string{}
	}
	if h.AGTPPlaintext != "" {
		plain, err := p.listen(t.Rule, asked, h.HTTP, mem, h.AGTPPlaintext, nil, nil)
		if err != nil {
			return "", err
		}
		h.AGTPPlaintext = plain
		p.plain[cfg.Key()] = plain
	}
	p.byCfg[cfg.Key()] = addr
	return addr, nil
}

// listen starts one proxy in front of the host's AGTP listener at
// upstream (TLS on both sides when serverTLS is set, plaintext on loopback
// otherwise) and returns its address. The caller holds p.mu.
func (p *agtpProxies) listen(rule Rule, asked map[string]map[string]any, hostHTTP string, mem *sync.Map, upstream string, serverTLS, clientTLS *tls.Config) (string, error) {
	newClient := func(oneShot bool) (*agtp.Client, error) {
		return agtp.NewClient(upstream, agtp.ClientOptions{TLS: clientTLS, Timeout: upstreamLimit, OneShot: oneShot})
	}
	side, err := newClient(true)
	if err != nil {
		return "", err
	}
	ph := &agtpProxyHandler{rule: rule, cfg: asked, http: hostHTTP, mem: mem, side: side,
		conns: map[string]*agtp.Client{}, newClient: func() (*agtp.Client, error) { return newClient(false) }}
	srv := agtp.NewServer(ph, agtp.ServerOptions{ConnClosed: ph.closed})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = side.Close()
		return "", err
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	go func() { _ = srv.Serve(ln) }()
	p.servers = append(p.servers, srv)
	p.clients = append(p.clients, side)
	return ln.Addr().String(), nil
}

func (p *agtpProxies) close() {
	p.mu.Lock()
	servers, clients := p.servers, p.clients
	p.servers, p.clients, p.byCfg, p.plain = nil, nil, nil, nil
	p.mu.Unlock()
	for _, s := range servers {
		_ = s.Close()
	}
	for _, c := range clients {
		_ = c.Close()
	}
}

// agtpProxyHandler forwards each suite connection over a connection of its
// own to the host, applying the rule on the way.
type agtpProxyHandler struct {
	rule      Rule
	cfg       map[string]map[string]any
	http      string
	mem       *sync.Map
	side      *agtp.Client
	newClient func() (*agtp.Client, error)

	mu    sync.Mutex
	conns map[string]*agtp.Client
}

func (p *agtpProxyHandler) client(ci agtp.ConnInfo) (*agtp.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[ci.ID]; c != nil {
		return c, nil
	}
	c, err := p.newClient()
	if err != nil {
		return nil, err
	}
	p.conns[ci.ID] = c
	return c, nil
}

func (p *agtpProxyHandler) closed(ci agtp.ConnInfo) {
	p.mu.Lock()
	c := p.conns[ci.ID]
	delete(p.conns, ci.ID)
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func (p *agtpProxyHandler) ServeAGTP(ctx context.Context, ci agtp.ConnInfo, req *agtp.Request) *agtp.Response {
	x := &AGTPExchange{Request: req, Config: p.cfg, HTTP: p.http, Memory: p.mem, Conn: fmt.Sprintf("%p/%s", p, ci.ID),
		upstream: func(ctx context.Context, r *agtp.Request) (*agtp.Response, error) { return p.side.Do(ctx, r) }}
	if p.rule.AGTPRequest != nil {
		if r := p.rule.AGTPRequest(x); r != nil {
			if r.Header == nil {
				r.Header = agtp.Header{}
			}
			return r
		}
	}
	c, err := p.client(ci)
	if err != nil {
		return agtp.ErrorResponse(502, "proxy-upstream-error", err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, upstreamLimit)
	defer cancel()
	resp, err := c.Do(ctx, x.Request)
	if err != nil {
		var fe *agtp.FrameError
		if errors.As(err, &fe) {
			return agtp.ErrorResponse(502, "proxy-upstream-malformed", err.Error())
		}
		return agtp.ErrorResponse(502, "proxy-upstream-error", err.Error())
	}
	if p.rule.AGTP != nil {
		p.rule.AGTP(x, resp)
	}
	return resp
}
