package agl

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
)

// leaseWorld is a scenario on fixture agl-core of a run whose fakes serve.
func leaseWorld(t *testing.T, set *fixtures.Set) *steps.World {
	t.Helper()
	return steps.NewWorld(nil, steps.Scenario{ID: t.Name(), Fixture: fixtures.AGLCore, Fixtures: set})
}

func newSet(t *testing.T) *fixtures.Set {
	t.Helper()
	set := fixtures.NewSet(fixtures.Env{Salt: "lease-test"})
	if err := set.ServeFakes(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

func send(t *testing.T, url, account string) {
	t.Helper()
	resp, err := http.Post(url+"/send", "application/json", strings.NewReader(`{"operation_id":"op_1","account":"`+account+`","payload":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// A message the host sends to a scenario's lease under another account's
// name would be counted as that scenario's effect: it is detected, and, the
// suite having handed out each account once, it is the host's misrouting.
func TestAMessageForAnotherLeaseFailsTheHost(t *testing.T) {
	set := newSet(t)
	w := leaseWorld(t, set)
	defer w.Close()
	d, err := leaseDestination(w, fixtures.AGLRosterEmail)
	if err != nil {
		t.Fatal(err)
	}
	s := &state{mail: d}
	send(t, d.url, d.account)
	w.Observe(nil)
	if err := s.leaseCheck(w); err != nil {
		t.Fatalf("a message for the lease's own account: %v", err)
	}
	if n := d.fake.Count(); n != 1 {
		t.Fatalf("the lease's destination counted %d effects, want 1", n)
	}
	other, _ := fixtures.AGLAccount(fixtures.AGLCore, fixtures.AGLRosterEmail, 99)
	send(t, d.url, other)
	var f *steps.Failure
	if err := s.leaseCheck(w); !errors.As(err, &f) || !strings.Contains(f.Msg, other) {
		t.Fatalf("a message for %s at %s's path: want the host's failure naming it, got %v", other, d.account, err)
	}
}

// A request at a lease no running scenario holds (a retry arriving after
// its scenario ended) fails no other scenario.
func TestARequestAtAnUnheldLeaseTouchesNoScenario(t *testing.T) {
	set := newSet(t)
	w := leaseWorld(t, set)
	defer w.Close()
	d, err := leaseDestination(w, fixtures.AGLRosterLedger)
	if err != nil {
		t.Fatal(err)
	}
	s := &state{ledger: d}
	account, path := fixtures.AGLAccount(fixtures.AGLCore, fixtures.AGLRosterLedger, 7)
	send(t, set.Fakes.URL(path), account)
	if err := s.leaseCheck(w); err != nil {
		t.Fatalf("a request at %s, which no scenario holds, failed a scenario that does not hold it: %v", path, err)
	}
	if n := d.fake.Count(); n != 0 {
		t.Fatalf("the scenario's destination counted another lease's request: %d", n)
	}
}

// A lease handed out to two scenarios at once is the suite's fault, caught
// when the second routes it.
func TestALeaseHeldTwiceIsASuiteFault(t *testing.T) {
	set := newSet(t)
	_, path := fixtures.AGLAccount(fixtures.AGLCore, fixtures.AGLRosterEmail, 0)
	if _, err := set.Fakes.Route(path+"/", http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	w := leaseWorld(t, set)
	defer w.Close()
	_, err := leaseDestination(w, fixtures.AGLRosterEmail)
	var sf *steps.SuiteFault
	if !errors.As(err, &sf) || !strings.Contains(sf.Msg, "a lease handed out twice") {
		t.Fatalf("leasing an account another scenario routes: want a suite fault, got %v", err)
	}
}

// Two scenarios never hold one lease: the run hands out each account once.
func TestLeasesAreNeverHandedOutTwice(t *testing.T) {
	set := newSet(t)
	seen := map[string]bool{}
	for i := range 5 {
		w := leaseWorld(t, set)
		d, err := leaseDestination(w, fixtures.AGLRosterEmailDedup)
		if err != nil {
			t.Fatal(err)
		}
		if seen[d.account] {
			t.Fatalf("lease %d: account %s handed out twice", i, d.account)
		}
		seen[d.account] = true
		w.Close()
	}
}
