package aglchecker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/scenarios/agl-checker/notation"
)

// TestFixturesAreGenerated: every fixture's JSON is what its notation
// converts to, and every JSON has its notation.
func TestFixturesAreGenerated(t *testing.T) {
	srcs, err := filepath.Glob("*/*.agl")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no fixtures (%v)", err)
	}
	update := os.Getenv("PARLEY_UPDATE_FIXTURES") == "1"
	seen := map[string]bool{}
	for _, src := range srcs {
		name := strings.TrimSuffix(src, ".agl")
		seen[name] = true
		text, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		want, err := notation.Convert(string(text))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		want = append(want, '\n')
		if update {
			if err := os.WriteFile(name+".json", want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := Fixture(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s.json is not what %s converts to; regenerate with PARLEY_UPDATE_FIXTURES=1 go test ./scenarios/agl-checker", name, src)
		}
	}
	if update {
		return
	}
	for _, n := range Names() {
		if !seen[n] {
			t.Errorf("%s.json has no %s.agl", n, n)
		}
	}
}
