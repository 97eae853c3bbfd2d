package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/verdict"
)

// TestProgressShowsAHeartbeatWhileRepeatsAreHidden drives the line-per-
// scenario progress with a fake clock: scenarios that ended as one already
// shown did print nothing, until a heartbeat interval has passed since the
// last line; then one line says where the run is and how many went unseen,
// and the next interval is twice as long.
func TestProgressShowsAHeartbeatWhileRepeatsAreHidden(t *testing.T) {
	clock := time.Unix(0, 0)
	var out strings.Builder
	p := newProgress(&out, false, 8, func() time.Time { return clock })
	failed := ScenarioResult{Result: verdict.ExecutedFail, Detail: "the host did not start", URI: "a.feature", Line: 3, Name: "one"}
	lines := func() []string { return strings.Split(strings.TrimRight(out.String(), "\n"), "\n") }

	p.finished(failed)
	clock = clock.Add(heartbeat / 2)
	p.finished(failed) // a repeat, within the interval: no line
	if n := len(lines()); n != 1 {
		t.Fatalf("%d lines after one failure and one repeat, want 1:\n%s", n, out.String())
	}
	clock = clock.Add(heartbeat / 2)
	p.finished(failed) // a repeat, a whole interval after the last line
	got := lines()
	if len(got) != 2 || !strings.Contains(got[1], "[3/8] still running: 3 not passed so far; 2 more since the last line") {
		t.Fatalf("want a heartbeat naming the position and the 2 unseen repeats:\n%s", out.String())
	}
	clock = clock.Add(heartbeat + heartbeat/2)
	p.finished(failed) // the next interval is twice as long: no line yet
	if n := len(lines()); n != 2 {
		t.Fatalf("a second heartbeat came before twice the interval:\n%s", out.String())
	}
	clock = clock.Add(heartbeat / 2)
	p.finished(failed) // twice the interval after the first heartbeat
	got = lines()
	if len(got) != 3 || !strings.Contains(got[2], "[5/8] still running: 5 not passed so far; 2 more since the last line") {
		t.Fatalf("want a second heartbeat twice the interval after the first:\n%s", out.String())
	}
	p.finished(ScenarioResult{Result: verdict.ExecutedPass, URI: "a.feature", Line: 9, Name: "two"})
	clock = clock.Add(maxHeartbeat)
	p.finished(failed)
	clock = clock.Add(maxHeartbeat)
	p.finished(failed) // the last: no heartbeat, the closing count instead
	got = lines()
	if len(got) != 6 || !strings.Contains(got[3], "executed-pass") || !strings.Contains(got[4], "[7/8] still running") ||
		got[5] != "6 more scenario(s) ended as one listed above did; the summary groups them by cause" {
		t.Fatalf("want the pass line and the closing count, and no heartbeat at the end:\n%s", out.String())
	}
}

// TestLiveProgressPrintsNoHeartbeat: the redrawn status line already moves
// with every scenario.
func TestLiveProgressPrintsNoHeartbeat(t *testing.T) {
	clock := time.Unix(0, 0)
	var out strings.Builder
	p := newProgress(&out, true, 3, func() time.Time { return clock })
	failed := ScenarioResult{Result: verdict.ExecutedFail, Detail: "the host did not start", URI: "a.feature", Line: 3, Name: "one"}
	for range 3 {
		clock = clock.Add(2 * heartbeat)
		p.finished(failed)
	}
	if strings.Contains(out.String(), "still running") {
		t.Fatalf("a live status line got a heartbeat:\n%q", out.String())
	}
	if !strings.Contains(out.String(), "[3/3] 3 not passed") {
		t.Fatalf("the status line does not count what did not pass:\n%q", out.String())
	}
}
