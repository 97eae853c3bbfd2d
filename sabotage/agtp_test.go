package sabotage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestOnePreconditionFailureIsOneRoot: a host broken in one behaviour that
// many scenarios need as a setup (accepting a 461 preview by re-issuing the
// request with Contract-Synthesized, behind "holds an active contract")
// fails exactly the requirement that witnesses that behaviour; every other
// requirement that needed it reads blocked, precondition failed, relying on
// it, and verdict.RootCauses leads a reader straight to it.
func TestOnePreconditionFailureIsOneRoot(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	const root = "agtp.rcns.delivery.accept-by-reissue"
	reg, corpus := load(t)
	pre, ok := reg.LookupPrecondition("agtp.precondition.contract-accepted")
	if !ok || len(pre.ReliesOn) != 1 || pre.ReliesOn[0] != root {
		t.Fatalf("agtp.precondition.contract-accepted relies on %v, want [%s]", pre.ReliesOn, root)
	}
	var rule *sabotage.Rule
	for _, r := range sabotage.Rules() {
		if r.Key() == root {
			rule = &r
		}
	}
	if rule == nil {
		t.Fatalf("no rule %s", root)
	}
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: *rule}
	defer tgt.Close()
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
	if err != nil {
		t.Fatal(err)
	}
	var blocked []string
	for _, r := range res.Rows {
		switch {
		case r.ID == root:
			if r.Result != verdict.ExecutedFail {
				t.Errorf("%s, whose behaviour the rule breaks, is %s, want executed-fail (%s)", r.ID, r.Result, r.Detail)
			}
		case r.Result == verdict.ExecutedPass:
		case r.Result == verdict.Blocked && r.Cause == verdict.CausePrecondition && len(r.ReliesOn) == 1 && r.ReliesOn[0] == root:
			blocked = append(blocked, r.ID)
		default:
			t.Errorf("%s is %s (cause %q, relies on %v), want executed-pass or blocked relying on %s: %s", r.ID, r.Result, r.Cause, r.ReliesOn, root, r.Detail)
		}
	}
	if len(blocked) == 0 {
		t.Fatalf("no requirement was blocked relying on %s: the rule does not break the setup", root)
	}
	roots := verdict.RootCauses(res.Rows)
	if len(roots) == 0 || roots[0].ID != root || roots[0].Result != verdict.ExecutedFail {
		t.Fatalf("root causes %v, want %s (executed-fail) first", roots, root)
	}
	if got := roots[0].Blocks; strings.Join(got, ",") != strings.Join(blocked, ",") {
		t.Errorf("the root %s blocks %v, want the blocked rows %v", root, got, blocked)
	}
	if len(roots) != 1 {
		t.Errorf("root causes %v, want only %s", roots, root)
	}
	t.Logf("%s", roots[0])
	t.Logf("1 failure blocks %d requirements: %s", len(blocked), strings.Join(blocked, ", "))
}
