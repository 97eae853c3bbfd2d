// Package proofs_test holds the model proofs: each model id against the
// defects only an order of operations shows, which every hand-written
// scenario passes. The per-id proofs are in sabotage/proofs/perid. Both live
// apart from ./sabotage so that go test runs them in parallel processes,
// none near go test's ten-minute package limit.
package proofs_test

import (
	"testing"

	"github.com/parley-conformance/parley/sabotage/sabotagetest"
	"github.com/parley-conformance/parley/scenarios"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	return sabotagetest.Load(t)
}
