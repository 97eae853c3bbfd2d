package agtp

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

func wrapped(method, path string, extra map[string]any) map[string]any {
	ep := map[string]any{"method": method, "path": path, "description": "test",
		"semantic":        map[string]any{"intent": "book a room", "actor": "agent", "outcome": "a booking", "impact_tier": "reversible"},
		"input_schema":    map[string]any{"type": "object"},
		"output_schema":   map[string]any{"type": "object"},
		"authority_scope": []any{"rooms:write"}}
	for k, v := range extra {
		if v == nil {
			delete(ep, k)
		} else {
			ep[k] = v
		}
	}
	return map[string]any{"endpoint": ep}
}

func TestProposeEvaluationOrder(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Policies.Methods = []string{"PENCIL"}
		c.Policies.Propose.Refused = []string{"SCHEDULE /slot", "RESERVE /desk/{id}"}
	})
	cases := []struct {
		name   string
		agent  string
		params map[string]any
		claim  string
		status int
		reason string
	}{
		{"wrapped", agentA, wrapped("BOOK", "/room/r1", nil), "", 263, ""},
		{"legacy", agentA, map[string]any{"name": "book-room", "method": "BOOK", "path": "/room/r2",
			"semantic": map[string]any{"intent": "i", "actor": "a", "outcome": "o"}}, "", 263, ""},
		{"ambiguous", agentA, func() map[string]any { p := wrapped("BOOK", "/room/r3", nil); p["name"] = "x"; return p }(), "", 400, "ambiguous-body"},
		{"method", agentA, wrapped("ZZBOGUS", "/Room", nil), "", 459, "method-violation"},
		{"custom method passes step 1", agentA, wrapped("PENCIL", "/room/r4", nil), "", 463, "composition-impossible"},
		{"path", agentA, wrapped("BOOK", "/Room", map[string]any{"semantic": nil}), "", 460, "endpoint-violation"},
		{"verb in path", agentA, wrapped("BOOK", "/book/r5", nil), "", 460, "endpoint-violation"},
		{"semantic", agentA, wrapped("BOOK", "/room/r6", map[string]any{"semantic": map[string]any{"actor": "a", "outcome": "o"}, "input_schema": map[string]any{"type": "nope"}}), "", 400, "invalid-semantic-block"},
		{"schema", agentA, wrapped("BOOK", "/room/r7", map[string]any{"input_schema": map[string]any{"type": "nope"}, "authority_scope": []any{"vault:write"}}), "", 400, "invalid-schema"},
		{"authority 262", agentA, wrapped("BOOK", "/room/r8", nil), "rcns:negotiate, rooms:read", 262, "scope-required"},
		{"authority 455", agentA, wrapped("DELETE", "/desk/r9", map[string]any{"authority_scope": []any{"vault:write"}}), "", 455, "scope-exceeded"},
		{"composed authority", agentA, wrapped("ORDER", "/vault", map[string]any{"authority_scope": []any{}}), "", 455, "scope-exceeded"},
		{"composition before policy", agentA, wrapped("RESERVE", "/desk/r10", nil), "", 463, "composition-impossible"},
		{"policy", agentA, wrapped("SCHEDULE", "/slot", nil), "", 463, "policy-refused"},
	}
	for _, c := range cases {
		var hdr []string
		if c.claim != "" {
			hdr = []string{"Authority-Scope", c.claim}
		}
		r := f.do("PROPOSE", "/", c.agent, c.params, hdr...)
		if r.Status != c.status || (c.reason != "" && r.reason() != c.reason) {
			t.Errorf("%s: got %d %q, want %d %q: %s", c.name, r.Status, r.reason(), c.status, c.reason, r.Body)
		}
	}
}

func TestProposeSessionScopeAndPersistence(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policies.Propose.AllowPersistent = true })
	r := f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/s1", nil))
	if r.Status != 263 || r.str("method") != "BOOK" || r.str("path") != "/room/s1" || r.str("recipe_lineage", "recipe_version") != "1" {
		t.Fatalf("263: %s", r.Body)
	}
	sid := r.str("synthesis_id")
	p := wrapped("BOOK", "/room/s2", nil)
	p["persistent"] = true
	r = f.do("PROPOSE", "/", agentA, p)
	if r.Status != 263 || r.body["persistent"] != true {
		t.Fatalf("persistent 263: %s", r.Body)
	}
	if r = f.do("BOOK", "/room/s1", agentA, map[string]any{"id": "s1"}); r.Status != 201 || r.Header.Get("Contract-Synthesized") != sid {
		t.Fatalf("session-scoped endpoint: %d %s", r.Status, r.Body)
	}
	f.cl.Close() // the session ends
	deadline := time.Now().Add(3 * time.Second)
	for {
		r = f.do("BOOK", "/room/s1", agentA, map[string]any{"id": "s1"})
		if r.Status == 404 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.Status != 404 {
		t.Fatalf("after the session ended: %d %s", r.Status, r.Body)
	}
	if r = f.do("BOOK", "/room/s2", agentB, map[string]any{"id": "s2"}); r.Status != 201 || r.Header.Get("Contract-Synthesized") != "" {
		t.Fatalf("persisted endpoint for another agent: %d %s", r.Status, r.Body)
	}
	r = f.do("DISCOVER", "/", "", nil)
	found := false
	for _, e := range r.body["result"].(map[string]any)["endpoints"].([]any) {
		m := e.(map[string]any)
		if m["method"] == "BOOK" && m["path"] == "/room/s2" {
			found = true
		}
	}
	if !found {
		t.Fatalf("manifest: %s", r.Body)
	}
}

func TestProposeReviewQueue(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policies.Propose.Review = []string{"BOOK /room/{id}"} })
	r := f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/q1", nil))
	id := r.str("proposal_id")
	if r.Status != 261 || id == "" {
		t.Fatalf("261: %s", r.Body)
	}
	if r = f.do("QUERY", "/proposals/"+id, agentA, map[string]any{"intent": "status"}); r.Status != 261 {
		t.Fatalf("poll while pending: %d %s", r.Status, r.Body)
	}
	if r = f.do("QUERY", "/proposals/"+id, agentB, map[string]any{"intent": "status"}); r.Status != 404 {
		t.Fatalf("another agent's poll: %d %s", r.Status, r.Body)
	}
	if r = f.do("CONFIRM", "/", agentB, map[string]any{"target_id": id, "status": "approved"}); r.Status != 455 {
		t.Fatalf("approval without inspect:all: %d %s", r.Status, r.Body)
	}
	if r = f.do("CONFIRM", "/", agentOp, map[string]any{"target_id": id, "status": "approved"}); r.Status != 200 {
		t.Fatalf("approval: %d %s", r.Status, r.Body)
	}
	r = f.do("QUERY", "/proposals/"+id, agentA, map[string]any{"intent": "status"})
	if r.Status != 263 || r.str("synthesis_id") == "" || r.str("path") != "/room/q1" {
		t.Fatalf("terminal: %d %s", r.Status, r.Body)
	}
	r = f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/q2", nil))
	id = r.str("proposal_id")
	f.do("CONFIRM", "/", agentOp, map[string]any{"target_id": id, "status": "rejected"})
	if r = f.do("QUERY", "/proposals/"+id, agentA, map[string]any{"intent": "status"}); r.Status != 463 || r.reason() != "policy-refused" {
		t.Fatalf("rejected: %d %s", r.Status, r.Body)
	}
}

func TestProposeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	allow := func(c *Config) { c.Policies.Propose.AllowPersistent = true }
	f := openFixture(t, dir, allow)
	scoped := f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/x1", nil)).str("synthesis_id")
	p := wrapped("BOOK", "/room/x2", nil)
	p["persistent"] = true
	if r := f.do("PROPOSE", "/", agentA, p); r.Status != 263 {
		t.Fatalf("persistent: %s", r.Body)
	}
	f.close()
	g := openFixture(t, dir, allow)
	if r := g.do("BOOK", "/room/x1", agentA, map[string]any{"id": "x1"}, "Contract-Synthesized", scoped); r.Status != 464 || r.reason() != "contract-revoked" {
		t.Fatalf("a session-scoped synthesis after a restart: %d %s", r.Status, r.Body)
	}
	if r := g.do("BOOK", "/room/x2", agentB, map[string]any{"id": "x2"}); r.Status != 201 {
		t.Fatalf("a persisted endpoint after a restart: %d %s", r.Status, r.Body)
	}
}

func TestProposeReviewTimeout(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Policies.Propose.Review = []string{"BOOK /room/{id}"}
		c.Policies.Propose.ReviewTimeoutSeconds = 60
	})
	id := f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/t1", nil)).str("proposal_id")
	f.h.clockMu.Lock()
	f.h.offset += 61 * time.Second
	f.h.clockMu.Unlock()
	if r := f.do("QUERY", "/proposals/"+id, agentA, map[string]any{"intent": "status"}); r.Status != 463 || r.reason() != "policy-refused" {
		t.Fatalf("after the review timeout: %d %s", r.Status, r.Body)
	}
	if r := f.do("CONFIRM", "/", agentOp, map[string]any{"target_id": id, "status": "approved"}); r.Status != 409 {
		t.Fatalf("approving an expired proposal: %d %s", r.Status, r.Body)
	}
}

// TestAStoreFromBeforePROPOSEIsMigrated opens a store whose contracts table
// predates session-scoped and persistent synthesis.
func TestAStoreFromBeforePROPOSEIsMigrated(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "agtp.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE contracts (synthesis_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, method TEXT NOT NULL,
		path TEXT NOT NULL, state TEXT NOT NULL, origin TEXT NOT NULL, recipe_name TEXT, recipe_version TEXT, endpoint TEXT NOT NULL,
		steps TEXT NOT NULL, scopes TEXT NOT NULL, contract_hash TEXT NOT NULL, success_status INTEGER NOT NULL,
		created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, released_at INTEGER, release_reason TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f := openFixture(t, dir, nil)
	if r := f.do("PROPOSE", "/", agentA, wrapped("BOOK", "/room/m1", nil)); r.Status != 263 {
		t.Fatalf("PROPOSE on a migrated store: %d %s", r.Status, r.Body)
	}
	// The migrated store records its schema version, so that the next
	// open skips the DDL.
	var v int
	if err := f.h.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("the migrated store's user_version is %d (%v), want %d", v, err, schemaVersion)
	}
}

func TestProposePolicyIsValidated(t *testing.T) {
	for _, bad := range []string{
		"[policies.propose]\nrefused = [\"book /room\"]\n",
		"[policies.propose]\nreview = [\"BOOK room\"]\n",
		"[policies.propose]\nreview = [\"ZZBOGUS /room\"]\n",
		"[policies.propose]\nallow_persistence = true\n",
	} {
		if _, err := ParseTOML([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	c, err := ParseTOML([]byte("[policies.propose]\nallow_persistent = true\nrefused = [\"BOOK /room/{id}\"]\nreview = [\"SCHEDULE /slot\"]\nreview_timeout_seconds = 60\n"))
	if err != nil || !c.Policies.Propose.AllowPersistent || c.Policies.Propose.ReviewTimeoutSeconds != 60 {
		t.Fatalf("%+v %v", c.Policies.Propose, err)
	}
}
