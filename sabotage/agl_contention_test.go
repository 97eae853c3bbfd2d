package sabotage_test

import (
	"context"
	"net/http"
	"strings"
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

// withoutSeams is the host of r without its test seams: every seam answers
// 404, as a host started without them does.
func withoutSeams(r sabotage.Rule) sabotage.Rule {
	inner := r.Intercept
	r.Intercept = func(x *sabotage.Exchange) *sabotage.Response {
		if strings.HasPrefix(x.Path, "/conformance/seams/") {
			return &sabotage.Response{Status: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":{"code":"not_found","category":"request","message":"no such seam"}}`)}
		}
		if inner != nil {
			return inner(x)
		}
		return nil
	}
	return r
}

// contentionScenarios are the scenarios that race contenders at one
// transaction: held at the barrier seam where the host has one, raced for
// real over many rounds where it has none.
var contentionScenarios = []struct{ id, file, name string }{
	{"agl.dispatch.permit.single-claim", "agl/6_exact_action_approval.feature", "Of many concurrent dispatches of one permit exactly one proceeds"},
	{"agl.dispatch.permit.single-claim-cross-process", "agl/13_delivery_and_acceptance.feature", "Contended dispatches of one permit at two hosts yield one claim and one effect"},
	{"agl.parallel.revision-cas", "agl/9_parallel_execution.feature", "Of concurrent proposals of one revision exactly one moves the draft"},
	{"agl.parallel.revision-cas", "agl/9_parallel_execution.feature", "A dispatch and an edit racing for one revision never both take effect"},
}

// TestContentionWithoutSeams: a correct host without test seams certifies
// single-claim (in one process and across two) and the revision
// compare-and-swap by real contention, and the rows say how many rounds ran
// and what they showed; the same host with a claim (or a compare-and-swap)
// that has no atomic guard, also without seams, fails them.
func TestContentionWithoutSeams(t *testing.T) {
	if testing.Short() {
		t.Skip("races contenders over many rounds")
	}
	reg, corpus := load(t)
	tags := "@req:agl.dispatch.permit.single-claim,@req:agl.dispatch.permit.single-claim-cross-process,@req:agl.parallel.revision-cas"
	run := func(r sabotage.Rule, tags string) *runner.Result {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(withoutSeams(sabotage.Rule{Broken: "nothing: the reference host without its seams"}), tags)
	for _, r := range res.Rows {
		if r.Result != verdict.ExecutedPass {
			t.Errorf("the correct host without seams: %s is %s: %s", r.ID, r.Result, r.Detail)
		}
	}
	for _, c := range contentionScenarios {
		line := lineOf(t, c.file, c.name)
		found := false
		for _, s := range res.Scenarios {
			if s.URI == c.file && s.Line == line {
				found = true
				if !strings.Contains(s.Detail, "no barrier seam") || !strings.Contains(s.Detail, "24 rounds") {
					t.Errorf("%s:%d passed without saying how it was raced: %q", c.file, line, s.Detail)
				}
				t.Logf("%s:%d %s", c.file, line, s.Detail)
			}
		}
		if !found {
			t.Errorf("%s:%d did not run", c.file, line)
		}
	}
	for _, id := range []string{"agl.dispatch.permit.single-claim", "agl.dispatch.permit.single-claim-cross-process", "agl.parallel.revision-cas"} {
		var rule sabotage.Rule
		for _, r := range sabotage.Rules() {
			if r.Key() == id+"#check-then-act" {
				rule = r
			}
		}
		if rule.ID == "" {
			t.Fatalf("no rule %s#check-then-act", id)
		}
		// The emulated host lets a second claim through only where two
		// contenders really overlapped inside the claim (the reference host
		// refused one at step 7), and without a barrier whether 24 rounds
		// overlap at all is up to the scheduler: on a machine busy enough,
		// one run's rounds may never meet. A run that caught nothing is
		// made again, up to attemptsWithoutSeams in all.
		var caught bool
		var got string
		for attempt := 1; attempt <= attemptsWithoutSeams && !caught; attempt++ {
			res := run(withoutSeams(rule), "@req:"+id)
			for _, r := range res.Rows {
				if r.ID == id {
					got, caught = r.Result, r.Result == verdict.ExecutedFail
				}
			}
			for _, s := range res.Scenarios {
				if s.Result == verdict.ExecutedFail {
					t.Logf("%s without seams, run %d: %s:%d fails: %s", rule.Key(), attempt, s.URI, s.Line, s.Detail)
				}
			}
		}
		if !caught {
			t.Errorf("the host without an atomic guard and without seams: %s is %s in %d runs of real contention, want executed-fail", id, got, attemptsWithoutSeams)
		}
	}
}

// attemptsWithoutSeams bounds the runs of real contention a host without an
// atomic guard is given to be caught in (TestContentionWithoutSeams).
const attemptsWithoutSeams = 8
