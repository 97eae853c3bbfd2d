package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/internal/textwrap"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/verdict"
)

// runTo runs a command line with its stdout and stderr in one buffer, as a
// terminal would show them, and returns that with the exit code.
func runTo(args ...string) (string, int) {
	var buf bytes.Buffer
	root := newRoot()
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs(args)
	code := exitOK
	if err := root.Execute(); err != nil {
		buf.WriteString("parley: " + err.Error() + "\n")
		code = exitUsage
		if ee, ok := err.(*exitError); ok {
			code = ee.code
		}
	}
	return buf.String(), code
}

// TestAHostThatNeverStartsPrintsOneCause runs the whole corpus against a
// host command that exits before its ready line: every requirement fails
// alike, and the console says so once, with the host's log line, in at most
// 25 lines.
func TestAHostThatNeverStartsPrintsOneCause(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	got, code := runTo("run", "--target", "exec", "--exec", "echo boom-on-stderr >&2; exit 1", "--out", out)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, got)
	}
	// A heartbeat line ("still running") comes after a minute of a run's
	// own time: it is progress, not a cause, and is not counted, so that
	// the count holds on a machine slow enough to print one.
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
		if !strings.Contains(l, "] still running:") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 25 {
		t.Errorf("%d lines, want at most 25:\n%s", len(lines), got)
	}
	for _, want := range []string{"all ended the same way", "the host did not start with this configuration", "boom-on-stderr"} {
		if !strings.Contains(got, want) {
			t.Errorf("the console does not say %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "the host did not start") != 1 {
		t.Errorf("the cause is printed more than once:\n%s", got)
	}
	t.Logf("%d lines:\n%s", len(lines), got)
}

// TestADeclineReasonReachesTheConsoleWhole: a 200-character reason is
// wrapped, not cut.
func TestADeclineReasonReachesTheConsoleWhole(t *testing.T) {
	t.Parallel()
	reason := strings.TrimSpace(strings.Repeat("this host cannot take the configuration because of reason ", 4))[:200]
	out := t.TempDir()
	script := filepath.Join(out, "host.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '{\"parley\":\"declined\",\"reason\":\""+reason+"\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, code := runTo("run", "--target", "exec", "--exec", script, "--tags", slice, "--out", out, "--quiet")
	if code == exitOK {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, got)
	}
	if !strings.Contains(textwrap.Unwrap(got), reason) {
		t.Errorf("the 200-character reason does not reach the console whole:\n%s", got)
	}
	for _, l := range strings.Split(got, "\n") {
		if len([]rune(l)) > textwrap.Width && strings.Contains(l, "reason") {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}
}

func TestPrintGroupsCountsOneCause(t *testing.T) {
	t.Parallel()
	var rows []verdict.Row
	for _, id := range []string{"a.one", "a.two", "a.three"} {
		r := verdict.Row{ID: id, Scenarios: []verdict.ScenarioResult{{URI: "a.feature", Line: 1, Name: "n", Result: verdict.ExecutedFail, Detail: "it exited"}}}
		r.Fold()
		rows = append(rows, r)
	}
	var b bytes.Buffer
	printGroups(&b, rows)
	got := b.String()
	if !strings.Contains(got, "3 requirements, all ended the same way") || strings.Count(got, "it exited") != 1 || !strings.Contains(got, "a.one, a.two, a.three") {
		t.Errorf("got:\n%s", got)
	}
}

// Help shows what a flag's value is, not a command line.
func TestRunHelpShowsValueTypes(t *testing.T) {
	t.Parallel()
	got, _ := runTo("run", "--help")
	for _, want := range []string{"--key file", "--out dir", "--exec command", "--subject NAME=sha256:HEX"} {
		if !strings.Contains(got, want) {
			t.Errorf("run --help does not show %q", want)
		}
	}
	if strings.Contains(got, "--key parley keygen") {
		t.Error("run --help shows a command where the value type belongs")
	}
}

// The requirements list says why a run reports fewer ids than it lists.
func TestRequirementsFooterExplainsTheCount(t *testing.T) {
	t.Parallel()
	got, code := runTo("requirements")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var unwitnessable int
	for _, e := range reg.Entries {
		if e.Witness == scenarios.WitnessUnwitnessable {
			unwitnessable++
		}
	}
	if unwitnessable > 0 && !strings.Contains(got, "unwitnessable (") {
		t.Errorf("the footer does not name the unwitnessable ids:\n%s", got[max(0, len(got)-400):])
	}
	if !strings.Contains(got, "ids listed; a run of them all reports") {
		t.Errorf("no footer:\n%s", got[max(0, len(got)-400):])
	}
}

// --start-timeout bounds each host's start: a host that never prints its
// ready line fails at that bound, the detail names it and how to raise it,
// and the bundle records it. Only the bound can end this host's start
// (it never prints and never exits), so no wall-clock margin is involved.
func TestStartTimeoutBoundsEveryStartAndIsRecorded(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	got, code := runTo("run", "--target", "exec", "--exec", "sleep 3600 #", "--start-timeout", "150ms", "--tags", slice, "--out", out, "--quiet")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, got)
	}
	if w := textwrap.Unwrap(got); !strings.Contains(w, "within 150ms, the start timeout") || !strings.Contains(w, "--start-timeout") {
		t.Errorf("the summary does not name the bound and how to raise it:\n%s", got)
	}
	st := readStatement(t, out)
	if st.Predicate.Target.StartTimeout != "150ms" {
		t.Errorf("the bundle records start timeout %q, want 150ms", st.Predicate.Target.StartTimeout)
	}
	for _, bad := range [][]string{
		{"--start-timeout", "0s", "--target", "exec", "--exec", "true"},
		{"--start-timeout", "-1s", "--target", "exec", "--exec", "true"},
		{"--start-timeout", "5s"}, // the refhost target starts its hosts in-process
		{"--start-timeout", "soon", "--target", "exec", "--exec", "true"},
	} {
		if got, code := runTo(append([]string{"run", "--quiet", "--tags", slice, "--out", t.TempDir()}, bad...)...); code != exitUsage || !strings.Contains(got, "start-timeout") {
			t.Errorf("%v: exit %d, want %d naming the flag:\n%s", bad, code, exitUsage, got)
		}
	}
}

// The exchange printed whole is a failing root cause's, else a hand-written
// scenario's before a model row's: the one that shows the rule plainest.
func TestTheExchangeShownIsTheRootsThenAHandWrittenOnes(t *testing.T) {
	t.Parallel()
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	x := &verdict.Exchange{Method: "POST", Target: "/v1/tool", Status: 200}
	rows := []verdict.Row{
		{ID: "contractrefine.model.decisions", Result: verdict.ExecutedFail, Exchange: x},
		{ID: "contractrefine.tool.binding-expires", Result: verdict.ExecutedFail, Exchange: x},
		{ID: "contractrefine.tool.enforce-mismatch-denied", Result: verdict.ExecutedFail, Exchange: x},
	}
	for _, r := range rows {
		if _, ok := reg.Lookup(r.ID); !ok {
			t.Fatalf("%s is not in the registry", r.ID)
		}
	}
	if got := exchangeToShow(rows, nil, reg); got == nil || got.ID != "contractrefine.tool.binding-expires" {
		t.Errorf("without roots: got %v, want the first hand-written row", got)
	}
	roots := []verdict.Root{{ID: "contractrefine.tool.enforce-mismatch-denied", Result: verdict.ExecutedFail, Blocks: []string{"x"}}}
	if got := exchangeToShow(rows, roots, reg); got == nil || got.ID != "contractrefine.tool.enforce-mismatch-denied" {
		t.Errorf("with a failing root: got %v, want the root", got)
	}
	if got := exchangeToShow(rows[:1], nil, reg); got == nil || got.ID != "contractrefine.model.decisions" {
		t.Errorf("a model row alone: got %v, want it", got)
	}
}
