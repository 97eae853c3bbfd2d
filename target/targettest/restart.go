// Package targettest holds checks that every target's tests share.
package targettest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/target"
)

// Restartable is a target that can restart its hosts.
type Restartable interface {
	target.Target
	target.Restarter
}

// RestartKeepsState asks tgt for a ContractRefine host with a state
// directory, has it answer a preflight decision, restarts it once for each
// value of crashes (true: a crash), and reads the decision back each time.
// It returns the host the last restart gave.
func RestartKeepsState(t *testing.T, tgt Restartable, crashes ...bool) *target.Host {
	t.Helper()
	ctx := context.Background()
	cfg, err := target.ParseConfig([]byte(`{"contractrefine":{"mode":"advisory"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithStateDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	h, err := tgt.Acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"intent":{"kind":"mission.start","plan_hash":"blake3:ab"},"actor":{"session_id":"s"},"capability":"tool.echo","plan":[{"kind":"tool.echo","params":{"text":"x"},"provenance":{"text":{"source":"operator"}}}],"context":{"zone":"default","rollback_contract":"rb","expected_evidence":["audit_id"]}}`
	resp, err := http.Post(h.HTTP+"/v1/preflight", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var d struct {
		PreflightID string `json:"preflight_id"`
	}
	if err := json.Unmarshal(b, &d); resp.StatusCode != 200 || err != nil || d.PreflightID == "" {
		t.Fatalf("no decision: %d %s", resp.StatusCode, b)
	}
	for _, crash := range crashes {
		old := h.HTTP
		if h, err = tgt.Restart(ctx, cfg, crash); err != nil {
			t.Fatalf("restart (crash %v): %v", crash, err)
		}
		if _, err := http.Get(old + "/v1/preflight/" + d.PreflightID); err == nil && old != h.HTTP {
			t.Fatalf("the stopped host still answers at %s", old)
		}
		resp, err := http.Get(h.HTTP + "/v1/preflight/" + d.PreflightID)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after a restart (crash %v) the stored decision is %d", crash, resp.StatusCode)
		}
	}
	return h
}
