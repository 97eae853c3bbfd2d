package refhost_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/refhost"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// An AGTP section with tls and plaintext_listener is served on two
// listeners: TLS 1.3 at AGTPAddr and plaintext on loopback at
// AGTPPlaintextAddr, one server behind both (a contract made over one is
// the same contract over the other). Without plaintext_listener there is
// no second listener, and plaintext_listener without tls is refused.
func TestAGTPPlaintextListenerBesideTLS(t *testing.T) {
	m, err := fixtures.NewTLS()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := m.Pool()
	if err != nil {
		t.Fatal(err)
	}
	const agent = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	section := func(tlsOn, plaintext bool) []byte {
		sec := map[string]any{
			"rcns":         map[string]any{"enabled": true},
			"agents":       []any{map[string]any{"agent_id": agent, "trust_tier": 1, "scopes": []any{"rooms:*"}}},
			"capabilities": []any{map[string]any{"name": "list-rooms", "effect": "list", "records": "rooms"}},
			"endpoints":    []any{map[string]any{"method": "LIST", "path": "/rooms", "tier": "A", "capability": "list-rooms"}},
		}
		if tlsOn {
			sec["tls"] = map[string]any{"cert_pem": m.CertPEM, "key_pem": m.KeyPEM}
		}
		if plaintext {
			sec["plaintext_listener"] = true
		}
		b, _ := json.Marshal(map[string]any{"fixture": "agtp-test", "agtp": sec})
		return b
	}
	list := func(t *testing.T, addr string, tc *tls.Config) {
		t.Helper()
		c, err := wire.NewClient(addr, wire.ClientOptions{TLS: tc, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req, err := wire.NewRequest("LIST", "/rooms", []byte(`{"method":"LIST","task_id":"t1","parameters":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Agent-ID", agent)
		req.Header.Set("Content-Type", wire.MediaType)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Do(ctx, req)
		if err != nil {
			t.Fatalf("LIST /rooms at %s: %v", addr, err)
		}
		if resp.Status != 200 {
			t.Fatalf("LIST /rooms at %s: %d %s", addr, resp.Status, resp.Body)
		}
	}

	h, err := refhost.Start(refhost.Options{Config: section(true, true)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.AGTPTLS || h.AGTPAddr == "" || h.AGTPPlaintextAddr == "" || h.AGTPPlaintextAddr == h.AGTPAddr {
		t.Fatalf("listeners: agtp %q (tls %v), agtp_plaintext %q", h.AGTPAddr, h.AGTPTLS, h.AGTPPlaintextAddr)
	}
	list(t, h.AGTPAddr, &tls.Config{RootCAs: pool})
	list(t, h.AGTPPlaintextAddr, nil)
	// The plaintext listener does not speak TLS, nor the TLS one plaintext.
	c, err := wire.NewClient(h.AGTPPlaintextAddr, wire.ClientOptions{TLS: &tls.Config{RootCAs: pool}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := wire.NewRequest("LIST", "/rooms", []byte(`{}`))
	req.Header.Set("Agent-ID", agent)
	if _, err := c.Do(context.Background(), req); err == nil {
		t.Error("a TLS handshake with the plaintext listener succeeded")
	}
	c.Close()

	h2, err := refhost.Start(refhost.Options{Config: section(true, false)})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if h2.AGTPPlaintextAddr != "" {
		t.Errorf("a second listener without plaintext_listener: %s", h2.AGTPPlaintextAddr)
	}

	if h3, err := refhost.Start(refhost.Options{Config: section(false, true)}); err == nil {
		h3.Close()
		t.Error("plaintext_listener without tls was taken")
	} else if !strings.Contains(err.Error(), "plaintext_listener") {
		t.Errorf("the refusal does not name plaintext_listener: %v", err)
	}
	if h4, err := refhost.Start(refhost.Options{Config: section(true, true), AGTPPlaintextListen: "0.0.0.0:0"}); err == nil {
		h4.Close()
		t.Error("a plaintext listener off loopback was opened")
	}
}
