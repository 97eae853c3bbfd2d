package steps

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwaitCountsReadsNotSeconds: a wait gives up after its rounds without
// progress, however long they took; progress and work in flight keep it
// going, so a slow host is never cut off by the wall clock.
func TestAwaitCountsReadsNotSeconds(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := Await(ctx, Poll{What: "nothing came", Every: time.Microsecond, Rounds: 5}, func() (bool, string, error) { n++; return false, "", nil })
	// Running out of reads is the host's failure (a *Failure), not a fault.
	var f *Failure
	if !errors.As(err, &f) || n != 5 {
		t.Fatalf("after %d reads: %v", n, err)
	}
	// Progress on every read: the wait goes on past its rounds.
	n = 0
	if err := Await(ctx, Poll{What: "x", Every: time.Microsecond, Rounds: 3}, func() (bool, string, error) {
		n++
		return n == 50, strconv.Itoa(n), nil
	}); err != nil {
		t.Fatal(err)
	}
	// Work in flight: the wait goes on until it has answered.
	var flying atomic.Int32
	flying.Store(1)
	n = 0
	err = Await(ctx, Poll{What: "x", Every: time.Microsecond, Rounds: 3, InFlight: func() bool { return flying.Load() > 0 }}, func() (bool, string, error) {
		if n++; n == 40 {
			flying.Store(0)
		}
		return false, "", nil
	})
	if err == nil || n < 40 {
		t.Fatalf("gave up after %d reads, while work was in flight until read 40: %v", n, err)
	}
}

// TestAwaitEndsEvenIfEveryReadLooksLikeProgress: a snapshot that changes on
// every read (a timestamp) cannot hold a wait open for ever.
func TestAwaitEndsEvenIfEveryReadLooksLikeProgress(t *testing.T) {
	n := 0
	err := Await(context.Background(), Poll{What: "x", Every: time.Microsecond, Rounds: 3}, func() (bool, string, error) {
		n++
		return false, strconv.Itoa(n), nil
	})
	if err == nil || n != 60 {
		t.Fatalf("after %d reads: %v", n, err)
	}
}
