package contracts

import "testing"

func TestConfirmFirstLifecycle(t *testing.T) {
	m := New(ConfirmFirst, 3)
	must := func(op Op, a Answer) {
		t.Helper()
		if err := m.Apply(op, a); err != nil {
			t.Fatal(err)
		}
	}
	mustNot := func(op Op, a Answer) {
		t.Helper()
		if err := m.Apply(op, a); err == nil {
			t.Fatalf("%+v answered %s was allowed", op, a)
		}
	}
	must(Op{Kind: Gate, Agent: A0, Pair: Room0, Key: 0}, Answer{Status: 461, Contract: "s1"})
	mustNot(Op{Kind: Present, Agent: A1, Contract: "s1"}, Answer{Status: 201, Contract: "s1"})
	must(Op{Kind: Present, Agent: A1, Contract: "s1"}, Answer{Status: 464, Reason: "contract-not-yours"})
	must(Op{Kind: Present, Agent: A0, Contract: "s1"}, Answer{Status: 201, Contract: "s1"})
	// The replay is the cached 461, whatever happened since.
	mustNot(Op{Kind: Replay, Agent: A0, Key: 0}, Answer{Status: 461, Contract: "s2"})
	must(Op{Kind: Replay, Agent: A0, Key: 0}, Answer{Status: 461, Contract: "s1"})
	must(Op{Kind: Gate, Agent: A0, Pair: Room1, Key: -1}, Answer{Status: 461, Contract: "s2"})
	// Three evaluations of agent 0 counted at most: the fourth may be 429.
	must(Op{Kind: Gate, Agent: A0, Pair: Room1, Key: -1}, Answer{Status: 429, Scope: "rcns"})
	mustNot(Op{Kind: Gate, Agent: A1, Pair: Room1, Key: -1}, Answer{Status: 429, Scope: "rcns"})
	// Revoking one contract leaves the other.
	must(Op{Kind: Revoke, Agent: Operator, Contract: "s1"}, Answer{Status: 200})
	must(Op{Kind: Present, Agent: A0, Contract: "s2"}, Answer{Status: 201, Contract: "s2"})
	mustNot(Op{Kind: Present, Agent: A0, Contract: "s1"}, Answer{Status: 404})
	must(Op{Kind: Present, Agent: A0, Contract: "s1"}, Answer{Status: 464, Reason: "contract-revoked"})
	must(Op{Kind: Present, Agent: A0, Contract: "s1"}, Answer{Status: 404})
	// A released id is never issued again.
	must(Op{Kind: Suspend, Agent: A0, Contract: "s2"}, Answer{Status: 200})
	mustNot(Op{Kind: Plain, Agent: A0, Pair: Room1}, Answer{Status: 201, Contract: "s2"})
	must(Op{Kind: Plain, Agent: A1, Pair: Room1}, Answer{Status: 404})
	mustNot(Op{Kind: Gate, Agent: A1, Pair: Room1, Key: -1}, Answer{Status: 461, Contract: "s2"})
	must(Op{Kind: Gate, Agent: A1, Pair: Room1, Key: -1}, Answer{Status: 461, Contract: "s3"})
	must(Op{Kind: Expire}, Answer{Status: 200})
	must(Op{Kind: Present, Agent: A1, Contract: "s3"}, Answer{Status: 464, Reason: "contract-revoked"})
}

func TestOptimisticAndLocks(t *testing.T) {
	m := New(Optimistic, 10)
	if err := m.Apply(Op{Kind: Gate, Agent: A0, Pair: Room0, Key: -1}, Answer{Status: 461, Contract: "s1"}); err == nil {
		t.Fatal("an optimistic host previewed a contract")
	}
	for _, c := range []struct {
		op Op
		a  Answer
	}{
		{Op{Kind: Gate, Agent: A0, Pair: Room0, Key: -1}, Answer{Status: 201, Contract: "s1"}},
		{Op{Kind: Plain, Agent: A0, Pair: Room0}, Answer{Status: 201, Contract: "s1"}},
		{Op{Kind: Plain, Agent: A1, Pair: Room0}, Answer{Status: 464, Reason: "contract-not-yours"}},
		{Op{Kind: Gate, Agent: Tier3, Pair: Room0, Key: -1}, Answer{Status: 464, Reason: "trust-tier-insufficient"}},
		{Op{Kind: Gate, Agent: NoGrant, Pair: Room0, Key: -1}, Answer{Status: 455, Reason: "scope-exceeded"}},
		{Op{Kind: Unclaimed, Agent: A1, Pair: Room0}, Answer{Status: 262, Reason: "scope-required"}},
		{Op{Kind: Gate, Agent: A1, Pair: Desk, Key: -1}, Answer{Status: 464, Reason: "composition-impossible"}},
		{Op{Kind: Suspend, Agent: A1, Contract: "s1"}, Answer{Status: 403}},
		{Op{Kind: Revoke, Agent: A1, Contract: "s1"}, Answer{Status: 403}},
		{Op{Kind: Present, Agent: A0, Contract: "s1"}, Answer{Status: 201, Contract: "s1"}},
		{Op{Kind: Present, Agent: A0, Contract: ""}, Answer{Status: 404}},
	} {
		if err := m.Apply(c.op, c.a); err != nil {
			t.Fatalf("%+v: %v", c.op, err)
		}
	}
}
