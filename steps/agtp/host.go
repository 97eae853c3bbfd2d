// Package agtp binds the AGTP RCNS features (features/agtp) to a host's
// AGTP/1.0 wire, through wire/agtp's client with its deadlines and limits.
// The suite describes the host as a TOML document (the [policies.rcns]
// knobs a scenario sets, the agents it declares, and the suite's fixed
// recipe, passthrough, primitive and endpoint fixture); every scenario runs
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
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
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
	knobs     map[string]string // [policies.rcns] knob -> TOML literal
	propKnobs map[string]string // [policies.propose] knob -> TOML literal
	agents    map[string]*agent
	order     []string
	places    map[string]string // {room}, {room2}, {slot} -> this scenario's value

	client *wire.Client

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

	preview     preview        // the last 461 preview
	gateEvals   map[string]int // agent name -> opted-in requests it sent that reached the gate
	controlSid  string         // the control agent's contract, once obtained
	readChecked bool           // the Tier A write and read were shown to work
}

// preview is a 461 the suite was sent: who asked, for what, and the
// synthesis_id it named ("" when it named none).
type preview struct {
	agent, method, target, sid string
}

// sessionBound is a synthesis an agent obtained by PROPOSE in the current
// session and that its 263 did not call persistent.
type sessionBound struct{ agent, sid string }

func st(ctx context.Context) *state {
	return steps.From(ctx).State(family, func() any {
		salt := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		s := &state{salt: salt, knobs: map[string]string{}, propKnobs: map[string]string{}, agents: map[string]*agent{},
			named: map[string]string{}, issued: map[string]time.Time{}, previewHash: map[string]string{}, attempts: map[string]bool{},
			firstByKey: map[string]*steps.Response{}, places: map[string]string{}, gateEvals: map[string]int{}}
		for _, p := range []string{"room", "room2", "slot", "suite", "desk"} {
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

// fixture is the suite's reference policy beyond the knobs and agents:
// recipe room-booking v1 composes rooms.put and bookings.count for BOOK
// /room/{id} and answers 201; recipe suite-booking v1 composes suites.put
// for BOOK /suite/{id} (a pair the operator reviews before a PROPOSE is
// approved); a passthrough serves SCHEDULE /slot/{id} (which the PROPOSE
// policy refuses, as it refuses RESERVE /desk/{id}); PENCIL is a custom
// method of policies.methods that nothing composes; FETCH /room, CREATE
// /room and LIST /rooms are Tier A, QUOTE /quote is Tier B.
const fixture = `
[[policies.recipes]]
name = "suite-booking"
version = "1"
method = "BOOK"
path = "/suite/{id}"
steps = ["suites.put"]
success_status = 201

[[policies.recipes]]
name = "room-booking"
version = "1"
method = "BOOK"
path = "/room/{id}"
steps = ["rooms.put", "bookings.count"]
success_status = 201

[[policies.passthroughs]]
method = "SCHEDULE"
path = "/slot/{id}"
primitive = "slots.put"

[[primitives]]
name = "rooms.put"
kind = "record.put"
collection = "rooms"
scopes = ["rooms:write"]

[[primitives]]
name = "rooms.get"
kind = "record.get"
collection = "rooms"
scopes = ["rooms:read"]

[[primitives]]
name = "rooms.list"
kind = "record.list"
collection = "rooms"
scopes = ["rooms:read"]

[[primitives]]
name = "rooms-v2.put"
kind = "record.put"
collection = "rooms-v2"
scopes = ["rooms:write"]

[[primitives]]
name = "bookings.count"
kind = "counter.incr"
collection = "bookings"
scopes = ["rooms:write"]

[[primitives]]
name = "slots.put"
kind = "record.put"
collection = "slots"
scopes = ["rooms:write"]

[[primitives]]
name = "suites.put"
kind = "record.put"
collection = "suites"
scopes = ["rooms:write"]

[[primitives]]
name = "quotes.echo"
kind = "echo"

[[endpoints]]
method = "FETCH"
path = "/room"
tier = "A"
primitive = "rooms.get"

[[endpoints]]
method = "CREATE"
path = "/room"
tier = "A"
primitive = "rooms.put"

[[endpoints]]
method = "LIST"
path = "/rooms"
tier = "A"
primitive = "rooms.list"

[[endpoints]]
method = "QUOTE"
path = "/quote"
tier = "B"
primitive = "quotes.echo"
`

// toml renders the host's configuration document.
func (s *state) toml() string {
	var b strings.Builder
	b.WriteString("server_id = \"parley-agtp-under-test\"\n\n[policies]\nmethods = [\"PENCIL\"]\n\n[policies.rcns]\n")
	writeKnobs(&b, s.knobs)
	b.WriteString("\n[policies.propose]\nrefused = [\"SCHEDULE /slot/{id}\", \"RESERVE /desk/{id}\"]\nreview = [\"BOOK /suite/{id}\"]\n")
	writeKnobs(&b, s.propKnobs)
	b.WriteString(fixture)
	for _, n := range s.order {
		a := s.agents[n]
		q := make([]string, len(a.scopes))
		for i, t := range a.scopes {
			q[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&b, "\n[[agents]]\nagent_id = %q\nname = %q\nprincipal = \"parley@example.test\"\ntrust_tier = %d\nverification_path = \"dns-anchored\"\nscopes = [%s]\n",
			a.id, a.name, a.tier, strings.Join(q, ", "))
	}
	return b.String()
}

func writeKnobs(b *strings.Builder, knobs map[string]string) {
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "%s = %s\n", k, knobs[k])
	}
}

// reconfigure re-renders the host section after a Given step.
func reconfigure(ctx context.Context) error {
	s := st(ctx)
	doc := s.toml()
	var mat map[string]any
	if s.transport == TransportTLS {
		m, err := material()
		if err != nil {
			return steps.Fault("cannot make the throwaway TLS material: %v", err)
		}
		steps.From(ctx).Secret(m.keyPEM)
		mat = map[string]any{"cert_pem": m.certPEM, "key_pem": m.keyPEM}
	}
	return steps.From(ctx).Configure(family, func(sec map[string]any) {
		sec["toml"] = doc
		if mat != nil {
			sec["tls"] = mat
		} else {
			delete(sec, "tls")
		}
	})
}

func registerHost(c *steps.Catalog) {
	c.Given(`^an AGTP server reached over (TLS 1\.3|plaintext loopback)$`, func(ctx context.Context, transport string) error {
		st(ctx).transport = transport
		return reconfigure(ctx)
	})
	c.Given(`^its \[policies\.rcns\] sets ([a-z_]+) = (.+)$`, func(ctx context.Context, knob, literal string) error {
		st(ctx).knobs[knob] = literal
		return reconfigure(ctx)
	})
	c.Given(`^its \[policies\.propose\] sets ([a-z_]+) = (.+)$`, func(ctx context.Context, knob, literal string) error {
		st(ctx).propKnobs[knob] = literal
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
	c, err := wire.NewClient(h.AGTP, opt)
	if errors.Is(err, wire.ErrPlaintextNotLoopback) {
		return nil, w.Block(verdict.CauseTarget, "plaintext AGTP is only allowed to a loopback address and the host is at %s", h.AGTP)
	}
	if err != nil {
		return nil, steps.Fail("the host's AGTP address %q cannot be dialled: %v", h.AGTP, err)
	}
	w.Cleanup(func() { _ = c.Close() })
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
