// Package proofs_test holds the model proofs: each model id against the
// defects only an order of operations shows, which every hand-written
// scenario passes. They live apart from ./sabotage so that go test runs
// them in a process of their own, beside the matrix shards. (Every rule is
// held to failing its own id by the matrix, sabotage/shard/...; these
// proofs add only what the matrix cannot see.)
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
