// Package agtp holds the sabotage proofs of the agtp family, a test package of
// its own so that go test runs the families in parallel (sabotagetest).
package agtp

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
)

// TestEveryScenarioFailsAgainstSomeSabotagedHost: every agtp rule fails the
// requirement it breaks, and every agtp scenario fails under some rule.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	sabotagetest.Matrix(t, "agtp", false)
}

// TestProxyIsTransparent: the agtp requirements all pass through a proxy
// that changes nothing.
func TestProxyIsTransparent(t *testing.T) {
	sabotagetest.Transparent(t, "agtp")
}
