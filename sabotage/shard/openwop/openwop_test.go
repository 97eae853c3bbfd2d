// Package openwop holds the sabotage proofs of the openwop family, a test package of
// its own so that go test runs the families in parallel (sabotagetest).
package openwop

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
)

// TestEveryScenarioFailsAgainstSomeSabotagedHost: every openwop rule fails the
// requirement it breaks, and every openwop scenario fails under some rule.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	sabotagetest.Matrix(t, "openwop", false)
}

// TestProxyIsTransparent: the openwop requirements all pass through a proxy
// that changes nothing.
func TestProxyIsTransparent(t *testing.T) {
	sabotagetest.Transparent(t, "openwop")
}
