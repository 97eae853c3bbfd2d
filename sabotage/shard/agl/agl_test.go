// Package agl holds the sabotage proofs of the agl family, a test package of
// its own so that go test runs the families in parallel (sabotagetest).
package agl

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
)

// TestEveryScenarioFailsAgainstSomeSabotagedHost: every agl rule fails the
// requirement it breaks, and every agl scenario fails under some rule.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	sabotagetest.Matrix(t, "agl", false)
}

// TestProxyIsTransparent: the agl requirements all pass through a proxy
// that changes nothing.
func TestProxyIsTransparent(t *testing.T) {
	sabotagetest.Transparent(t, "agl")
}
