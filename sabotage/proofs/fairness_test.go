package proofs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestEachIdTheFairnessAuditTouchedStillFails: the ids whose scenarios or
// rules the fairness audit changed (issue 20: a scenario split into one per
// id, checks moved into preconditions, rules narrowed to their own id) pass
// on the reference host, fail under every rule for them, and every one of
// their scenarios (each outline row) fails under some rule. The matrix test
// does the same for every rule; this one runs only these.
func TestEachIdTheFairnessAuditTouchedStillFails(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the audited ids' scenarios against sabotaged hosts")
	}
	reg, corpus := load(t)
	ids := []string{
		"contractrefine.preflight.post.preflight-id-uuidv4", "contractrefine.preflight.post.audit-id-uuidv4",
		"contractrefine.preflight.post.session-metadata-missing-deny", "contractrefine.preflight.post.reason-shape",
		"agtp.rcns.gate.attempt-id-on-464", "agtp.inventory.inspect-rcns-attempt",
		"openwop.requirement.0242.requested.outbound", "openwop.requirement.0242.requested.outbound.mcp",
		"agl.contract.interface-compatibility", "agl.contract.interface-binding-changes",
	}
	run := func(r sabotage.Rule, id string) *runner.Result {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, id := range ids {
		res := run(sabotage.Rule{}, id)
		for _, r := range res.Rows {
			if r.ID == id && r.Result != verdict.ExecutedPass {
				t.Errorf("the reference host: %s is %s: %s", id, r.Result, r.Detail)
			}
		}
		failed := map[string]bool{}
		for _, s := range res.Scenarios {
			failed[fmt.Sprintf("%s:%d", s.URI, s.Line)] = false
		}
		rules := 0
		for _, rule := range sabotage.Rules() {
			if rule.ID != id {
				continue
			}
			rules++
			res := run(rule, id)
			for _, r := range res.Rows {
				if r.ID == id && r.Result != verdict.ExecutedFail {
					t.Errorf("%s: %s is %s, want executed-fail", rule.Key(), id, r.Result)
				}
			}
			for _, s := range res.Scenarios {
				if s.Result == verdict.ExecutedFail {
					failed[fmt.Sprintf("%s:%d", s.URI, s.Line)] = true
				}
			}
		}
		t.Logf("%s: %d rules, %d scenarios", id, rules, len(failed))
		if rules == 0 {
			t.Errorf("no rule breaks %s", id)
		}
		if len(failed) == 0 {
			t.Errorf("%s: no scenario ran", id)
		}
		for sc, ok := range failed {
			if !ok {
				t.Errorf("%s: scenario %s fails under no rule", id, sc)
			}
		}
	}
}
