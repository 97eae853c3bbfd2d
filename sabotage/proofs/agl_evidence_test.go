package proofs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestEachAGLEvidenceIdFailsUnderEveryRuleForIt: each agl.evidence
// requirement (profile agl-evidence, and the checker's in agl-checker)
// passes on the reference host, fails against every
// rule that breaks it, and each of its scenarios (each outline row) fails
// under some rule.
func TestEachAGLEvidenceIdFailsUnderEveryRuleForIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the evidence scenarios against sabotaged hosts")
	}
	reg, corpus := load(t)
	var ids []string
	for _, e := range reg.Entries {
		if strings.HasPrefix(e.ID, "agl.evidence.") && e.Witness != "unwitnessable" {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) < 12 {
		t.Fatalf("there are %d witnessed agl.evidence ids, want at least 12", len(ids))
	}
	run := func(r sabotage.Rule, tags string) *runner.Result {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	clean := run(sabotage.Rule{}, "@req:"+strings.Join(ids, ",@req:"))
	for _, r := range clean.Rows {
		if strings.HasPrefix(r.ID, "agl.evidence.") && r.Result != verdict.ExecutedPass {
			t.Errorf("the reference host: %s is %s: %s", r.ID, r.Result, r.Detail)
		}
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			all := map[string]bool{}
			for _, s := range clean.Scenarios {
				if slices.Contains(s.ReqIDs, id) {
					all[fmt.Sprintf("%s:%d", s.URI, s.Line)] = false
				}
			}
			rules := 0
			for _, rule := range sabotage.Rules() {
				if rule.ID != id {
					continue
				}
				rules++
				res := run(rule, "@req:"+id)
				seen := false
				for _, r := range res.Rows {
					if r.ID == id {
						seen = true
						if r.Result != verdict.ExecutedFail {
							t.Errorf("%s: %s is %s, want executed-fail", rule.Key(), id, r.Result)
						}
					}
				}
				if !seen {
					t.Errorf("%s: no verdict for %s", rule.Key(), id)
				}
				for _, s := range res.Scenarios {
					k := fmt.Sprintf("%s:%d", s.URI, s.Line)
					if _, mine := all[k]; !mine {
						all[k] = false
					}
					if s.Result == verdict.ExecutedFail {
						all[k] = true
						t.Logf("%s: %s fails: %s", rule.Key(), k, strings.SplitN(s.Detail, "\n", 2)[0])
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
		}()
	}
	wg.Wait()
}
