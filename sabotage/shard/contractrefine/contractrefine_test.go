// Package contractrefine holds the sabotage proofs of the contractrefine family, a test package of
// its own so that go test runs the families in parallel (sabotagetest).
package contractrefine

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
)

// TestEveryScenarioFailsAgainstSomeSabotagedHost: every contractrefine rule fails the
// requirement it breaks, and every contractrefine scenario fails under some rule.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	sabotagetest.Matrix(t, "contractrefine", false)
}

// TestProxyIsTransparent: the contractrefine requirements all pass through a proxy
// that changes nothing.
func TestProxyIsTransparent(t *testing.T) {
	sabotagetest.Transparent(t, "contractrefine")
}
