package target_test

import (
	"context"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestTheContainerTargetCertifiesAsMuchAsExec runs the whole corpus against
// the reference host image and against the same binary through the exec
// target: the container blocks nothing the exec target witnesses, and every
// requirement ends with the same verdict.
func TestTheContainerTargetCertifiesAsMuchAsExec(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the corpus twice, once in containers")
	}
	image, binary := target.DockerImage(t)
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := scenarios.LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	run := func(tgt target.Target) map[string]verdict.Row {
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]verdict.Row{}
		for _, r := range res.Rows {
			out[r.ID] = r
		}
		return out
	}
	c, err := target.NewContainer(image)
	if err != nil {
		t.Fatal(err)
	}
	inContainers := run(c)
	e, err := target.NewExec(binary + " refhost")
	if err != nil {
		t.Fatal(err)
	}
	viaExec := run(e)
	passed := 0
	for id, x := range viaExec {
		if x.Result == verdict.ExecutedPass {
			passed++
		}
		if got := inContainers[id]; got.Result != x.Result {
			t.Errorf("%s: %s in containers (%s), %s through exec", id, got.Result, got.Detail, x.Result)
		}
	}
	t.Logf("%d of %d requirements executed-pass through both targets", passed, len(viaExec))
	if s := c.Subject(); !s.Declared() {
		t.Errorf("the container target names no image digest: %+v", s)
	}
}
