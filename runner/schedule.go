package runner

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
)

// longestWaitsFirst orders the corpus's files so that those holding the
// scenario that waits longest in real time (as its steps declare, see
// steps.Step.Waits) come first, and keeps the corpus order among equals.
// godog starts a file's scenarios before the next file's, so a scenario that
// waits seconds for a lifetime to run out, started last, would end the run
// seconds after everything else; started first, its waiting overlaps the
// rest. Only the selected scenarios count.
func longestWaitsFirst(corpus *scenarios.Corpus, cat *steps.Catalog, selected func(scenarios.Scenario) bool) (*scenarios.Corpus, error) {
	longest := map[string]time.Duration{}
	for _, s := range corpus.Scenarios {
		if !selected(s) {
			continue
		}
		var d time.Duration
		for _, text := range s.Steps {
			d += cat.Wait(text)
		}
		longest[s.URI] = max(longest[s.URI], d)
	}
	names := make([]string, len(corpus.Files))
	for i, f := range corpus.Files {
		names[i] = f.Name
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
