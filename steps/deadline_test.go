package steps

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestAnExchangeIsOverdueOnlyWithoutProgress: with no answer anywhere an
// exchange ends after its timeout; while other exchanges keep being
// answered it goes on, up to the cap. The test runs on synctest's fake
// clock, so no margin of real time decides it.
func TestAnExchangeIsOverdueOnlyWithoutProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// An answer noted by an earlier test, in real time, would read as
		// one from the fake clock's future.
		lastAnswer.Store(0)
		defer lastAnswer.Store(0)

		const timeout = 50 * time.Millisecond
		start := time.Now()
		ctx, cancel := exchangeContext(context.Background(), timeout, time.Minute)
		defer cancel()
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) || time.Since(start) != timeout {
			t.Fatalf("ended after %s with cause %v, want a deadline after %s", time.Since(start), context.Cause(ctx), timeout)
		}

		// Answers come 25 ms apart for twice the timeout: the exchange is
		// not overdue.
		ctx, cancel = exchangeContext(context.Background(), time.Second, time.Minute)
		defer cancel()
		for i := 0; i < 80; i++ {
			time.Sleep(25 * time.Millisecond)
			NoteAnswer()
			synctest.Wait()
			if ctx.Err() != nil {
				t.Fatalf("ended after %d answers elsewhere: %v", i, context.Cause(ctx))
			}
		}
		// Then none: it ends one timeout after the last answer.
		last := time.Now()
		<-ctx.Done()
		if time.Since(last) != time.Second {
			t.Fatalf("ended %s after the last answer, want %s", time.Since(last), time.Second)
		}

		// The cap ends it whatever the progress.
		ctx, cancel = exchangeContext(context.Background(), time.Minute, 10*time.Millisecond)
		defer cancel()
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("the cap's cause %v", context.Cause(ctx))
		}
	})
}
