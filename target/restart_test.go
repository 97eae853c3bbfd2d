package target

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTheRefhostTargetRestartsAHostOnItsState: a decision a host answered is
// read back after the host was closed cleanly and after it crashed, from the
// state directory its configuration names.
func TestTheRefhostTargetRestartsAHostOnItsState(t *testing.T) {
	tgt := NewRefhost()
	defer tgt.Close()
	cfg, err := ParseConfig([]byte(`{"contractrefine":{"mode":"advisory"}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = cfg.WithStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
	for _, crash := range []bool{false, true} {
		if h, err = tgt.Restart(context.Background(), cfg, crash); err != nil {
			t.Fatalf("restart (crash %v): %v", crash, err)
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
