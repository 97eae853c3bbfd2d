package runner_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestRefhostPassesEveryRequirement runs the whole corpus against the bundled
// reference host: it must earn executed-pass on every scored requirement.
func TestRefhostPassesEveryRequirement(t *testing.T) {
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := scenarios.LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	tgt := target.NewRefhost()
	defer tgt.Close()
	var progress strings.Builder
	seed, _ := strconv.ParseInt(os.Getenv("PARLEY_SEED"), 10, 64)
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Progress: &progress, Tags: os.Getenv("PARLEY_TAGS"), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (rerun in this order with PARLEY_SEED=%d go test ./runner; narrow with PARLEY_TAGS)", res.Seed, res.Seed)
	for _, r := range res.Rows {
		e, _ := reg.Lookup(r.ID)
		if r.Result != verdict.ExecutedPass && e.Scored() {
			t.Errorf("%s: %s: %s", r.ID, r.Result, r.Detail)
		}
	}
	if t.Failed() {
		t.Log(progress.String())
	}
}
