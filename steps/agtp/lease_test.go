package agtp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestSeeingAnotherLeasesStateIsASuiteFault: two scenarios on one fixture
// host that were lent the same identity (two fixture sets of one salt each
// hand out the first identity of a roster, as a lease handed out twice
// would) see each other's state. The second scenario's DISCOVER /contracts
// lists the first's contract under its own identity: that is a suite
// fault, never the host's failure. A scenario whose identity is its own
// lists nothing of the other's, and reads the listing without a fault.
func TestSeeingAnotherLeasesStateIsASuiteFault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a reference host")
	}
	env, err := fixtures.NewEnv("")
	if err != nil {
		t.Fatal(err)
	}
	first, second := fixtures.NewSet(env), fixtures.NewSet(env)
	tgt := target.NewRefhost()
	defer tgt.Close()
	const fixture = "agtp-confirm-first"

	scenario := func(id string, set *fixtures.Set) (context.Context, *steps.World) {
		w := steps.NewWorld(tgt, steps.Scenario{ID: id, Fixture: fixture, Fixtures: set,
			ReqIDs: []string{"agtp.inventory.contracts-own"}})
		t.Cleanup(func() { w.Release(); w.Close() })
		ctx := steps.With(context.Background(), w)
		s := st(ctx)
		if _, err := s.fixture(ctx); err != nil {
			t.Fatal(err)
		}
		s.transport = TransportTLS
		if _, err := s.lease(ctx, "alice", 1, []string{"rooms:*", "rcns:negotiate"}); err != nil {
			t.Fatal(err)
		}
		return ctx, w
	}

	ctxA, _ := scenario("a", first)
	if err := holdContract(ctxA, "alice", "BOOK", "/room/{room}", "mine"); err != nil {
		t.Fatal(err)
	}
	// The control: the same fixture set lends the next identity, which
	// made nothing; its listing holds no one else's contract.
	ctxC, _ := scenario("c", first)
	if err := listContracts(ctxC, "alice"); err != nil {
		t.Fatalf("a scenario with an identity of its own: %v", err)
	}

	ctxB, wB := scenario("b", second)
	if st(ctxB).agents["alice"].id != st(ctxA).agents["alice"].id {
		t.Fatal("the two sets did not lend the same identity")
	}
	err = listContracts(ctxB, "alice")
	var fault *steps.SuiteFault
	if !errors.As(err, &fault) || !strings.Contains(fault.Msg, "saw another lease's state") || !strings.Contains(fault.Msg, st(ctxA).named["mine"]) {
		t.Fatalf("listing another lease's contract under the scenario's identity: %v, want a suite fault naming %s", err, st(ctxA).named["mine"])
	}
	_ = wB.Settle(err)
	if o := wB.Outcome(); o == nil || o.Verdict != verdict.Blocked || o.Cause != verdict.CauseSuiteFault {
		t.Fatalf("the scenario's outcome is %+v, want blocked (suite-fault)", o)
	}
}
