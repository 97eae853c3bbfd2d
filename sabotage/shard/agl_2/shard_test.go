// Package shard holds one part of the sabotage proofs: the family and the
// part are this directory's name, sabotage/shard/<family>_<part>
// (sabotagetest.Here). Every shard package is these same two files (this
// one and main_test.go); a family is split into more parts by copying its
// directory under the next number.
package shard

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
)

// TestEveryScenarioFailsAgainstSomeSabotagedHost: every rule of this part
// fails the requirement it breaks, and every scenario of this part fails
// under some rule; the first part of a family also runs its pass-through
// control.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	sabotagetest.MatrixHere(t)
}
