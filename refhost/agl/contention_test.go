package agl

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestManyConcurrentDispatchesOfOnePermitInOneHost: more contenders than the
// store's connection pool. A loser refused inside the claim transaction must
// not need a second connection while it holds the write lock, or the pool
// starves until the busy timeout.
func TestManyConcurrentDispatchesOfOnePermitInOneHost(t *testing.T) {
	th := newTestHost(t, nil)
	registerAll(t, th.c)
	s := newScenario(t, th.c, []string{sendOp})
	for trial := 0; trial < 5; trial++ {
		_, handle := s.draft(t)
		_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
		start := time.Now()
		var wg sync.WaitGroup
		gate := make(chan struct{})
		results := make([]resp, 16)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				results[i] = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
			}()
		}
		close(gate)
		wg.Wait()
		ok := 0
		for _, r := range results {
			if r.Status == 200 {
				ok++
			} else {
				require.Equal(t, 409, r.Status, string(r.Raw))
			}
		}
		require.Equal(t, 1, ok)
		require.Less(t, time.Since(start), 5*time.Second, "contended claims must not starve the connection pool")
	}
	require.Equal(t, 5, th.email.Count())
}
