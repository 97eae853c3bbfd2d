package target

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// Scenarios of one fixture share its host; an instance of its own is
// started apart, counted, and stopped as soon as it is released, never lent
// to the next scenario.
func TestAnInstanceOfItsOwnIsNeverLentAgain(t *testing.T) {
	var c countingStarts
	p := c.pool()
	ctx := context.Background()
	shared := nthConfig(t, 1)
	for range 3 {
		if _, err := p.acquire(ctx, shared); err != nil {
			t.Fatal(err)
		}
	}
	own := shared.WithInstance("exclusive:7")
	h, err := p.acquire(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	if h.Config.Instance() != "" && h.Config.Key() == shared.Key() {
		t.Fatal("an instance of its own shares the fixture's key")
	}
	if hosts, _ := p.counts(); hosts != 2 {
		t.Fatalf("three scenarios on one fixture and one exclusive scenario started %d hosts, want 2", hosts)
	}
	p.release(own)
	p.stopping.Wait()
	c.mu.Lock()
	stopped := c.stopped[shared.Digest()]
	c.mu.Unlock()
	if stopped != 1 {
		t.Fatalf("the released exclusive instance was stopped %d times, want once (at once)", stopped)
	}
	// Asking again for the same instance name starts a fresh host.
	if _, err := p.acquire(ctx, own); err != nil {
		t.Fatal(err)
	}
	if hosts, _ := p.counts(); hosts != 3 {
		t.Fatalf("hosts started: %d, want 3", hosts)
	}
	if got := len(p.configurations()); got != 1 {
		t.Fatalf("the evidence names %d configurations for one document, want 1", got)
	}
}

func deployedFixtures(t *testing.T) (map[string]string, map[string]Config) {
	t.Helper()
	cfg := func(name, family string) Config {
		c, err := NewConfig(map[string]any{"fixture": name, family: map[string]any{"k": name}}, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return map[string]string{"agtp-a": "agtp", "openwop-b": "openwop"},
		map[string]Config{"agtp-a": cfg("agtp-a", "agtp"), "openwop-b": cfg("openwop-b", "openwop")}
}

func TestHostsJSONErrorsNameTheLineToFix(t *testing.T) {
	known, _ := deployedFixtures(t)
	cases := []struct{ name, doc, want string }{
		{"not JSON", "{\n  \"agtp-a\": {\"parley\": \"ready\",\n  }\n}", "line 3"},
		{"unknown fixture", "{\n  \"agtp-a\": {\"parley\": \"ready\", \"fixture\": \"agtp-a\", \"agtp\": \"127.0.0.1:1\"},\n  \"agtp-zz\": {\"parley\": \"ready\"}\n}", `line 3: "agtp-zz" is no fixture`},
		{"AGTP fixture without agtp", "{\n\n  \"agtp-a\": {\"parley\": \"ready\", \"fixture\": \"agtp-a\", \"http\": \"http://127.0.0.1:1\"}\n}", "line 3: fixture agtp-a is an AGTP fixture"},
		{"HTTP fixture without http", `{"openwop-b": {"parley": "ready", "fixture": "openwop-b", "agtp": "127.0.0.1:1"}}`, `no "http" base URL`},
		{"a host running another fixture", `{"openwop-b": {"parley": "ready", "http": "http://127.0.0.1:1", "fixture": "agtp-a"}}`, "says it runs fixture agtp-a"},
		{"a host that does not say", `{"openwop-b": {"parley": "ready", "http": "http://127.0.0.1:1"}}`, `add "fixture": "openwop-b"`},
		{"a declined line", `{"openwop-b": {"parley": "declined", "reason": "x"}}`, "want a ready line"},
		{"an unknown member", `{"openwop-b": {"parley": "ready", "fixture": "openwop-b", "http": "http://127.0.0.1:1", "htp": 1}}`, "unknown field"},
	}
	for _, c := range cases {
		_, err := ParseHosts([]byte(c.doc), known)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestADeployedHostIsLentByItsFixtureAndNeverRestarted(t *testing.T) {
	known, cfgs := deployedFixtures(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	hosts, err := ParseHosts([]byte(`{"agtp-a": {"parley": "ready", "fixture": "agtp-a", "agtp": "`+ln.Addr().String()+`", "unsupported": ["plaintext-listener"]},
		"openwop-b": {"parley": "ready", "fixture": "openwop-b", "http": "http://`+deadAddr+`"}}`), known)
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployed{Hosts: hosts, Fixtures: cfgs}
	ctx := context.Background()
	h, err := d.Acquire(ctx, cfgs["agtp-a"].WithInstance("exclusive:3"))
	if err != nil {
		t.Fatal(err)
	}
	if h.AGTP != ln.Addr().String() || h.Serves("plaintext-listener") {
		t.Fatalf("host: %+v", h)
	}
	blocked := func(what string, cfg Config, want string) {
		t.Helper()
		_, err := d.Acquire(ctx, cfg)
		if !errors.Is(err, ErrUnsatisfiable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrUnsatisfiable saying %q", what, err, want)
		}
	}
	kept, _ := cfgs["agtp-a"].WithStateDir("/tmp/x")
	blocked("a restart", kept, "did not start")
	composed, _ := NewConfig(map[string]any{"agtp": map[string]any{}}, false)
	blocked("a composed configuration", composed, "composes a host configuration")
	blocked("a host that does not answer", cfgs["openwop-b"], "does not answer at "+deadAddr)
	delete(d.Hosts, "openwop-b")
	d.checked = nil
	blocked("a fixture without a host", cfgs["openwop-b"], "no host runs fixture openwop-b")
	if n := len(d.Configurations()); n != 1 {
		t.Fatalf("configurations: %d, want the one fixture a scenario ran on", n)
	}
}
