package steps

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// ExchangeCap bounds one exchange however busy the run: the leak guard
// behind the progress-derived deadline of ExchangeContext.
const ExchangeCap = 10 * ExchangeTimeout

// lastAnswer is when a host last answered this process (unix nanoseconds):
// any answer to any exchange is progress.
var lastAnswer atomic.Int64

// NoteAnswer records that a host answered an exchange: the run is making
// progress, so the exchanges still waiting are not yet overdue.
func NoteAnswer() { lastAnswer.Store(time.Now().UnixNano()) }

// ExchangeContext bounds one exchange by the run's progress rather than by a
// fixed wall-clock margin: the exchange is overdue once ExchangeTimeout has
// passed since it started and since any host last answered any exchange of
// this process. A hung host, with nothing else answering, is cut off after
// ExchangeTimeout as before; on a busy machine, where every answer is slow
// but answers keep coming, an exchange waits as long as the others do (up
// to ExchangeCap). context.Cause of the returned context says which.
func ExchangeContext(parent context.Context) (context.Context, context.CancelFunc) {
	return exchangeContext(parent, ExchangeTimeout, ExchangeCap)
}

func exchangeContext(parent context.Context, timeout, limit time.Duration) (context.Context, context.CancelFunc) {
	capped, cancelCap := context.WithTimeoutCause(parent, limit, fmt.Errorf("%w: no answer within %s", context.DeadlineExceeded, limit))
	ctx, cancel := context.WithCancelCause(capped)
	start := time.Now()
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			since := start
			if last := time.Unix(0, lastAnswer.Load()); last.After(since) {
				since = last
			}
			if rest := timeout - time.Since(since); rest > 0 {
				t.Reset(rest)
				continue
			}
			cancel(fmt.Errorf("%w: no answer within %s, and no host answered anything else meanwhile", context.DeadlineExceeded, time.Since(start).Round(time.Millisecond)))
			return
		}
	}()
	return ctx, func() { cancel(context.Canceled); cancelCap() }
}

// exchangeErr is err, or the cause of ctx's end when that ended it.
func exchangeErr(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && c != context.Canceled && ctx.Err() != nil {
		return fmt.Errorf("%v (%w)", err, c)
	}
	return err
}
