package sabotage_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/features"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// lineOf returns the line of a feature file that contains text.
func lineOf(t *testing.T, file, text string) int64 {
	t.Helper()
	b, err := features.FS.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := int64(1); sc.Scan(); n++ {
		if strings.Contains(sc.Text(), text) {
			return n
		}
	}
	t.Fatalf("%s has no line with %q", file, text)
	return 0
}

// TestAFailureNamesItsOutlineRow: a host broken for one example row of an
// outline only, run in ten scenario orders, is always reported on exactly
// that row (file and line), in the scenario results and in the row detail
// the bundle signs.
func TestAFailureNamesItsOutlineRow(t *testing.T) {
	reg, corpus := load(t)
	const file = "contractrefine/mode_ladder.feature"
	row := lineOf(t, file, "| ENFORCE ")
	// A host that reads the mode case-insensitively: only the ENFORCE row
	// of the typo outline can see it.
	rule := sabotage.Rule{ID: "contractrefine.preflight.mode.typo-falls-back-to-disabled", Broken: "reads the mode case-insensitively",
		Config: func(c map[string]map[string]any) {
			if s := c["contractrefine"]; s != nil && s["mode"] == "ENFORCE" {
				s["mode"] = "enforce"
			}
		}}
	for seed := int64(1); seed <= 10; seed++ {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + rule.ID, Seed: seed * 7919})
		tgt.Close()
		if err != nil {
			t.Fatal(err)
		}
		var failed []int64
		for _, s := range res.Scenarios {
			if s.Result == verdict.ExecutedFail {
				failed = append(failed, s.Line)
			}
		}
		if len(failed) != 1 || failed[0] != row {
			t.Fatalf("seed %d: failing rows %v, want only the ENFORCE row %s:%d", res.Seed, failed, file, row)
		}
		for _, r := range res.Rows {
			if r.ID == rule.ID && !strings.HasPrefix(r.Detail, fmt.Sprintf("%s:%d ", file, row)) {
				t.Fatalf("seed %d: the row detail names another place: %s", res.Seed, r.Detail)
			}
		}
	}
}

// TestABrokenPreconditionBlocksItsDependents: a host that answers a deny
// preflight with 403 instead of a 200 decision fails the requirement that
// witnesses decisions (its own scenario), while a scenario of another
// requirement that only needs a decision is blocked, naming that root.
func TestABrokenPreconditionBlocksItsDependents(t *testing.T) {
	reg, corpus := load(t)
	var rule sabotage.Rule
	for _, r := range sabotage.Rules() {
		if r.Key() == "contractrefine.preflight.post.outcome-closed-enum#deny" {
			rule = r
		}
	}
	const root, dependent = "contractrefine.preflight.post.outcome-closed-enum", "contractrefine.preflight.get.returns-stored-decision"
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
	defer tgt.Close()
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + root + ",@req:" + dependent})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]verdict.Row{}
	for _, r := range res.Rows {
		rows[r.ID] = r
	}
	if rows[root].Result != verdict.ExecutedFail {
		t.Fatalf("%s: %s, want executed-fail (%s)", root, rows[root].Result, rows[root].Detail)
	}
	d := rows[dependent]
	if d.Result != verdict.Blocked || d.Cause != verdict.CausePrecondition || !contains(d.ReliesOn, root) {
		t.Fatalf("%s: %s (%s, relies on %v), want blocked by the failed precondition naming %s: %s", dependent, d.Result, d.Cause, d.ReliesOn, root, d.Detail)
	}
	roots := verdict.RootCauses(res.Rows)
	if len(roots) == 0 || roots[0].ID != root || roots[0].Result != verdict.ExecutedFail || !contains(roots[0].Blocks, dependent) {
		t.Fatalf("root causes %v, want %s first, blocking %s", roots, root, dependent)
	}
	t.Log(roots[0])
}
