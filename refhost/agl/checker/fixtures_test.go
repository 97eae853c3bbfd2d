package checker

import (
	"os"
	"testing"

	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
)

// TestFixturesDump prints what the checker says of every fixture (with -v
// and PARLEY_CHECKER_DUMP=1), for a person writing fixtures.
func TestFixturesDump(t *testing.T) {
	if os.Getenv("PARLEY_CHECKER_DUMP") == "" {
		t.Skip("set PARLEY_CHECKER_DUMP=1")
	}
	for _, n := range aglchecker.Names() {
		b, _ := aglchecker.Fixture(n)
		wf, err := Decode(b)
		if err != nil {
			t.Logf("%s: INVALID %v", n, err)
			continue
		}
		r := Check(wf)
		if r.OK() {
			t.Logf("%s: OK effects=%v after=%v", n, r.EffectBound, r.ResourcesAfter)
			continue
		}
		for _, d := range r.Diagnostics {
			t.Logf("%s: %s %v", n, d, d.Related)
		}
	}
}
