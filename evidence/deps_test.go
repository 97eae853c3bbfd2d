package evidence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheVerifierIsSmall: a bundle is verified by code a third party can
// audit, so the evidence package links the verdict model, the registry and
// the schemas, and nothing that runs a suite or a host: no godog, no SQLite,
// no container library, no runner, steps, targets or reference host.
func TestTheVerifierIsSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list is not available here: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/cucumber/godog", "modernc.org/sqlite", "github.com/testcontainers/", "/parley/runner", "/parley/steps", "/parley/target", "/parley/refhost", "/parley/sabotage"} {
			if strings.Contains(dep, banned) {
				t.Errorf("the evidence package links %s", dep)
			}
		}
	}
}
