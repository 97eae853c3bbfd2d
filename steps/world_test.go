package steps

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// hostAt makes a World whose target is a url host at u.
func hostAt(t testing.TB, u string) (*World, context.Context) {
	t.Helper()
	set := testSet(t)
	return onFixture(t, deployedAt(t, u, set, "stepstest-host"), set, "stepstest-host"), context.Background()
}

func TestAHungHostCannotHangTheSuite(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	w, ctx := hostAt(t, srv.URL)
	w.HTTP.Timeout = 200 * time.Millisecond
	// The host holds until release, after this: only the deadline can end
	// the exchange, however long a busy machine takes to get there.
	_, err := w.Do(ctx, http.MethodGet, "/", nil, nil)
	if err == nil {
		t.Fatal("a host that never answers produced no error")
	}
}

func TestAFloodingHostIsCutOff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < (MaxBodyBytes/len(chunk))+4; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	w, ctx := hostAt(t, srv.URL)
	_, err := w.Do(ctx, http.MethodGet, "/", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("want a body-limit error, got %v", err)
	}
}

func TestAnUnsatisfiableConfigurationBlocks(t *testing.T) {
	set := testSet(t)
	w := onFixture(t, deployedAt(t, "http://127.0.0.1:1", set, "stepstest-seams"), set, "stepstest-host")
	_, err := w.Host(context.Background())
	if err == nil {
		t.Fatal("want an error")
	}
	_ = w.Settle(err)
	if o := w.Outcome(); o == nil || o.Verdict != verdict.Blocked || o.Cause != verdict.CauseTarget {
		t.Fatalf("want blocked (target-cannot-provide), got %+v", o)
	}
}

func TestAssertCountsOnlyAfterObservingTheHostAndFailsAsTheHosts(t *testing.T) {
	w := NewWorld(nil, Scenario{})
	ok := true
	if err := w.Assert(ok, "fine"); err != nil {
		t.Fatal(err)
	}
	if w.Assertions() != 0 {
		t.Fatalf("an assertion before anything was observed of the host counted")
	}
	w.Observe(&Response{Method: "GET", URL: "/", Status: 200})
	_ = w.Assert(ok, "fine")
	err := w.Assert(!ok, "broken %d", 7)
	var f *Failure
	if !errors.As(err, &f) || f.Msg != "broken 7" || f.Exchange == nil {
		t.Fatalf("want a Failure naming the exchange, got %#v", err)
	}
	if w.Assertions() != 2 {
		t.Fatalf("counted %d assertions, want 2", w.Assertions())
	}
}

func TestIsUUIDv4(t *testing.T) {
	for s, want := range map[string]bool{
		"3f1c2a9e-8b7d-4c6e-9a5f-0d1e2f3a4b5c": true,
		"3f1c2a9e-8b7d-1c6e-9a5f-0d1e2f3a4b5c": false, // version 1
		"3f1c2a9e-8b7d-4c6e-7a5f-0d1e2f3a4b5c": false, // not the RFC 4122 variant
		"3F1C2A9E-8B7D-4C6E-9A5F-0D1E2F3A4B5C": true,  // case does not change a UUID
		"not-a-uuid":                           false,
	} {
		if IsUUIDv4(s) != want {
			t.Errorf("IsUUIDv4(%q) != %v", s, want)
		}
	}
}

// A scenario that names no fixture is parley's fault, never the host's.
func TestAScenarioWithoutAFixtureIsASuiteFault(t *testing.T) {
	w := NewWorld(&target.URL{HTTP: "http://127.0.0.1:1"}, Scenario{})
	_, err := w.Host(context.Background())
	var f *SuiteFault
	if !errors.As(err, &f) {
		t.Fatalf("want a suite fault, got %v", err)
	}
}

// isolatedTarget hands out a host in a network namespace of its own.
type isolatedTarget struct{ target.URL }

func (t *isolatedTarget) Acquire(ctx context.Context, cfg target.Config) (*target.Host, error) {
	h, err := t.URL.Acquire(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := *h
	c.Isolated = true
	return &c, nil
}

func TestACallbackScenarioIsBlockedOnAnIsolatedHost(t *testing.T) {
	set := testSet(t)
	for _, order := range []string{"callback first", "host first"} {
		w := onFixture(t, &isolatedTarget{*deployedAt(t, "http://127.0.0.1:1", set, "stepstest-host")}, set, "stepstest-host")
		var err error
		if order == "callback first" {
			_ = w.CallsBack()
			_, err = w.Host(context.Background())
		} else {
			if _, err := w.Host(context.Background()); err != nil {
				t.Fatal(err)
			}
			err = w.CallsBack()
		}
		_ = w.Settle(err)
		if o := w.Outcome(); err == nil || o == nil || o.Verdict != verdict.Blocked || o.Cause != verdict.CauseTarget {
			t.Fatalf("%s: want blocked, got %v / %+v", order, err, o)
		}
	}
}

// A scenario that restarts its host under a changed configuration is
// blocked, with the target's reason, on a target that cannot (a url host
// answers that it cannot), never failed.
func TestARestartUnderAChangedConfigurationBlocksWhereTheTargetCannot(t *testing.T) {
	set := testSet(t)
	w := onFixture(t, deployedAt(t, "http://127.0.0.1:1", set, "stepstest-host"), set, "stepstest-host")
	if err := w.KeepState(); err != nil {
		t.Fatal(err)
	}
	if err := w.ChangeAtRestart(func(c target.Config) (target.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	err := w.Restart(context.Background(), true)
	_ = w.Settle(err)
	if o := w.Outcome(); err == nil || o == nil || o.Verdict != verdict.Blocked || o.Cause != verdict.CauseTarget || !errors.Is(err, target.ErrCannotReconfigure) {
		t.Fatalf("want blocked (target-cannot-provide) because the target cannot reconfigure, got %v / %+v", err, o)
	}
}
