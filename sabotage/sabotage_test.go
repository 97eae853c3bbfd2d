package sabotage_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := scenarios.LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	return reg, corpus
}

// witnessed lists the ids that have scenarios: every one of them needs a rule.
func witnessed(corpus *scenarios.Corpus) []string {
	seen := map[string]bool{}
	for _, s := range corpus.Scenarios {
		for _, id := range s.ReqIDs {
			seen[id] = true
		}
	}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// TestEveryRequirementFailsAgainstItsSabotagedHost runs each requirement's
// scenarios against a host broken for exactly that requirement and expects
// executed-fail on that id: a requirement the suite cannot fail is not tested.
// The runs are independent and mostly wait on the network, so they are made
// concurrently (bounded) and reported one subtest per id.
func TestEveryRequirementFailsAgainstItsSabotagedHost(t *testing.T) {
	reg, corpus := load(t)
	rules := sabotage.Rules()
	type outcome struct {
		row *runner.Row
		err error
	}
	ids := witnessed(corpus)
	results := make([]outcome, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, id := range ids {
		rule, ok := rules[id]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
			results[i].err = err
			if err == nil {
				for _, r := range res.Rows {
					if r.ID == id {
						results[i].row = &r
					}
				}
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		rule, ok := rules[id]
		t.Run(id, func(t *testing.T) {
			switch r := results[i]; {
			case !ok:
				t.Errorf("no sabotage rule for %s; add one in sabotage/", id)
			case r.err != nil:
				t.Fatal(r.err)
			case r.row == nil:
				t.Errorf("no row for %s in the result", id)
			case r.row.Result != verdict.ExecutedFail:
				t.Errorf("against a host that %s, %s is %s, want executed-fail (%s)", rule.Broken, id, r.row.Result, r.row.Detail)
			}
		})
	}
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

// TestNoOrphanRules keeps the rule set and the registry in step.
func TestNoOrphanRules(t *testing.T) {
	reg, _ := load(t)
	for id := range sabotage.Rules() {
		if _, ok := reg.Lookup(id); !ok {
			t.Errorf("sabotage rule for %s, which is not in the registry", id)
		}
	}
}

// TestMatrixDocIsCurrent checks docs/sabotage.md against the rules; run with
// PARLEY_UPDATE_DOCS=1 to rewrite it.
func TestMatrixDocIsCurrent(t *testing.T) {
	want := sabotage.Matrix()
	path := "../docs/sabotage.md"
	if os.Getenv("PARLEY_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(want) {
		t.Errorf("docs/sabotage.md is out of date with sabotage.Rules(); regenerate with PARLEY_UPDATE_DOCS=1 go test ./sabotage -run TestMatrixDocIsCurrent")
	}
}
