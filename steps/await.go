package steps

import (
	"context"
	"time"
)

// Poll says how Await waits for a condition the host reaches in its own
// time.
type Poll struct {
	// What names the condition that did not come, for the failure.
	What string
	// Every is the pause between reads.
	Every time.Duration
	// Rounds is how many reads in a row may see no progress before the wait
	// gives up. It is counted in reads, not seconds: each read is a round
	// trip to the host, so a host slowed by a busy machine gets as many
	// chances as an idle one, in proportionally more wall time.
	Rounds int
	// InFlight, when set, reports work the scenario started and the host
	// has not answered yet (a dispatch in flight): while there is some, the
	// wait goes on, since that work is itself bounded by ExchangeTimeout.
	InFlight func() bool
}

// Await reads until check reports done. check also returns a snapshot of
// what it read: a changed snapshot is progress, and starts the count of
// rounds again. Await has no wall-clock limit of its own; it gives up, with
// a failure naming p.What, when p.Rounds reads in a row saw no progress and
// nothing the scenario started is still in flight, or after 20 times
// p.Rounds reads in all.
func Await(ctx context.Context, p Poll, check func() (done bool, snapshot string, err error)) error {
	if p.Every <= 0 {
		p.Every = 20 * time.Millisecond
	}
	if p.Rounds <= 0 {
		p.Rounds = 250
	}
	var last string
	idle, reads := 0, 0
	start := time.Now()
	for {
		// In flight is read before the check: work that answered after
		// this read is seen done by the next round's check.
		flying := p.InFlight != nil && p.InFlight()
		done, snap, err := check()
		reads++
		if err != nil || done {
			return err
		}
		if snap != last || flying {
			idle = 0
		} else {
			idle++
		}
		last = snap
		// Progress that never ends (a record that changes on every read)
		// is bounded too: 20 times the rounds in all.
		if idle >= p.Rounds || reads >= 20*p.Rounds {
			return Fail("%s: %d reads of the host over %s, the last %d without progress and with nothing the scenario started still in flight", p.What, reads, time.Since(start).Round(time.Millisecond), idle)
		}
		select {
		case <-time.After(p.Every):
		case <-ctx.Done():
			return Fault("the run was interrupted while waiting until %s: %v", p.What, ctx.Err())
		}
	}
}
