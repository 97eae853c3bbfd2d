package perid_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// proveEachId runs, for each id, one subtest (so that -run 'Test…/<id>'
// proves one id alone): the id passes on the reference host, is
// executed-fail against every rule that breaks it, and each of its
// scenarios (each outline row) fails under some rule. The matrix test does
// the same for every rule; the proofs run only the ids of one piece of work.
func proveEachId(t *testing.T, ids []string) {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("no ids to prove")
	}
	reg, corpus := load(t)
	run := func(t *testing.T, r sabotage.Rule, id string) *runner.Result {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// verdictOf is the id's row in res, and says so when there is none.
	verdictOf := func(t *testing.T, res *runner.Result, id, against string) (string, bool) {
		for _, r := range res.Rows {
			if r.ID == id {
				return r.Result, true
			}
		}
		t.Errorf("%s: no verdict for %s", against, id)
		return "", false
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			res := run(t, sabotage.Rule{}, id)
			if v, ok := verdictOf(t, res, id, "the reference host"); ok && v != verdict.ExecutedPass {
				t.Errorf("the reference host: %s is %s", id, v)
			}
			failed := map[string]bool{}
			for _, s := range res.Scenarios {
				failed[fmt.Sprintf("%s:%d", s.URI, s.Line)] = false
			}
			if len(failed) == 0 {
				t.Errorf("%s: no scenario ran", id)
			}
			rules := 0
			for _, rule := range sabotage.Rules() {
				if rule.ID != id {
					continue
				}
				rules++
				res := run(t, rule, id)
				if v, ok := verdictOf(t, res, id, rule.Key()); ok && v != verdict.ExecutedFail {
					t.Errorf("%s: %s is %s, want executed-fail", rule.Key(), id, v)
				}
				for _, s := range res.Scenarios {
					if s.Result == verdict.ExecutedFail {
						failed[fmt.Sprintf("%s:%d", s.URI, s.Line)] = true
						t.Logf("%s: %s:%d fails: %s", rule.Key(), s.URI, s.Line, strings.SplitN(s.Detail, "\n", 2)[0])
					}
				}
			}
			if rules == 0 {
				t.Errorf("no rule breaks %s", id)
			}
			for sc, ok := range failed {
				if !ok {
					t.Errorf("%s: scenario %s fails under no rule", id, sc)
				}
			}
		})
	}
}
