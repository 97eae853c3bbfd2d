package steps

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAnExchangeIsOverdueOnlyWithoutProgress: with no answer anywhere an
// exchange ends after its timeout; while other exchanges keep being
// answered it goes on, up to the cap.
func TestAnExchangeIsOverdueOnlyWithoutProgress(t *testing.T) {
	const timeout = 50 * time.Millisecond
	ctx, cancel := exchangeContext(context.Background(), timeout, time.Minute)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("cause %v, want a deadline", context.Cause(ctx))
	}

	// Answers keep coming 25 ms apart for twice the timeout: the exchange
	// is not overdue (only a pause of a whole second between two ticks
	// would make it so).
	ctx, cancel = exchangeContext(context.Background(), time.Second, time.Minute)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 80; i++ {
		<-tick.C
		NoteAnswer()
		if ctx.Err() != nil {
			t.Fatalf("ended after %d answers elsewhere: %v", i, context.Cause(ctx))
		}
	}
	// Then none: it ends.
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("never ended once the answers stopped")
	}

	ctx, cancel = exchangeContext(context.Background(), time.Minute, 10*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("the cap's cause %v", context.Cause(ctx))
	}
}
