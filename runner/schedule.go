package runner

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
)

// turnCost is what a scenario that takes its turn on a lane is reckoned to
// hold it: a restart, or a few exchanges on the host alone.
const turnCost = 500 * time.Millisecond

// longestWaitsFirst orders the corpus's files so that those holding the
// scenario that waits longest in real time (as its steps declare, see
// steps.Step.Waits) come first, and keeps the corpus order among equals.
// godog starts a file's scenarios before the next file's, so a scenario that
// waits seconds for a lifetime to run out, started last, would end the run
// seconds after everything else; started first, its waiting overlaps the
// rest. A file of scenarios that take turns on a host of their fixture
// (exclusive ones, and those that restart it) counts as long as its turns
// add up. Only the selected scenarios count; only the files holding a
// scenario matched (by the tags, whatever the profiles) are kept.
func longestWaitsFirst(corpus *scenarios.Corpus, cat *steps.Catalog, matched, selected func(scenarios.Scenario) bool) (*scenarios.Corpus, error) {
	longest := map[string]time.Duration{}
	turns := map[string]time.Duration{}
	inFile := map[string]bool{}
	for _, s := range corpus.Scenarios {
		if matched(s) {
			inFile[s.URI] = true
		}
		if !selected(s) {
			continue
		}
		var d time.Duration
		takesTurn := s.Exclusive
		for _, text := range s.Steps {
			d += cat.Wait(text)
			takesTurn = takesTurn || cat.TakesTurns(text)
		}
		longest[s.URI] = max(longest[s.URI], d)
		if takesTurn {
			turns[s.URI] += turnCost
		}
	}
	// Scenarios that take turns on a host of their fixture run one after
	// another: a file of them is a chain as long as the turns add up, and
	// started last it would end the run long after everything else.
	for uri, d := range turns {
		longest[uri] = max(longest[uri], d)
	}
	// Only files holding a scenario the tags match go on (those a profile
	// leaves out too: their requirements are reported as not run).
	var names []string
	for _, f := range corpus.Files {
		if inFile[f.Name] {
			names = append(names, f.Name)
		}
	}
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(longest[b], longest[a])
	})
	out, err := corpus.Reorder(names)
	if err != nil {
		return nil, fmt.Errorf("suite fault: %w", err)
	}
	return out, nil
}
