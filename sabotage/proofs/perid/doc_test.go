// Package perid_test holds the per-id sabotage proofs (proveEachId): for
// the ids of one piece of work, each passes on the reference host and fails
// under every rule for it. They live apart from the model proofs
// (sabotage/proofs) so that go test runs the two sets in parallel
// processes, neither near go test's ten-minute package limit.
package perid_test

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
	"github.com/parley-conformance/parley/scenarios"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	return sabotagetest.Load(t)
}
