// Package agtp binds the AGTP RCNS features (features/agtp) to a host's
// AGTP/1.0 wire, through wire/agtp's client with its deadlines and limits.
// The suite describes the host in the configuration's spec-level AGTP
// section (schemas/agtp/host-config.json: the RCNS knobs a scenario sets,
// the agents it declares, and the suite's fixed capabilities, endpoints,
// recipes and passthrough; docs/hosts/agtp.md); every scenario runs
// over TLS 1.3 with a throwaway certificate the suite issues, and over
// plaintext loopback. Steps assert on what came back on the wire; the only
// seam used is the recipe seam (an operator editing policy), which
// docs/host-interface.md describes.
package agtp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

const family = "agtp"

// Transports a scenario names.
const (
	TransportTLS       = "TLS 1.3"
	TransportPlaintext = "plaintext loopback"
)

// Register binds every AGTP step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerActions(c)
	registerAssertions(c)
	registerPropose(c)
}

type agent struct {
	name   string
	id     string
	tier   int
	scopes []string
}

// state is one scenario's AGTP memory.
type state struct {
	salt      string
	transport string
	knobs     map[string]any    // [policies.rcns] knob -> value
	propKnobs map[string]any    // [policies.propose] knob -> value
	versions  map[string]string // recipe name -> the version the scenario configures
	agents    map[string]*agent
	order     []string
	places    map[string]string // {room}, {room2}, {slot} -> this scenario's value

	client *wire.Client
	form   string // the request body form the host declared (target.BodyForm*)

	current     string            // "the contract"
	named       map[string]string // remembered contracts
	previewHash map[string]string // synthesis_id -> contract_hash of its 461
	attempts    map[string]bool   // RCNS-Attempt-Ids seen
	batch       []*steps.Response // the responses of the last repeated send
	firstByKey  map[string]*steps.Response
	sweep       *steps.Response

	issued       map[string]time.Time // synthesis_id -> when the suite first saw it issued
	proposal     string               // the last proposal_id a 261 named
	lastAttempt  string               // the RCNS-Attempt-Id last inspected
	lastResp     *steps.Response      // the last AGTP answer of any agent
	sessionBound []sessionBound       // syntheses of the current session not said to be persistent

	preview     preview         // the last 461 preview
	gateEvals   map[string]int  // agent name -> opted-in requests it sent that reached the gate
	controlSid  string          // the control agent's contract, once shown served by the resolver
	proposed    proposedPair    // the pair the last proposal named
	onPurpose   map[string]bool // what the scenario says it sends malformed on purpose
	readChecked bool            // the Tier A write and read were shown to work
}

// preview is a 461 the suite was sent: who asked, for what, and the
// synthesis_id it named ("" when it named none).
type preview struct {
	agent, method, target, sid string
}

// proposedPair is the (method, path) a proposal named.
type proposedPair struct{ method, path string }

// sessionBound is a synthesis an agent obtained by PROPOSE in the current
// session and that its 263 did not call persistent.
type sessionBound struct{ agent, sid string }

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		salt := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		s := &state{salt: salt, knobs: map[string]any{}, propKnobs: map[string]any{}, versions: map[string]string{}, agents: map[string]*agent{},
			named: map[string]string{}, issued: map[string]time.Time{}, previewHash: map[string]string{}, attempts: map[string]bool{},
			firstByKey: map[string]*steps.Response{}, places: map[string]string{}, gateEvals: map[string]int{}, onPurpose: map[string]bool{}}
		for _, p := range []string{"room", "room2", "slot", "suite", "desk", "hall"} {
			s.places[p] = p + "-" + salt
		}
		// The suite's reader: writes a control room record and reads room
		// records through the Tier A endpoints, so that whether an action
		// ran is visible on the wire.
		s.addAgent(readerName, 1, []string{"rooms:read", "rooms:write"})
		// The suite's control agent: it obtains a contract of its own so
		// that DISCOVER /contracts is shown able to list one before the
		// suite reads an agent's empty listing as "no contract".
		s.addAgent(controlName, 1, []string{"rooms:*", "rcns:negotiate"})
		return s
	}).(*state)
}

const (
	readerName  = "parley-reader"
	controlName = "parley-control"
)

func (s *state) addAgent(name string, tier int, scopes []string) {
	sum := sha256.Sum256([]byte("parley-agent\x00" + s.salt + "\x00" + name))
	if _, ok := s.agents[name]; !ok {
		s.order = append(s.order, name)
	}
	s.agents[name] = &agent{name: name, id: hex.EncodeToString(sum[:]), tier: tier, scopes: scopes}
}

func (s *state) agent(name string) (*agent, error) {
	a := s.agents[name]
	if a == nil {
		return nil, steps.Fault("no Given step declared agent %q", name)
	}
	return a, nil
}

// expand replaces {room}, {room2}, {slot}, {suite}, {desk} with the scenario's own values and
// {fresh} with a new one each time.
func (s *state) expand(target string) string {
	for k, v := range s.places {
		target = strings.ReplaceAll(target, "{"+k+"}", v)
	}
	for strings.Contains(target, "{fresh}") {
		target = strings.Replace(target, "{fresh}", "fresh-"+strings.ReplaceAll(uuid.NewString(), "-", "")[:12], 1)
	}
	return target
}

// The suite's reference policy beyond the knobs and agents, in the terms of
// the configuration section (schemas/agtp/host-config.json):
//
//   - recipe room-booking composes store-room and count-booking for BOOK
//     /room/{id} and answers 201 (version "1" unless the scenario says);
//   - recipe suite-booking composes store-suite for BOOK /suite/{id}, a pair
//     the operator reviews before a PROPOSE is approved;
//   - recipe hall-booking composes store-hall, a capability the server does
//     not have, for BOOK /hall/{id}: synthesizing it fails;
//   - a passthrough serves SCHEDULE /slot/{id} with store-slot (the PROPOSE
//     policy refuses it, as it refuses RESERVE /desk/{id});
//   - PENCIL is a custom method the server declares, which nothing composes;
//   - FETCH /room, CREATE /room and LIST /rooms are Tier A, QUOTE /tariff is
//     Tier B.
const (
	capStoreRoom   = "store-room"
	capStoreRoomV2 = "store-room-v2"
	capStoreHall   = "store-hall" // named by hall-booking, absent from the envelope
)

// fixtureCapabilities is the capability envelope.
func fixtureCapabilities() []any {
	capability := func(name, effect, records string, scopes ...string) map[string]any {
		c := map[string]any{"name": name, "effect": effect, "records": records}
		if len(scopes) > 0 {
			c["authority_scope"] = strs(scopes)
		}
		return c
	}
	return []any{
		capability(capStoreRoom, "store", "rooms", "rooms:write"),
		capability("fetch-room", "fetch", "rooms", "rooms:read"),
		capability("list-rooms", "list", "rooms", "rooms:read"),
		capability(capStoreRoomV2, "store", "rooms-v2", "rooms:write"),
		capability("count-booking", "count", "bookings", "rooms:write"),
		capability("store-slot", "store", "slots", "rooms:write"),
		capability("store-suite", "store", "suites", "rooms:write"),
		capability("echo-tariff", "echo", "tariffs"),
	}
}

// fixtureEndpoints are the registered Tier A and B endpoints.
func fixtureEndpoints() []any {
	ep := func(method, path, tier, capability string) map[string]any {
		return map[string]any{"method": method, "path": path, "tier": tier, "capability": capability}
	}
	return []any{
		ep("FETCH", "/room", "A", "fetch-room"),
		ep("CREATE", "/room", "A", capStoreRoom),
		ep("LIST", "/rooms", "A", "list-rooms"),
		ep("QUOTE", "/tariff", "B", "echo-tariff"),
	}
}

// fixtureRecipes are the recipes, room-booking at the version the scenario
// configures.
func (s *state) fixtureRecipes() []any {
	recipe := func(name, method, path string, status int, composedOf ...string) map[string]any {
		v := s.versions[name]
		if v == "" {
			v = "1"
		}
		return map[string]any{"name": name, "version": v, "method": method, "path": path,
			"composed_of": strs(composedOf), "success_status": status}
	}
	return []any{
		recipe("suite-booking", "BOOK", "/suite/{id}", 201, "store-suite"),
		recipe("room-booking", "BOOK", "/room/{id}", 201, capStoreRoom, "count-booking"),
		recipe("hall-booking", "BOOK", "/hall/{id}", 201, capStoreHall),
	}
}

func strs(ss []string) []any {
	out := make([]any, len(ss))
	for i, x := range ss {
		out[i] = x
	}
	return out
}

// section renders the host's configuration section.
func (s *state) section() map[string]any {
	rcns := map[string]any{}
	for k, v := range s.knobs {
		rcns[k] = v
	}
	propose := map[string]any{"refused": strs([]string{"SCHEDULE /slot/{id}", "RESERVE /desk/{id}"}), "review": strs([]string{"BOOK /suite/{id}"})}
	for k, v := range s.propKnobs {
		propose[k] = v
	}
	agents := make([]any, 0, len(s.order))
	for _, n := range s.order {
		a := s.agents[n]
		agents = append(agents, map[string]any{"agent_id": a.id, "name": a.name, "principal": "parley@example.test", "status": "active",
			"trust_tier": a.tier, "verification_path": "dns-anchored", "scopes": strs(a.scopes)})
	}
	return map[string]any{
		"server_id":    "parley-agtp-under-test",
		"methods":      strs([]string{"PENCIL"}),
		"rcns":         rcns,
		"propose":      propose,
		"agents":       agents,
		"capabilities": fixtureCapabilities(),
		"endpoints":    fixtureEndpoints(),
		"recipes":      s.fixtureRecipes(),
		"passthroughs": []any{map[string]any{"method": "SCHEDULE", "path": "/slot/{id}", "capability": "store-slot"}},
	}
}

// literal reads the value a Given step writes after "=" (a JSON literal:
// true, 2, "optimistic").
func literal(text string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, steps.Fault("cannot read the knob value %s: %v", text, err)
	}
	if f, ok := v.(float64); ok && f == float64(int(f)) {
		return int(f), nil
	}
	return v, nil
}

// knobInt reads an integer knob the scenario set.
func (s *state) knobInt(name string) (int, bool) {
	n, ok := s.knobs[name].(int)
	return n, ok && n > 0
}

// reconfigure re-renders the host section after a Given step.
func reconfigure(ctx context.Context) error {
	s := st(ctx)
	sec := s.section()
	if s.transport == TransportTLS {
		m, err := material()
		if err != nil {
			return steps.Fault("cannot make the throwaway TLS material: %v", err)
		}
		steps.From(ctx).Secret(m.keyPEM)
		sec["tls"] = map[string]any{"cert_pem": m.certPEM, "key_pem": m.keyPEM}
	}
	return steps.From(ctx).Configure(family, func(cur map[string]any) {
		for k := range cur {
			delete(cur, k)
		}
		for k, v := range sec {
			cur[k] = v
		}
	})
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an AGTP server reached over (TLS 1\.3|plaintext loopback)$`, func(ctx context.Context, transport string) error {
		st(ctx).transport = transport
		return reconfigure(ctx)
	})
	c.Given(`^its \[policies\.rcns\] sets ([a-z_]+) = (.+)$`, func(ctx context.Context, knob, text string) error {
		v, err := literal(text)
		if err != nil {
			return err
		}
		st(ctx).knobs[knob] = v
		if knob == "contract_ttl_seconds" {
			// A host with the clock seam lets the TTL pass without real
			// waiting; one without is certified on real time.
			if err := steps.From(ctx).PreferSeams(); err != nil {
				return err
			}
		}
		return reconfigure(ctx)
	})
	c.Given(`^its \[policies\.propose\] sets ([a-z_]+) = (.+)$`, func(ctx context.Context, knob, text string) error {
		v, err := literal(text)
		if err != nil {
			return err
		}
		st(ctx).propKnobs[knob] = v
		return reconfigure(ctx)
	})
	c.Given(`^its recipe "([a-z-]+)" is at version "([^"]+)"$`, func(ctx context.Context, name, version string) error {
		st(ctx).versions[name] = version
		return reconfigure(ctx)
	})
	c.Given(`^its \[policies\.rcns\] leaves ([a-z_]+) unset$`, func(ctx context.Context, knob string) error {
		delete(st(ctx).knobs, knob)
		return reconfigure(ctx)
	})
	c.Given(`^agent "([a-z]+)" has trust tier ([123]) and is granted "([^"]*)"$`, func(ctx context.Context, name string, tier int, grant string) error {
		var scopes []string
		for _, t := range strings.Split(grant, ",") {
			if t = strings.TrimSpace(t); t != "" {
				scopes = append(scopes, t)
			}
		}
		st(ctx).addAgent(name, tier, scopes)
		return reconfigure(ctx)
	})
	// A scenario that sends a value outside the spec's grammar on purpose
	// says so; the fixture-grammar test holds every other one to it.
	c.Given(`^the scenario sends a malformed (method and path|method|path) on purpose$`, func(ctx context.Context, what string) error {
		for _, w := range strings.Split(what, " and ") {
			st(ctx).onPurpose[w] = true
		}
		return nil
	})
	c.Given(`^the operator's recipe seam is available$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
}

// conn returns the scenario's AGTP client, acquiring the host first.
func (s *state) conn(ctx context.Context) (*wire.Client, error) {
	if s.client != nil {
		return s.client, nil
	}
	w := steps.From(ctx)
	if s.transport == "" {
		return nil, steps.Fault("no step said which transport reaches the AGTP server")
	}
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	if h.AGTP == "" {
		return nil, steps.Fail(`the host exposes no AGTP listener (its ready line has no "agtp" address)`)
	}
	if s.transport == TransportPlaintext && h.Isolated {
		// The published port is loopback on this side, but the host sees the
		// connection arrive from its namespace's gateway, off loopback.
		return nil, w.Block(verdict.CauseTarget, "plaintext AGTP is for loopback peers only, and a host in a network namespace of its own (container target) is not reached from loopback; certify plaintext rows with the exec or refhost target")
	}
	opt := wire.ClientOptions{Timeout: steps.ExchangeTimeout, DialTimeout: 5 * time.Second,
		Limits: wire.Limits{MaxBodyBytes: steps.MaxBodyBytes}}
	if s.transport == TransportTLS {
		m, err := material()
		if err != nil {
			return nil, steps.Fault("cannot make the throwaway TLS material: %v", err)
		}
		opt.TLS = &tls.Config{RootCAs: m.pool}
	}
	s.form = h.AGTPBodyForm
	if s.form == "" {
		s.form = target.BodyFormEnvelope
	}
	c, err := wire.NewClient(h.AGTP, opt)
	if errors.Is(err, wire.ErrPlaintextNotLoopback) {
		return nil, w.Block(verdict.CauseTarget, "plaintext AGTP is only allowed to a loopback address and the host is at %s", h.AGTP)
	}
	if err != nil {
		return nil, steps.Fail("the host's AGTP address %q cannot be dialled: %v", h.AGTP, err)
	}
	w.Cleanup(func() { _ = c.Close() })
	// A restarted host listens elsewhere; the next exchange dials it anew
	// (and, the connection being the AGTP session, in a new session).
	w.OnRestart(func(*target.Host) {
		if s.client == c {
			_ = c.Close()
			s.client = nil
		}
	})
	s.client = c
	return c, nil
}

// tlsMaterial is the throwaway CA and server certificate of this run: the
// host is configured with the leaf, the suite trusts only the CA.
type tlsMaterial struct {
	certPEM, keyPEM string
	pool            *x509.CertPool
}

var (
	matOnce sync.Once
	mat     *tlsMaterial
	matErr  error
)

func material() (*tlsMaterial, error) {
	matOnce.Do(func() { mat, matErr = newMaterial() })
	return mat, matErr
}

func newMaterial() (*tlsMaterial, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial := func() *big.Int { n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)); return n }
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "parley throwaway AGTP CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, MaxPathLenZero: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tlsMaterial{
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})),
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		pool:    pool,
	}, nil
}
