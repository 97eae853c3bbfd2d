package runner

import (
	"fmt"
	"io"
	"time"

	"github.com/parley-conformance/parley/verdict"
)

// heartbeat is how long a run that prints lines may first go without one
// while scenarios keep finishing unseen (each ended as one already shown
// did): a host that never prints its ready line costs its start timeout per
// configuration, and a CI log must show that the run is alive and where.
// Each heartbeat doubles the next interval, up to maxHeartbeat, so that a
// long run adds a handful of lines, not one a minute.
const (
	heartbeat    = time.Minute
	maxHeartbeat = 8 * time.Minute
)

// progress prints what a run does as scenarios finish. On a terminal (live)
// it redraws one status line; otherwise it prints a line per scenario. Either
// way a scenario that did not pass gets a line of its own, unless it ended as
// one already shown did (every scenario of a host that never starts): the
// summary groups those under their cause, and a line-per-scenario log gets
// a heartbeat instead (after a minute of silence, then two, four, eight).
type progress struct {
	w     io.Writer // nil: print nothing
	live  bool
	total int
	now   func() time.Time

	done, notPassed, repeats int
	unseen                   int // repeats since the last line printed
	last                     time.Time
	gap                      time.Duration // silence before the next heartbeat
	shown                    map[string]bool
}

func newProgress(w io.Writer, live bool, total int, now func() time.Time) *progress {
	if now == nil {
		now = time.Now
	}
	return &progress{w: w, live: live, total: total, now: now, last: now(), gap: heartbeat, shown: map[string]bool{}}
}

// finished records one scenario's result. Callers serialize calls.
func (p *progress) finished(r ScenarioResult) {
	p.done++
	repeat := false
	if r.Result != verdict.ExecutedPass {
		p.notPassed++
		k := r.Result + "\x00" + r.Cause + "\x00" + verdict.Gist(r.Detail)
		repeat = p.shown[k]
		p.shown[k] = true
		if repeat {
			p.repeats++
		}
	}
	if p.w == nil {
		return
	}
	what := r.Result
	if r.Cause != "" {
		what += " (" + r.Cause + ")"
	}
	width := len(fmt.Sprint(p.total))
	switch {
	case p.live:
		if r.Result != verdict.ExecutedPass && !repeat {
			fmt.Fprintf(p.w, "\r\033[K%-13s %s:%d %s\n", what, r.URI, r.Line, r.Name)
		}
		fmt.Fprintf(p.w, "\r\033[K[%d/%d] %d not passed · %s", p.done, p.total, p.notPassed, clip(r.Name, 60))
		if p.done == p.total {
			fmt.Fprintln(p.w)
		}
	case !repeat:
		fmt.Fprintf(p.w, "[%*d/%d] %-13s %s:%d %s\n", width, p.done, p.total, what, r.URI, r.Line, r.Name)
		p.last, p.unseen = p.now(), 0
	default:
		p.unseen++
		if now := p.now(); now.Sub(p.last) >= p.gap && p.done < p.total {
			fmt.Fprintf(p.w, "[%*d/%d] still running: %d not passed so far; %d more since the last line ended as one listed above\n", width, p.done, p.total, p.notPassed, p.unseen)
			p.last, p.unseen, p.gap = now, 0, min(2*p.gap, maxHeartbeat)
		}
	}
	if p.done == p.total && p.repeats > 0 {
		fmt.Fprintf(p.w, "%d more scenario(s) ended as one listed above did; the summary groups them by cause\n", p.repeats)
	}
}
