package sabotage_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestContentionIsConstructed: a host whose claim has no atomic guard (it
// checks that the permit is unclaimed, then claims it unconditionally) must
// fail the concurrent-dispatch scenario in every run, not in most runs. The
// scenario arms the barrier seam so that its eight contenders meet just
// before the claim; 20 runs, 20 failures. Without the barrier (the same host
// ignoring the seam) the log says how often chance alone would have caught
// it.
func TestContentionIsConstructed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs one scenario 40 times")
	}
	reg, corpus := load(t)
	const file = "agl/6_exact_action_approval.feature"
	line := lineOf(t, file, "Of many concurrent dispatches of one permit exactly one proceeds")
	var rule sabotage.Rule
	for _, r := range sabotage.Rules() {
		if r.Key() == "agl.dispatch.permit.single-claim#check-then-act" {
			rule = r
		}
	}
	if rule.ID == "" {
		t.Fatal("no rule agl.dispatch.permit.single-claim#check-then-act")
	}
	// The same broken host, deaf to the barrier: its seam answers as if
	// armed, and the contenders meet only by chance.
	deaf := rule
	deaf.Intercept = func(x *sabotage.Exchange) *sabotage.Response {
		if x.Method == http.MethodPost && x.Path == "/conformance/seams/agl/barrier" {
			return &sabotage.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"points":["claim"],"parties":8}`)}
		}
		return nil
	}
	const runs = 20
	failures := func(r sabotage.Rule) int {
		var mu sync.Mutex
		failed := 0
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for i := 0; i < runs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
				defer tgt.Close()
				res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + r.ID})
				if err != nil {
					t.Error(err)
					return
				}
				for _, s := range res.Scenarios {
					if s.URI == file && s.Line == line && s.Result == verdict.ExecutedFail {
						mu.Lock()
						failed++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		return failed
	}
	if n := failures(rule); n != runs {
		t.Errorf("the host without a claim guard failed %s:%d in %d of %d runs, want all %d", file, line, n, runs, runs)
	} else {
		t.Logf("with the barrier: the host without a claim guard failed %d of %d runs", n, runs)
	}
	t.Logf("without the barrier (the same host, deaf to the seam): %d of %d runs", failures(deaf), runs)
}
