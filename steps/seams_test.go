package steps

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// seamTarget hands out one server for any configuration, except that it
// answers a configuration with seams with seamErr when that is set.
type seamTarget struct {
	url     string
	seamErr error

	mu    sync.Mutex
	asked []target.Config
}

func (t *seamTarget) Kind() string { return "test" }
func (t *seamTarget) Acquire(_ context.Context, cfg target.Config) (*target.Host, error) {
	t.mu.Lock()
	t.asked = append(t.asked, cfg)
	t.mu.Unlock()
	if cfg.Seams() && t.seamErr != nil {
		return nil, t.seamErr
	}
	return &target.Host{HTTP: t.url, Config: cfg}, nil
}
func (t *seamTarget) Configurations() []target.Config { return nil }
func (t *seamTarget) Subject() target.Subject         { return target.Subject{} }
func (t *seamTarget) Close() error                    { return nil }

// seamServer answers every request with the status it holds, counting them.
func seamServer(t *testing.T) (srv *httptest.Server, status, calls *atomic.Int32) {
	status, calls = new(atomic.Int32), new(atomic.Int32)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	return srv, status, calls
}

// seamed is a World on tgt whose fixture has the seams on.
func seamed(t *testing.T, tgt *seamTarget) *World {
	t.Helper()
	return onFixture(t, tgt, testSet(t), "stepstest-seams")
}

// TestAnOptionalSeamIsCalledOnlyWhereItCanBe holds OptionalSeam to its
// contract: a host with seams has its seam called, a missing one reads as
// absent and an erring one is the caller's to judge; a host with no HTTP
// surface has no seam to call; a host that fails to start has failed.
func TestAnOptionalSeamIsCalledOnlyWhereItCanBe(t *testing.T) {
	srv, status, calls := seamServer(t)
	world := func(tgt *seamTarget) (*World, context.Context) {
		return seamed(t, tgt), context.Background()
	}
	seam := func(w *World, ctx context.Context) (*Response, bool, error) {
		return w.OptionalSeam(ctx, http.MethodPost, "/conformance/seams/agtp/clock/advance", []byte(`{"seconds":2.5}`), nil)
	}

	for _, tc := range []struct {
		status int
		ok     bool
	}{{http.StatusOK, true}, {http.StatusInternalServerError, true}, {http.StatusNotFound, false}, {http.StatusNotImplemented, false}} {
		tgt := &seamTarget{url: srv.URL}
		w, ctx := world(tgt)
		status.Store(int32(tc.status))
		calls.Store(0)
		r, ok, err := seam(w, ctx)
		if err != nil || ok != tc.ok || calls.Load() != 1 || (ok && r.Status != tc.status) {
			t.Errorf("a seam answering %d: OptionalSeam = %v, %v after %d call(s); want ok=%v after one", tc.status, ok, err, calls.Load(), tc.ok)
		}
		if len(tgt.asked) != 1 || !tgt.asked[0].Seams() {
			t.Errorf("a host that takes seams was asked %d configuration(s); want the one with seams", len(tgt.asked))
		}
	}

	// A host that took seams but serves no HTTP has no seam to call.
	{
		tgt := &seamTarget{url: ""}
		w, ctx := world(tgt)
		calls.Store(0)
		r, ok, err := seam(w, ctx)
		if err != nil || ok || r != nil || calls.Load() != 0 {
			t.Errorf("a host without an HTTP surface: OptionalSeam = %v, %v, %v; want no seam and no call", r, ok, err)
		}
	}

	tgt := &seamTarget{url: srv.URL, seamErr: &target.StartError{Config: "x", Reason: "exited with status 1"}}
	w, ctx := world(tgt)
	_, _, err := seam(w, ctx)
	var f *Failure
	if !errors.As(err, &f) || !f.NotStarted || len(tgt.asked) != 1 {
		t.Errorf("a host that does not start with seams: %v after %d configuration(s); want the host's failure, with no retry", err, len(tgt.asked))
	}
}

// TestASeamWithoutAnHTTPSurfaceIsAbsent: a host started with seams whose
// ready line names no HTTP address has no seam, which blocks as a 404 at
// the seam's path does; an erring seam is answered to the caller to judge.
func TestASeamWithoutAnHTTPSurfaceIsAbsent(t *testing.T) {
	srv, status, _ := seamServer(t)
	for _, tc := range []struct {
		url     string
		status  int
		blocked bool
	}{{"", 0, true}, {srv.URL, http.StatusNotFound, true}, {srv.URL, http.StatusInternalServerError, false}} {
		status.Store(int32(tc.status))
		w := seamed(t, &seamTarget{url: tc.url})
		r, err := w.Seam(context.Background(), http.MethodPut, "/conformance/seams/agtp/recipes/x", nil, nil)
		var b *Blocked
		switch {
		case tc.blocked && (!errors.As(err, &b) || b.Cause != verdict.CauseSeamAbsent):
			t.Errorf("http %q answering %d: %v, want blocked (seam absent)", tc.url, tc.status, err)
		case !tc.blocked && (err != nil || r.Status != tc.status):
			t.Errorf("http %q answering %d: %v, %v; want the answer", tc.url, tc.status, r, err)
		}
	}
}

// TestPassTimeMovesTheClockOrWaits: with the clock seam, time passes
// through it and an erring seam is the host's failure; with no such seam,
// or a configuration without seams, the suite waits the time out in real
// time (and, without seams, calls nothing). Only the real wait is timed: it
// lasts at least d however busy the machine is.
func TestPassTimeMovesTheClockOrWaits(t *testing.T) {
	srv, status, calls := seamServer(t)
	const d = 300 * time.Millisecond
	for _, tc := range []struct {
		seams  bool
		status int
		fails  bool
		waits  bool
	}{
		{true, http.StatusOK, false, false},
		{true, http.StatusInternalServerError, true, false},
		{true, http.StatusNotFound, false, true},
		{false, http.StatusOK, false, true},
	} {
		status.Store(int32(tc.status))
		calls.Store(0)
		name := "stepstest-host"
		if tc.seams {
			name = "stepstest-seams"
		}
		w := onFixture(t, &seamTarget{url: srv.URL}, testSet(t), name)
		start := time.Now()
		err := w.PassTime(context.Background(), d, "/conformance/seams/agtp/clock/advance", []byte(`{"seconds":0.3}`), nil)
		took := time.Since(start)
		var f *Failure
		if tc.fails != errors.As(err, &f) || (!tc.fails && err != nil) {
			t.Errorf("seams=%v, seam answering %d: %v; want a failure: %v", tc.seams, tc.status, err, tc.fails)
		}
		if tc.waits && took < d {
			t.Errorf("seams=%v, seam answering %d: took %v; want a real wait of %v", tc.seams, tc.status, took, d)
		}
		if tc.seams && calls.Load() != 1 {
			t.Errorf("seams answering %d: the clock seam was called %d times, want once", tc.status, calls.Load())
		}
		if !tc.seams && calls.Load() != 0 {
			t.Errorf("a host without seams had its clock seam called")
		}
	}
}
