package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/target"
)

// TestTheExecTargetRestartsAHostOnItsState: the exec target stops `parley
// refhost` (SIGTERM, then SIGKILL for a crash) and runs it again with the
// same configuration; its state directory keeps what it answered.
func TestTheExecTargetRestartsAHostOnItsState(t *testing.T) {
	tgt, err := target.NewExec(self(t) + " refhost")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	cfg, _ := target.ParseConfig([]byte(`{"contractrefine":{"mode":"advisory"}}`))
	cfg, _ = cfg.WithStateDir(t.TempDir())
	h, err := tgt.Acquire(context.Background(), cfg)
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
	i := strings.Index(string(b), `"preflight_id":"`)
	if resp.StatusCode != 200 || i < 0 {
		t.Fatalf("no decision: %d %s", resp.StatusCode, b)
	}
	id := string(b[i+16 : i+52])
	for _, crash := range []bool{true, false} {
		old := h.HTTP
		if h, err = tgt.Restart(context.Background(), cfg, crash); err != nil {
			t.Fatalf("restart (crash %v): %v", crash, err)
		}
		if _, err := http.Get(old + "/v1/preflight/" + id); err == nil && old != h.HTTP {
			t.Fatalf("the stopped host still answers at %s", old)
		}
		resp, err := http.Get(h.HTTP + "/v1/preflight/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after a restart (crash %v) the stored decision is %d", crash, resp.StatusCode)
		}
	}
}
