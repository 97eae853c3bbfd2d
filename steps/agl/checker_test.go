package agl

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/features"
	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
)

// TestEveryFixtureIsAScenario: every fixture of scenarios/agl-checker is
// named by a row of a checker feature, and every name a checker feature
// uses is a fixture.
func TestEveryFixtureIsAScenario(t *testing.T) {
	var text strings.Builder
	files, err := fs.Glob(features.FS, "agl/*checker*.feature")
	if err != nil || len(files) == 0 {
		t.Fatalf("no checker features (%v)", err)
	}
	for _, f := range files {
		b, err := features.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(string(b))
	}
	all := text.String()
	known := map[string]bool{}
	for _, n := range aglchecker.Names() {
		known[n] = true
		if !regexp.MustCompile(`(\| |")` + regexp.QuoteMeta(n) + `( |")`).MatchString(all) {
			t.Errorf("fixture %s is named by no checker scenario", n)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)(?:^\s*\| |workflow ")([a-z]+/[a-z0-9-]+)[ "]`).FindAllStringSubmatch(all, -1) {
		if !known[m[1]] {
			t.Errorf("a checker scenario names %s, which is not a fixture", m[1])
		}
	}
}
