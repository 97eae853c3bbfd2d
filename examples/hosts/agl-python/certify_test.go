// Package aglpython certifies the second AGL host, a Python implementation
// of agl-binding/1 written from docs/hosts/agl.md, docs/agl-binding.md and
// the AGL proposal, through the exec target: the way any independent host
// is certified.
package aglpython

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestPythonHostPassesTheAGLProfiles runs every AGL scenario against
// aglhost.py and requires executed-pass on every scored AGL requirement.
// PARLEY_TAGS narrows the scenarios.
func TestPythonHostPassesTheAGLProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Python host per scenario")
	}
	py, err := interpreter()
	if err != nil {
		t.Skip("python3 is not installed: the second AGL host (examples/hosts/agl-python) cannot be certified on this machine")
	}
	script, err := filepath.Abs("aglhost.py")
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := target.NewExec(command(py, script))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	tags := os.Getenv("PARLEY_TAGS")
	if tags == "" {
		tags = "@profile:agl-core,@profile:agl-operation-store,@profile:agl-parley-binding,@profile:agl-evidence,@profile:agl-delegation"
	}
	var progress strings.Builder
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: tags, Progress: &progress, Concurrency: 12})
	if err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, r := range res.Rows {
		e, _ := reg.Lookup(r.ID)
		switch {
		case r.Result == verdict.ExecutedPass:
			passed++
		case e.Scored():
			t.Errorf("%s: %s: %s", r.ID, r.Result, r.Detail)
		}
	}
	t.Logf("the Python host passed %d requirements (seed %d)", passed, res.Seed)
	slow := slices.Clone(res.Scenarios)
	slices.SortFunc(slow, func(a, b verdict.ScenarioResult) int { return int(b.DurationMs - a.DurationMs) })
	for _, s := range slow[:min(5, len(slow))] {
		t.Logf("slowest: %s:%d took %d ms", s.URI, s.Line, s.DurationMs)
	}
	if t.Failed() {
		t.Log(progress.String())
	}
}
