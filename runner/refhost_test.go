package runner_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/internal/lazyfs"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestRefhostPassesEveryRequirement runs the whole corpus against the bundled
// reference host: it must earn executed-pass on every scored requirement.
// The run is the oracle's first (firstRun), made once for both.
func TestRefhostPassesEveryRequirement(t *testing.T) {
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	first := firstRun()
	if first.err != nil {
		t.Fatal(first.err)
	}
	res := first.res
	t.Logf("seed %d (rerun in this order with PARLEY_SEED=%d go test ./runner; narrow with PARLEY_TAGS)", res.Seed, res.Seed)
	for _, r := range res.Rows {
		e, _ := reg.Lookup(r.ID)
		if r.Result == verdict.Blocked && r.Cause == verdict.CauseTarget && lazyfs.Available() != nil && strings.HasSuffix(r.ID, "power-cut") {
			t.Logf("%s: blocked, FUSE is not usable on this machine: %s", r.ID, r.Detail)
			continue
		}
		if r.Result != verdict.ExecutedPass && e.Scored() {
			t.Errorf("%s: %s: %s", r.ID, r.Result, r.Detail)
		}
	}
	if t.Failed() {
		t.Log(first.progress)
	}
}

// sharedRun is a whole run of the corpus on the reference host, scenarios
// sharing hosts, in the order PARLEY_SEED names (a fresh one otherwise).
type sharedRun struct {
	res      *runner.Result
	progress string
	err      error
}

var (
	firstOnce sync.Once
	first     sharedRun
)

// firstRun makes the run once per test process: it is both the run every
// requirement must pass in and the oracle's first run, which the others
// must agree with (a whole run is the most a test here costs).
func firstRun() *sharedRun {
	firstOnce.Do(func() {
		reg, corpus, err := scenarios.Load()
		if err != nil {
			first.err = err
			return
		}
		tgt := target.NewRefhost()
		defer tgt.Close()
		var progress strings.Builder
		seed, _ := strconv.ParseInt(os.Getenv("PARLEY_SEED"), 10, 64)
		first.res, first.err = runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Progress: &progress, Tags: os.Getenv("PARLEY_TAGS"), Seed: seed})
		first.progress = progress.String()
	})
	return &first
}

// TestStepsAndRegistryAgreeOnPreconditions: every precondition a Setup step
// names is declared in the registry, and every declared one is used.
func TestStepsAndRegistryAgreeOnPreconditions(t *testing.T) {
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, id := range runner.Catalog().Preconditions() {
		used[id] = true
		if _, ok := reg.LookupPrecondition(id); !ok {
			t.Errorf("a Setup step names precondition %s, which no scenarios/*.toml [[precondition]] declares", id)
		}
	}
	for _, p := range reg.Preconditions {
		if !used[p.ID] && !preconditionNamedInCode(t, p.ID) {
			t.Errorf("precondition %s is declared but no step establishes it", p.ID)
		}
	}
}

// preconditionNamedInCode finds a precondition a step names through
// steps.Precondition rather than a Setup step: its id appears in a step
// package's source.
func preconditionNamedInCode(t *testing.T, id string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir("../steps", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || found {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), `"`+id+`"`) {
			found = true
		}
		return nil
	})
	return found
}
