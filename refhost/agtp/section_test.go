package agtp

import (
	"strings"
	"testing"

	"github.com/parley-conformance/parley/refhost/hostenv"
	"github.com/parley-conformance/parley/schemas"
)

const sectionDoc = `{
  "server_id": "section-test",
  "methods": ["PENCIL"],
  "rcns": {"enabled": true, "mode": "optimistic", "min_trust_tier": 2, "contract_ttl_seconds": 60},
  "propose": {"allow_persistent": true, "refused": ["SCHEDULE /slot/{id}"], "review": ["BOOK /suite/{id}"]},
  "agents": [{"agent_id": "` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `", "name": "alice", "trust_tier": 1,
              "verification_path": "dns-anchored", "scopes": ["rooms:*", "rcns:negotiate"]}],
  "capabilities": [
    {"name": "store-room", "effect": "store", "records": "rooms", "authority_scope": ["rooms:write"]},
    {"name": "fetch-room", "effect": "fetch", "records": "rooms", "key": "room", "authority_scope": ["rooms:read"]},
    {"name": "count-booking", "effect": "count", "records": "bookings"},
    {"name": "echo-tariff", "effect": "echo"}
  ],
  "endpoints": [{"method": "FETCH", "path": "/room", "tier": "A", "capability": "fetch-room"},
                {"method": "QUOTE", "path": "/tariff", "tier": "B", "capability": "echo-tariff", "success_status": 200}],
  "recipes": [{"name": "room-booking", "version": "2026-03-01.1", "method": "BOOK", "path": "/room/{id}",
               "composed_of": ["store-room", "count-booking"], "success_status": 201},
              {"name": "hall-booking", "version": "1", "method": "BOOK", "path": "/hall/{id}", "composed_of": ["store-hall"]}],
  "passthroughs": [{"method": "SCHEDULE", "path": "/slot/{id}", "capability": "store-room"}]
}`

// The spec-level section translates into the reference host's own
// configuration member by member, and satisfies the schema it is written to.
func TestParseSectionTranslates(t *testing.T) {
	if err := schemas.ValidateJSON("agtp/host-config.json", []byte(sectionDoc)); err != nil {
		t.Fatalf("the test's section does not satisfy the schema: %v", err)
	}
	c, tc, err := ParseSection([]byte(sectionDoc))
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		t.Fatal("TLS configured without tls")
	}
	r := c.Policies.RCNS
	if !r.Enabled || r.Mode != ModeOptimistic || r.MinTrustTier != 2 || r.ContractTTLSeconds != 60 || r.RateLimitPerMinute != 0 {
		t.Errorf("rcns: %+v", r)
	}
	if len(c.Primitives) != 4 || c.Primitives[0].Kind != "record.put" || c.Primitives[0].Collection != "rooms" ||
		c.Primitives[1].Kind != "record.get" || c.Primitives[1].KeyParam != "room" || c.Primitives[2].Kind != "counter.incr" || c.Primitives[3].Kind != "echo" {
		t.Errorf("capabilities: %+v", c.Primitives)
	}
	if len(c.Endpoints) != 2 || c.Endpoints[0].Primitive != "fetch-room" || c.Endpoints[0].Tier != "A" {
		t.Errorf("endpoints: %+v", c.Endpoints)
	}
	rc := c.Policies.Recipes[0]
	if rc.Version != "2026-03-01.1" || strings.Join(rc.Steps, ",") != "store-room,count-booking" || rc.SuccessStatus != 201 {
		t.Errorf("recipe: %+v", rc)
	}
	if p := c.Policies.Passthroughs[0]; p.Primitive != "store-room" || p.Path != "/slot/{id}" {
		t.Errorf("passthrough: %+v", p)
	}
	if pr := c.Policies.Propose; !pr.AllowPersistent || pr.Refused[0] != "SCHEDULE /slot/{id}" || pr.Review[0] != "BOOK /suite/{id}" {
		t.Errorf("propose: %+v", pr)
	}
	if a := c.Agents[0]; a.TrustTier != 1 || a.Name != "alice" || len(a.Scopes) != 2 {
		t.Errorf("agent: %+v", a)
	}
	h, err := Open(c, hostenv.Env{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("a recipe composing a capability the envelope lacks must not stop the host: %v", err)
	}
	h.Close()
}

func TestParseSectionRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown member": `{"rcns": {"enabeld": true}}`,
		"toml":           `{"toml": "[policies.rcns]"}`,
		"unknown effect": `{"capabilities": [{"name": "p", "effect": "teleport"}]}`,
		"bad mode":       `{"rcns": {"mode": "eager"}}`,
		"endpoint cap":   `{"endpoints": [{"method": "FETCH", "path": "/x", "tier": "A", "capability": "nope"}]}`,
		"tls half":       `{"tls": {"cert_pem": "x", "key_pem": ""}}`,
	} {
		if _, _, err := ParseSection([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
