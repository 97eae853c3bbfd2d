// Package fairness_test holds the suite's fairness checks apart from the
// sabotage matrix, so that go test runs them in a process of their own,
// alongside the other sabotage packages: a faithful host taking another
// reading the text allows passes every spec profile
// (fair_readings_test.go), and a host broken in one rule fails that rule's
// id alone (blame_test.go).
package fairness_test

import (
	"testing"

	"github.com/parley-conformance/parley/scenarios"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	return reg, corpus
}
