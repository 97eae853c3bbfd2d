package target_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/target/targettest"
)

// TestMain builds the reference image while the tests that need no engine
// run (targettest.MainWithImage).
func TestMain(m *testing.M) { targettest.MainWithImage(m) }

func TestContainerTargetStartsAnImagePerConfiguration(t *testing.T) {
	t.Parallel()
	image, _ := targettest.ReferenceImage(t)
	c, err := target.NewContainer(image)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg, _ := target.ParseConfig([]byte(`{"contractrefine":{"mode":"advsiory"}}`))
	h, err := c.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(h.HTTP+"/v1/preflight", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a misspelt mode should leave the surface disabled (503), got %d", resp.StatusCode)
	}
	// The container logs the bad mode as it starts, before it serves; the
	// log reaches the target when the engine streams it, however late; the
	// bound is only there so a container that never logs it fails with its
	// log rather than at go test's timeout.
	logs, ok := h.Logs()
	for giveUp := time.Now().Add(2 * time.Minute); ok && !strings.Contains(strings.Join(logs, "\n"), "advsiory") && time.Now().Before(giveUp); {
		time.Sleep(50 * time.Millisecond)
		logs, _ = h.Logs()
	}
	if !strings.Contains(strings.Join(logs, "\n"), "advsiory") {
		t.Fatalf("the container's log never named the bad mode: %q", logs)
	}
	if s := c.Subject(); s.Digest["sha256"] == "" || s.Note != "" {
		t.Fatalf("the subject should be the image id: %+v", s)
	}
}
