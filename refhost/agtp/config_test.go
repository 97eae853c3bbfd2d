package agtp

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

func TestDefaults(t *testing.T) {
	c, err := ParseTOML([]byte("[policies.rcns]\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.normalized()
	if err != nil {
		t.Fatal(err)
	}
	r := n.Policies.RCNS
	if r.Enabled || r.Mode != "confirm-first" || r.MinTrustTier != 1 || r.RateLimitPerMinute != 10 ||
		r.OnPolicyChange != "grandfather" || r.ContractTTLSeconds != 3600 {
		t.Fatalf("defaults: %+v", r)
	}
	z, err := Config{}.normalized()
	if err != nil || z.Policies.RCNS != r {
		t.Fatalf("zero Config differs from empty TOML: %+v %v", z.Policies.RCNS, err)
	}
}

func TestParseTOMLRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown knob":  "[policies.rcns]\nenabeld = true\n",
		"bad mode":      "[policies.rcns]\nmode = \"eager\"\n",
		"bad tier":      "[policies.rcns]\nmin_trust_tier = 4\n",
		"bad sweep":     "[policies.rcns]\non_policy_change = \"purge\"\n",
		"short id":      "[[agents]]\nagent_id = \"abc\"\n",
		"bad scope":     "[[agents]]\nagent_id = \"" + agentA + "\"\nscopes = [\"Rooms:Write\"]\n",
		"unknown prim":  "[[endpoints]]\nmethod = \"FETCH\"\npath = \"/x\"\nprimitive = \"nope\"\n",
		"floor method":  "[[primitives]]\nname = \"p\"\nkind = \"echo\"\n[[endpoints]]\nmethod = \"DISCOVER\"\npath = \"/x\"\nprimitive = \"p\"\n",
		"custom method": "[[primitives]]\nname = \"p\"\nkind = \"echo\"\n[[endpoints]]\nmethod = \"FLY\"\npath = \"/x\"\nprimitive = \"p\"\n",
		"no version":    "[[primitives]]\nname = \"p\"\nkind = \"echo\"\n[[policies.recipes]]\nname = \"r\"\nmethod = \"BOOK\"\npath = \"/x\"\nsteps = [\"p\"]\n",
	} {
		if _, err := ParseTOML([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := "[policies]\nmethods = [\"FLY\"]\n[[primitives]]\nname = \"p\"\nkind = \"echo\"\n[[endpoints]]\nmethod = \"FLY\"\npath = \"/x\"\nprimitive = \"p\"\n"
	if _, err := ParseTOML([]byte(ok)); err != nil {
		t.Fatalf("custom method from policies.methods: %v", err)
	}
}

func TestOpenNeedsDataDir(t *testing.T) {
	if _, err := Open(Config{}, hostenv.Env{}); err == nil {
		t.Fatal("opened without a data directory")
	}
}

func TestHostOverTLS13AndFrameErrors(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "h"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, _ := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	cfg, _ := ParseTOML([]byte(baseTOML))
	h, err := Open(cfg, hostenv.Env{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	raw, _ := net.Listen("tcp", "127.0.0.1:0")
	go h.ServeAGTP(tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}))
	cl, err := wire.NewClient(raw.Addr().String(), wire.ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req, _ := wire.NewRequest("BOOK", "/room/1", nil)
	req.Header.Set("Agent-ID", agentA)
	req.Header.Set("Allow-RCNS", "true")
	resp, err := cl.Do(context.Background(), req)
	if err != nil || resp.Status != 461 {
		t.Fatalf("%v %v", resp, err)
	}
	// A malformed frame gets an answer carrying Server-ID, then a close.
	conn, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(conn, "AGTP/1.0 BOOK /a#frag\r\n\r\n")
	r, err := wire.ReadResponse(bufio.NewReader(conn), wire.Limits{})
	if err != nil || r.Status != 400 || r.Header.Get("Server-ID") != "refhost-test" || !strings.Contains(string(r.Body), "fragment") {
		t.Fatalf("%+v %v", r, err)
	}
}

// A plaintext listener on a non-loopback address serves nothing.
func TestPlaintextRefusedOffLoopback(t *testing.T) {
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("no non-loopback IPv4 address on this machine")
	}
	cfg, _ := ParseTOML([]byte(baseTOML))
	h, err := Open(cfg, hostenv.Env{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skip(err)
	}
	go h.ServeAGTP(l)
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(conn, "AGTP/1.0 DISCOVER /\r\n\r\n")
	if b, err := io.ReadAll(conn); len(b) != 0 {
		t.Fatalf("plaintext served off loopback: %q %v", b, err)
	}
}
