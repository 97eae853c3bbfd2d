package target

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// countingStarts is a pool whose hosts are records of their start and stop.
type countingStarts struct {
	mu      sync.Mutex
	started map[string]int
	stopped map[string]int
}

func (c *countingStarts) pool() *pool {
	c.started, c.stopped = map[string]int{}, map[string]int{}
	return &pool{start: func(_ context.Context, cfg Config) (*Host, Stopper, error) {
		c.mu.Lock()
		c.started[cfg.Digest()]++
		c.mu.Unlock()
		return &Host{HTTP: "http://" + cfg.Digest()}, func(bool) error {
			c.mu.Lock()
			c.stopped[cfg.Digest()]++
			c.mu.Unlock()
			return nil
		}, nil
	}}
}

func nthConfig(t *testing.T, n int) Config {
	t.Helper()
	c, err := NewConfig(map[string]any{"f": map[string]any{"n": n}}, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A host no scenario holds is kept for reuse up to idleHosts and stopped
// beyond; a held host is never stopped; the evidence still names every
// configuration a host ran.
func TestPoolStopsIdleHostsBeyondItsBound(t *testing.T) {
	var c countingStarts
	p := c.pool()
	ctx := context.Background()
	held := nthConfig(t, -1)
	if _, err := p.acquire(ctx, held); err != nil {
		t.Fatal(err)
	}
	const n = idleHosts + 10
	for i := range n {
		cfg := nthConfig(t, i)
		if _, err := p.acquire(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p.release(cfg)
	}
	p.stopping.Wait()
	c.mu.Lock()
	stopped := 0
	for i := range n {
		stopped += c.stopped[nthConfig(t, i).Digest()]
	}
	heldStops := c.stopped[held.Digest()]
	c.mu.Unlock()
	if stopped != n-idleHosts || heldStops != 0 {
		t.Fatalf("%d idle hosts stopped (want %d), the held host stopped %d times", stopped, n-idleHosts, heldStops)
	}
	// The most recently released is still warm: asking again starts nothing.
	last := nthConfig(t, n-1)
	if _, err := p.acquire(ctx, last); err != nil {
		t.Fatal(err)
	}
	// The first was stopped: asking again starts it afresh.
	first := nthConfig(t, 0)
	if _, err := p.acquire(ctx, first); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	if c.started[last.Digest()] != 1 || c.started[first.Digest()] != 2 {
		t.Errorf("starts: last %d (want 1), first %d (want 2)", c.started[last.Digest()], c.started[first.Digest()])
	}
	c.mu.Unlock()
	if got := len(p.configurations()); got != n+1 {
		t.Errorf("the evidence names %d configurations, want %d", got, n+1)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, k := range c.started {
		if c.stopped[d] != k {
			t.Errorf("%s: started %d times, stopped %d", d, k, c.stopped[d])
		}
	}
}

// Concurrent scenarios sharing a configuration share one host; it goes idle
// only when the last of them releases it.
func TestPoolCountsHolders(t *testing.T) {
	var c countingStarts
	p := c.pool()
	ctx := context.Background()
	shared := nthConfig(t, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.acquire(ctx, shared); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range 7 {
		p.release(shared)
		for j := range idleHosts + 1 {
			cfg := nthConfig(t, 100*(i+1)+j)
			if _, err := p.acquire(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			p.release(cfg)
		}
	}
	p.stopping.Wait()
	c.mu.Lock()
	if c.started[shared.Digest()] != 1 || c.stopped[shared.Digest()] != 0 {
		t.Fatalf("shared host started %d, stopped %d while still held", c.started[shared.Digest()], c.stopped[shared.Digest()])
	}
	c.mu.Unlock()
	p.release(shared)
	for j := range idleHosts + 1 {
		cfg := nthConfig(t, 10000+j)
		if _, err := p.acquire(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p.release(cfg)
	}
	p.stopping.Wait()
	c.mu.Lock()
	stops := c.stopped[shared.Digest()]
	c.mu.Unlock()
	_ = p.close()
	if stops != 1 {
		t.Fatalf("the shared host, released by all and crowded out, stopped %d times", stops)
	}
}

// A host restarted under a changed configuration is never lent again:
// released, it is stopped; never released (a target nobody releases on),
// the next Acquire of its key retires it. Either way the next host runs the
// key's own configuration, started only once the changed one has stopped;
// the evidence names the changed configuration too.
func TestPoolRetiresAHostRestartedUnderAChangedConfiguration(t *testing.T) {
	for _, released := range []bool{true, false} {
		var c countingStarts
		p := c.pool()
		ctx := context.Background()
		cfg, err := nthConfig(t, 1).WithStateDir("/s")
		if err != nil {
			t.Fatal(err)
		}
		cfg = cfg.WithLane("lane")
		if _, err := p.acquire(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		h, err := p.reconfigure(ctx, cfg, nthConfig(t, 2), true)
		if err != nil {
			t.Fatal(err)
		}
		changed, _ := ChangedRun(cfg, nthConfig(t, 2))
		if h.HTTP != "http://"+changed.Digest() {
			t.Fatalf("the restarted host runs %s, want the changed configuration", h.HTTP)
		}
		if released {
			p.release(cfg)
		}
		n, err := p.acquire(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.stopping.Wait()
		c.mu.Lock()
		stoppedChanged, started := c.stopped[changed.Digest()], c.started[cfg.Digest()]
		c.mu.Unlock()
		if n.HTTP != "http://"+cfg.Digest() || stoppedChanged != 1 || started != 2 {
			t.Fatalf("released %v: the next host is %s; the changed host stopped %d times; the first configuration started %d times", released, n.HTTP, stoppedChanged, started)
		}
		found := false
		for _, k := range p.configurations() {
			found = found || k.Digest() == changed.Digest()
		}
		if !found {
			t.Fatalf("released %v: the evidence does not name the changed configuration", released)
		}
	}
}

// A lane's host crowded out of the idle list stops in the background, and
// the lane's next host opens the same state directory: it starts only once
// the old one has stopped (a WAL lock held by a host still stopping failed
// a CI run's restart scenario).
func TestPoolStartsALaneHostOnlyOnceItsPredecessorStopped(t *testing.T) {
	lane, err := nthConfig(t, -1).WithStateDir("/lane")
	if err != nil {
		t.Fatal(err)
	}
	lane = lane.WithLane("lane")
	var (
		mu    sync.Mutex
		inUse bool // a host of the lane holds its state directory
	)
	gate := make(chan struct{}) // the crowded-out host's stop returns once closed
	p := &pool{start: func(_ context.Context, cfg Config) (*Host, Stopper, error) {
		if cfg.Key() != lane.Key() {
			return &Host{}, func(bool) error { return nil }, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if inUse {
			return nil, nil, errors.New("the state directory is in use by another host")
		}
		inUse = true
		return &Host{}, func(bool) error {
			<-gate
			mu.Lock()
			inUse = false
			mu.Unlock()
			return nil
		}, nil
	}}
	ctx := context.Background()
	if _, err := p.acquire(ctx, lane); err != nil {
		t.Fatal(err)
	}
	p.release(lane)
	for i := range idleHosts {
		cfg := nthConfig(t, i)
		if _, err := p.acquire(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p.release(cfg)
	}
	got := make(chan error, 1)
	go func() {
		_, err := p.acquire(ctx, lane)
		got <- err
	}()
	// Wait until the acquire has taken its key; a pool that makes it wait
	// has recorded the stop it waits on by then.
	var waits bool
	for {
		p.mu.Lock()
		_, taken := p.entries[lane.Key()]
		waits = p.retiring[lane.Key()] != nil
		p.mu.Unlock()
		if taken {
			break
		}
		runtime.Gosched()
	}
	if !waits {
		// The new host starts (or has started) while the old one is held
		// at the gate: it must have been refused the directory.
		err := <-got
		close(gate)
		p.stopping.Wait()
		t.Fatalf("the lane's next host started while its predecessor was still stopping (start said: %v)", err)
	}
	close(gate)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
}
