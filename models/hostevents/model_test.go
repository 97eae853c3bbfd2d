package hostevents

import (
	"errors"
	"fmt"
	"testing"
)

var cfg = Config{
	A2A: Range{Versions: []string{"0.3", "1.0"}, Floor: "0.3", Preferred: "1.0"},
	MCP: Range{Versions: []string{"2025-03-26", "2025-06-18", "2025-11-25"}, Floor: "2025-03-26", Preferred: "2025-11-25"},
}

func TestAnAuthenticatedCallerHasOneAllowedAnswer(t *testing.T) {
	m := New(cfg)
	for _, c := range []struct {
		protocol, named string
		want            Answer
	}{
		{A2A, "", Answer{true, "1.0"}},
		{A2A, "0.2", Answer{}},
		{A2A, "0.3", Answer{true, "0.3"}},
		{A2A, "0.5", Answer{true, "0.3"}},
		{A2A, "2.0", Answer{true, "1.0"}},
		{A2A, "0.10", Answer{true, "0.3"}}, // dotted numbers, not strings
		{MCP, "2024-11-05", Answer{}},
		{MCP, "2025-05-01", Answer{true, "2025-03-26"}},
		{MCP, "2025-06-18", Answer{true, "2025-06-18"}},
		{MCP, "2026-01-01", Answer{true, "2025-11-25"}},
	} {
		got := m.Allowed(Exchange{Tenant: 0, Protocol: c.protocol, Named: c.named})
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s naming %q: allowed %v, want only %v", c.protocol, c.named, got, c.want)
		}
	}
}

func TestAnAnonymousCallerMayBeRefusedOrAnsweredAtPreferred(t *testing.T) {
	m := New(cfg)
	x := Exchange{Tenant: -1, Protocol: A2A, Named: "0.3", Workspace: "w"}
	for _, a := range []Answer{{}, {true, "1.0"}} {
		if err := m.Exchange(x, a); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	if err := m.Exchange(x, Answer{true, "0.3"}); err == nil {
		t.Error("an anonymous caller answered below preferred was allowed")
	}
	if len(m.Log(-1)) != 0 {
		t.Error("an anonymous exchange left a record on a tenant's log")
	}
}

func frame(r *Record, id string) Frame {
	p := map[string]any{"protocol": r.Protocol, "outcome": "accepted", "version": r.Answer.Version, "requested": r.Named}
	if !r.Answer.Accepted {
		p = map[string]any{"protocol": r.Protocol, "outcome": "refused", "reason": "below-floor", "floor": r.Floor, "requested": r.Named}
	}
	env := map[string]any{"eventId": id, "type": "negotiation.decided", "delivery": "durable", "payload": p, "workspaceId": r.Workspace}
	return Frame{Event: "negotiation.decided", ID: id, HasID: true, Env: env, Workspace: r.Workspace}
}

func TestStreamsDeliverTheirTenantsLogAfterTheirStart(t *testing.T) {
	m := New(cfg)
	live, _ := m.Subscribe(0, "")
	for i, n := range []string{"1.0", "0.2", "0.3"} {
		x := Exchange{Tenant: 0, Protocol: A2A, Named: n, Workspace: fmt.Sprint("w", i)}
		if err := m.Exchange(x, m.Allowed(x)[0]); err != nil {
			t.Fatal(err)
		}
	}
	log := m.Log(0)
	for i, r := range log {
		if err := m.Deliver(live, frame(r, fmt.Sprint("e", i))); err != nil {
			t.Fatal(err)
		}
	}
	resumed, err := m.Subscribe(0, "e0")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Pending(resumed); got != 2 {
		t.Fatalf("a stream resumed after the first of three owes %d records, want 2", got)
	}
	if err := m.Deliver(resumed, frame(log[2], "e2")); !errors.Is(err, ErrUnexpected) {
		t.Errorf("a skipped record: %v, want ErrUnexpected", err)
	}
	if err := m.Deliver(resumed, frame(log[1], "e9")); err == nil {
		t.Error("a record delivered under another eventId than at first was accepted")
	}
	if err := m.Deliver(resumed, frame(log[1], "e1")); err != nil {
		t.Error(err)
	}
	if err := m.Deliver(resumed, frame(log[1], "e1")); !errors.Is(err, ErrUnexpected) {
		t.Errorf("a record delivered twice: %v, want ErrUnexpected", err)
	}
	other, _ := m.Subscribe(1, "")
	if err := m.Deliver(other, frame(log[0], "e0")); !errors.Is(err, ErrUnexpected) {
		t.Errorf("another tenant's record: %v, want ErrUnexpected", err)
	}
	if _, err := m.Subscribe(1, "e0"); err == nil {
		t.Error("tenant 1 resumed after tenant 0's record")
	}
}
