package runner

import (
	"testing"
	"time"

	"github.com/parley-conformance/parley/scenarios"
)

// TestLongestWaitsRunFirst: the file holding the scenario that waits
// longest is handed to godog first, files that wait alike keep the corpus
// order, the content (and so the digest) is unchanged, and every scenario
// is still there, renumbered in the new order.
func TestLongestWaitsRunFirst(t *testing.T) {
	_, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	cat := Catalog()
	all := func(scenarios.Scenario) bool { return true }
	got, err := longestWaitsFirst(corpus, cat, all, all)
	if err != nil {
		t.Fatal(err)
	}
	longest := map[string]time.Duration{}
	turns := map[string]time.Duration{}
	for _, s := range corpus.Scenarios {
		var d time.Duration
		turn := s.Exclusive
		for _, text := range s.Steps {
			d += cat.Wait(text)
			turn = turn || cat.TakesTurns(text)
		}
		longest[s.URI] = max(longest[s.URI], d)
		if turn {
			turns[s.URI] += turnCost
		}
	}
	for uri, d := range turns {
		longest[uri] = max(longest[uri], d)
	}
	if longest[got.Files[0].Name] == 0 {
		t.Fatalf("the first file, %s, waits nothing: no step declares a wait", got.Files[0].Name)
	}
	index := map[string]int{}
	for i, f := range corpus.Files {
		index[f.Name] = i
	}
	for i := 1; i < len(got.Files); i++ {
		a, b := got.Files[i-1].Name, got.Files[i].Name
		if longest[a] < longest[b] || (longest[a] == longest[b] && index[a] > index[b]) {
			t.Errorf("%s (waits %v) comes before %s (waits %v)", a, longest[a], b, longest[b])
		}
	}
	if got.Digest() != corpus.Digest() {
		t.Error("reordering changed the corpus digest")
	}
	type key struct {
		uri  string
		line int64
		name string
	}
	before := map[key]bool{}
	for _, s := range corpus.Scenarios {
		before[key{s.URI, s.Line, s.Name}] = true
	}
	ids := map[string]bool{}
	for _, s := range got.Scenarios {
		if !before[key{s.URI, s.Line, s.Name}] {
			t.Errorf("a scenario appeared: %s:%d %s", s.URI, s.Line, s.Name)
		}
		if ids[s.PickleID] {
			t.Errorf("pickle id %s is given twice", s.PickleID)
		}
		ids[s.PickleID] = true
	}
	if len(got.Scenarios) != len(corpus.Scenarios) {
		t.Errorf("%d scenarios before, %d after", len(corpus.Scenarios), len(got.Scenarios))
	}
}
