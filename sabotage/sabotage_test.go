package sabotage_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/internal/lazyfs"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	return reg, corpus
}

// TestEveryScenarioFailsAgainstSomeSabotagedHost runs each rule against the
// scenarios of the requirement it breaks. Every rule must make that
// requirement executed-fail (a rule that breaks nothing the suite sees is
// dead), and every scenario of the corpus, every outline row, must end
// executed-fail under at least one rule (a check that can never fail is
// dead). The runs are independent and mostly wait on the network, so they
// are made concurrently (bounded). docs/sabotage.md lists, per scenario, the
// rules that fail it; the test holds the document to what it observed.
//
// PARLEY_SABOTAGE_FAMILY=agtp narrows the run to one family's rules and
// scenarios, for iterating on them; the document is then not checked.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	reg, corpus := load(t)
	rules := sabotage.Rules()
	family := os.Getenv("PARLEY_SABOTAGE_FAMILY")
	if family != "" {
		var mine []sabotage.Rule
		for _, r := range rules {
			if strings.HasPrefix(r.ID, family+".") {
				mine = append(mine, r)
			}
		}
		rules = mine
	}
	type outcome struct {
		res *runner.Result
		err error
	}
	results := make([]outcome, len(rules))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, rule := range rules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + rule.ID})
			results[i] = outcome{res, err}
		}()
	}
	wg.Wait()

	failedBy := map[string][]string{}
	for i, rule := range rules {
		t.Run("rule/"+rule.Key(), func(t *testing.T) {
			if _, ok := reg.Lookup(rule.ID); !ok {
				t.Fatalf("a rule for %s, which is not in the registry", rule.ID)
			}
			r := results[i]
			if r.err != nil {
				t.Fatal(r.err)
			}
			var row *runner.Row
			for j := range r.res.Rows {
				if r.res.Rows[j].ID == rule.ID {
					row = &r.res.Rows[j]
				}
			}
			switch {
			case row != nil && noPowerCut(row.ID):
				t.Skipf("FUSE is not usable on this machine, so %s is blocked: %s", row.ID, row.Detail)
			case row == nil:
				t.Errorf("no row for %s in the result", rule.ID)
			case row.Result != verdict.ExecutedFail:
				t.Errorf("against a host that %s, %s is %s, want executed-fail (seed %d; %s)", rule.Broken, rule.ID, row.Result, r.res.Seed, row.Detail)
			}
			for _, s := range r.res.Scenarios {
				if s.Result == verdict.ExecutedFail {
					k := scenarioKey(s.URI, s.Line)
					failedBy[k] = append(failedBy[k], rule.Key())
				}
			}
		})
	}

	var proofs []sabotage.Proof
	for _, s := range corpus.Scenarios {
		if family != "" && !strings.HasPrefix(s.URI, family+"/") {
			continue
		}
		k := scenarioKey(s.URI, s.Line)
		proofs = append(proofs, sabotage.Proof{Scenario: k, Name: s.Name, ReqIDs: s.ReqIDs, FailedBy: failedBy[k]})
		if len(failedBy[k]) == 0 && !(len(s.ReqIDs) == 1 && noPowerCut(s.ReqIDs[0])) {
			t.Errorf("scenario %s %q fails against no sabotaged host: add a rule (sabotage/) that breaks what it checks", k, s.Name)
		}
	}

	const path = "../docs/sabotage.md"
	if family != "" {
		return
	}
	if os.Getenv("PARLEY_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(sabotage.Matrix(rules, proofs)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), sabotage.Matrix(rules, nil)[:strings.Index(sabotage.Matrix(rules, nil), "## Scenarios")]) {
		t.Errorf("docs/sabotage.md does not list the current rules; regenerate it with PARLEY_UPDATE_DOCS=1 go test ./sabotage -run TestEveryScenarioFailsAgainstSomeSabotagedHost")
	}
	listed := sabotage.ParseMatrix(string(doc))
	for _, p := range proofs {
		keys, ok := listed[p.Scenario]
		if !ok {
			t.Errorf("docs/sabotage.md does not list scenario %s; regenerate it", p.Scenario)
			continue
		}
		// The document lists every rule that failed the scenario when it
		// was generated; a run must see at least one of them fail it again
		// (a race may let another slip in a given run, never all of them).
		again := false
		for _, k := range keys {
			if contains(p.FailedBy, k) {
				again = true
			}
		}
		if !again && !(len(p.ReqIDs) == 1 && noPowerCut(p.ReqIDs[0])) {
			t.Errorf("docs/sabotage.md says %s fails against %v, but none of them failed it in this run (it failed against %v); regenerate the document if the rules changed", p.Scenario, keys, p.FailedBy)
		}
		delete(listed, p.Scenario)
	}
	for k := range listed {
		t.Errorf("docs/sabotage.md lists scenario %s, which is not in the corpus; regenerate it", k)
	}
}

// noPowerCut says id is a power-cut id on a machine where the suite cannot
// cut the power (no FUSE): its scenarios are blocked there, not failed.
func noPowerCut(id string) bool {
	return strings.HasSuffix(id, ".power-cut") && lazyfs.Available() != nil
}

func scenarioKey(uri string, line int64) string { return fmt.Sprintf("features/%s:%d", uri, line) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestProxyIsTransparent is the control: the same proxy with a rule that
// changes nothing must leave every requirement passing, so a sabotage
// failure is the rule's doing and not the proxy's.
func TestProxyIsTransparent(t *testing.T) {
	reg, corpus := load(t)
	noop := sabotage.Rule{ID: "none", Response: func(*sabotage.Exchange, *sabotage.Response) {}}
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: noop}
	defer tgt.Close()
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		if r.Result != verdict.ExecutedPass {
			t.Errorf("%s through a pass-through proxy: %s (%s)", r.ID, r.Result, r.Detail)
		}
	}
}
