package targettest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/target"
)

// Reconfigurable is a target that can restart its hosts under a changed
// configuration, and be told a scenario is done with them.
type Reconfigurable interface {
	Restartable
	target.Reconfigurer
	target.Releaser
}

// RestartWithKeepsStateUnderChange asks tgt for a ContractRefine host with
// a state directory and has it answer a preflight decision. It restarts the
// host (as a crash when crash is set) under a changed configuration whose
// mode is one the host does not know, which leaves the surface disabled
// (503): the host really runs the change. A plain restart keeps it changed;
// a restart under the first configuration again reads the decision back
// from the state. Released, the changed host is retired: the next Acquire
// of the configuration is a host started under it, on the same state.
func RestartWithKeepsStateUnderChange(t *testing.T, tgt Reconfigurable, crash bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := target.ParseConfig([]byte(`{"contractrefine":{"mode":"advisory"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithStateDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.WithLane("reconfigure")
	changed, err := target.ParseConfig([]byte(`{"contractrefine":{"mode":"advsiory"}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := tgt.Acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := preflight(t, h)
	if h, err = tgt.RestartWith(ctx, cfg, changed, crash); err != nil {
		t.Fatalf("restart under a changed configuration (crash %v): %v", crash, err)
	}
	if !h.Config.Changed() || h.Config.Key() != cfg.Key() || h.Config.StateDir() != cfg.StateDir() || !strings.Contains(string(h.Config.JSON()), "advsiory") {
		t.Fatalf("the restarted host should run the changed configuration as cfg's host, on its state: %s", h.Config.JSON())
	}
	if got := status(t, h.HTTP+"/v1/preflight/"+id); got != http.StatusServiceUnavailable {
		t.Fatalf("under the changed configuration the surface should be disabled (503), got %d", got)
	}
	if h, err = tgt.Restart(ctx, h.Config, false); err != nil {
		t.Fatalf("a plain restart of the changed host: %v", err)
	}
	if got := status(t, h.HTTP+"/v1/preflight/"+id); got != http.StatusServiceUnavailable {
		t.Fatalf("a plain restart of a changed host should keep it changed (503), got %d", got)
	}
	if h, err = tgt.RestartWith(ctx, h.Config, cfg, false); err != nil {
		t.Fatalf("a restart under the first configuration again: %v", err)
	}
	if got := status(t, h.HTTP+"/v1/preflight/"+id); got != http.StatusOK {
		t.Fatalf("after a restart under the first configuration again the stored decision is %d", got)
	}
	changedURL := h.HTTP
	tgt.Release(cfg)
	n, err := tgt.Acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Release(cfg)
	if n.Config.Changed() || n.HTTP == changedURL {
		t.Fatalf("a released changed host was lent again (%s, changed %v)", n.HTTP, n.Config.Changed())
	}
	if got := status(t, n.HTTP+"/v1/preflight/"+id); got != http.StatusOK {
		t.Fatalf("the host started again under the first configuration does not read the decision from the state: %d", got)
	}
}

func preflight(t *testing.T, h *target.Host) string {
	t.Helper()
	body := `{"intent":{"kind":"mission.start","plan_hash":"blake3:ab"},"actor":{"session_id":"s"},"capability":"tool.echo","plan":[{"kind":"tool.echo","params":{"text":"x"},"provenance":{"text":{"source":"operator"}}}],"context":{"zone":"default","rollback_contract":"rb","expected_evidence":["audit_id"]}}`
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(h.HTTP+"/v1/preflight", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	var d struct {
		PreflightID string `json:"preflight_id"`
	}
	if err := json.Unmarshal(b, &d); resp.StatusCode != 200 || err != nil || d.PreflightID == "" {
		t.Fatalf("no decision: %d %s", resp.StatusCode, b)
	}
	return d.PreflightID
}

func status(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
