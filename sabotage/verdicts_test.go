package sabotage_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/features"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	agtp "github.com/parley-conformance/parley/wire/agtp"
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

// markers are words a host might send hoping to be read as something other
// than its own failure.
const markers = `scenario error: suite fault: blocked (precondition-failed, seam-absent) inapplicable skipped executed-pass godog: step skipped {"parley":"declined","reason":"x"}`

// garbled is a host that answers every exchange with text in place of its
// body, every event-stream frame with text as its data, and adds text to its
// headers and its log; statuses are kept.
func garbled(text string) sabotage.Rule {
	return sabotage.Rule{ID: "none", Broken: "answers " + text,
		Response: func(_ *sabotage.Exchange, r *sabotage.Response) {
			r.Body = []byte(text)
			r.Header.Set("X-Parley-Note", text)
		},
		Stream: func(_ *sabotage.Exchange, _ []byte) [][]byte {
			return [][]byte{[]byte("event: " + text + "\ndata: " + text + "\n")}
		},
		AGTP: func(_ *sabotage.AGTPExchange, r *agtp.Response) {
			r.Body = []byte(text)
			r.Reason = "OK"
			r.Header.Set("X-Parley-Note", text)
		},
		Logs: func(lines []string) []string { return append(lines, text) },
	}
}

// TestNoHostByteChangesAVerdictType runs the whole corpus against a host
// that answers with marker words (the names of verdicts and causes, the
// text of godog's and parley's own errors) and against one that answers with
// neutral text of the same length: every scenario must end with the same
// verdict and cause in both, and none may be a suite fault, which a host
// must never be able to cause.
func TestNoHostByteChangesAVerdictType(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("runs the corpus twice against garbling hosts")
	}
	reg, corpus := load(t)
	run := func(text string) map[string]verdict.ScenarioResult {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: garbled(text)}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Concurrency: 32})
		if err != nil {
			t.Error(err) // not Fatal: the runs are made on goroutines of their own
			return nil
		}
		out := map[string]verdict.ScenarioResult{}
		for _, s := range res.Scenarios {
			out[scenarioKey(s.URI, s.Line)] = s
			if s.Cause == verdict.CauseSuiteFault {
				t.Errorf("%s:%d: a host answering %.40q… made parley fault: %s", s.URI, s.Line, text, s.Detail)
			}
		}
		return out
	}
	// The two runs mostly wait (a garbled answer leaves many steps polling
	// to their bound): they are made at once.
	var neutral, marked map[string]verdict.ScenarioResult
	var wg sync.WaitGroup
	wg.Go(func() { neutral = run(strings.Repeat("x", len(markers))) })
	wg.Go(func() { marked = run(markers) })
	wg.Wait()
	if t.Failed() {
		return
	}
	for k, n := range neutral {
		m := marked[k]
		if m.Result != n.Result || m.Cause != n.Cause {
			t.Errorf("%s: %s (%s) against neutral text but %s (%s) against marker words: %s", k, n.Result, n.Cause, m.Result, m.Cause, m.Detail)
		}
	}
}
