package proofs_test

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

// TestEachAGLRuntimeIdFailsUnderEveryRuleForIt: each AGL runtime requirement of issue 24 passes on the
// reference host, and fails against every rule that breaks it, with every
// one of its scenarios (each outline row) failing under some rule. The
// matrix test does the same for every rule; this one runs only these.
// PARLEY_SABOTAGE_IDS is not read: the ids are the issue's.
func TestEachAGLRuntimeIdFailsUnderEveryRuleForIt(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the issue's scenarios against sabotaged hosts")
	}
	reg, corpus := load(t)
	ids := []string{"agl.dispatch.admission-wait-expires", "agl.durability.reconcile-after-revocation", "agl.audit.retry-attempts", "agl.dispatch.admission-rechecks-authority", "agl.recovery.authority-rechecked", "agl.recovery.resumes-deduplicated-send", "agl.recovery.deployment-changed-at-restart"}
	run := func(t *testing.T, r sabotage.Rule, id string) *runner.Result {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, id := range ids {
		// One subtest per id, so that one id's proof runs alone with
		// -run 'TestEachAGLRuntimeIdFailsUnderEveryRuleForIt/<id>'.
		t.Run(id, func(t *testing.T) { proveAGLRuntimeId(t, id, run) })
	}
}

func proveAGLRuntimeId(t *testing.T, id string, run func(*testing.T, sabotage.Rule, string) *runner.Result) {
	res := run(t, sabotage.Rule{}, id)
	for _, r := range res.Rows {
		if r.ID == id && r.Result != verdict.ExecutedPass {
			t.Errorf("the reference host: %s is %s: %s", id, r.Result, r.Detail)
		}
	}
	all := map[string]bool{}
	for _, s := range res.Scenarios {
		all[fmt.Sprintf("%s:%d", s.URI, s.Line)] = false
	}
	rules := 0
	for _, rule := range sabotage.Rules() {
		if rule.ID != id {
			continue
		}
		rules++
		res := run(t, rule, id)
		for _, r := range res.Rows {
			if r.ID == id && r.Result != verdict.ExecutedFail {
				t.Errorf("%s: %s is %s, want executed-fail", rule.Key(), id, r.Result)
			}
		}
		for _, s := range res.Scenarios {
			if s.Result == verdict.ExecutedFail {
				all[fmt.Sprintf("%s:%d", s.URI, s.Line)] = true
				t.Logf("%s: %s:%d fails: %s", rule.Key(), s.URI, s.Line, strings.SplitN(s.Detail, "\n", 2)[0])
			}
		}
	}
	if rules == 0 {
		t.Errorf("no rule breaks %s", id)
	}
	for sc, failed := range all {
		if !failed {
			t.Errorf("%s: scenario %s fails under no rule", id, sc)
		}
	}
}
