// Package proofs_test holds the sabotage proofs that run whole families
// against one rule at a time: the model ids against the defects only an
// order of operations shows, and the AGL runtime ids against every rule that
// breaks them. They live apart from ./sabotage so that go test runs them in
// parallel with it, and neither package nears go test's timeout.
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
