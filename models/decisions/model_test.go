package decisions

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestTheRepairBudgetIsPerSessionAndPlanHash(t *testing.T) {
	m := New(2)
	a, b := Request{Variant: VRepair}, Request{Variant: VRepair, Hash: 1}
	for i, id := range []string{"1", "2"} {
		if err := m.Post(a, id, Repair, "contract: provenance_missing", nil); err != nil {
			t.Fatalf("repair %d: %v", i+1, err)
		}
	}
	if got := m.Allowed(a); !slices.Equal(got, []string{Pass, Deny}) {
		t.Errorf("a spent budget allows %v, want anything but repair_required", got)
	}
	if err := m.Post(a, "3", Repair, "", nil); err == nil {
		t.Error("a third repair_required on a budget of 2 was allowed")
	}
	if got := m.Allowed(b); !slices.Equal(got, []string{Repair}) {
		t.Errorf("another plan hash allows %v, want its own budget", got)
	}
	if err := m.Post(Request{Variant: VPass}, "1", Pass, "", nil); err == nil {
		t.Error("a preflight_id issued twice was allowed")
	}
	if err := m.Post(Request{Variant: VNoHash}, "4", Deny, "contract: other", nil); err == nil {
		t.Error("a missing plan hash denied for another reason was allowed")
	}
}

func TestOnlyAPassBindsItsKind(t *testing.T) {
	m := New(2)
	_ = m.Post(Request{Variant: VPass}, "p", Pass, "", nil)
	_ = m.Post(Request{Variant: VDeliver}, "d", Pass, "", nil)
	_ = m.Post(Request{Variant: VRepair}, "r", Repair, "", nil)
	for id, want := range map[string]bool{"p": true, "d": false, "r": false, "x": false} {
		if got := m.Runs(id, "tool.echo"); got != want {
			t.Errorf("tool.echo bound to %s runs %v, want %v", id, got, want)
		}
	}
}

func doc(id, audit, outcome string, hints int) map[string]any {
	h := make([]any, hints)
	for i := range h {
		h[i] = map[string]any{"op": "set"}
	}
	d := map[string]any{"preflight_id": id, "audit_id": audit, "outcome": outcome, "reason": "contract: passed",
		"execution_eligibility": map[string]any{"expires_at": ""}}
	if hints > 0 {
		d["repair_hints"] = h
	}
	return d
}

func TestTheLadderDecidesEachCall(t *testing.T) {
	req := []string{"tool.deliver"}
	for _, c := range []struct {
		mode, id, kind string
		status         int
		runs           bool
		deny, allow    int
	}{
		{Enforce, "p", "tool.echo", 200, true, MustNot, Must},
		{Enforce, "p", "tool.deliver", 403, false, Must, MustNot},
		{Enforce, "d", "tool.deliver", 200, true, MustNot, Must},
		{Enforce, "r", "tool.echo", 403, false, Must, MustNot},
		{Enforce, "x", "tool.echo", 403, false, Must, MustNot},
		{Enforce, "", "tool.deliver", 403, false, Must, MustNot},
		{Enforce, "", "tool.echo", 200, true, May, May},
		{Advisory, "p", "tool.echo", 200, true, MustNot, Must},
		{Advisory, "p", "tool.deliver", 200, true, Must, May},
		{Advisory, "r", "tool.echo", 200, true, Must, May},
		{Advisory, "x", "tool.deliver", 200, true, Must, May},
		{Advisory, "", "tool.deliver", 200, true, May, May},
		{Disabled, "x", "tool.deliver", 200, true, May, May},
	} {
		m := NewIn(c.mode, 2, req)
		if m.Decides() {
			_ = m.Post(Request{Variant: VPass}, "p", Pass, "", doc("p", "ap", Pass, 0))
			_ = m.Post(Request{Variant: VDeliver}, "d", Pass, "", doc("d", "ad", Pass, 0))
			_ = m.Post(Request{Variant: VRepair}, "r", Repair, "", doc("r", "ar", Repair, 1))
		}
		a := m.Call(c.id, c.kind)
		if a.Status != c.status || a.Runs != c.runs || a.Deny != c.deny || a.Allow != c.allow {
			t.Errorf("%s, %s bound to %q: %+v, want status %d runs %v deny %d allow %d", c.mode, c.kind, c.id, a, c.status, c.runs, c.deny, c.allow)
		}
		if _, issued := m.Lookup(c.id); issued && a.AuditID != "a"+c.id {
			t.Errorf("%s, %s bound to %q: audit_id %q, want the preflight's", c.mode, c.kind, c.id, a.AuditID)
		}
	}
	if NewIn(Disabled, 0, nil).Decides() || !NewIn(Advisory, 2, nil).Decides() {
		t.Error("only disabled refuses to decide")
	}
}

func TestCallFramesAgreeWithTheAnswer(t *testing.T) {
	m := NewIn(Advisory, 2, []string{"tool.deliver"})
	_ = m.Post(Request{Variant: VPass}, "p", Pass, "", doc("p", "ap", Pass, 0))
	fail := m.Call("p", "tool.deliver")
	deny := CallFrame{ToolKind: "tool.deliver", Outcome: "deny", AuditID: "ap"}
	allow := CallFrame{ToolKind: "tool.deliver", Outcome: "allow", AuditID: "ap"}
	if err := CheckCallFrames(fail, "tool.deliver", "p", []CallFrame{deny, allow}); err != nil {
		t.Errorf("a deny and an allow frame for an advisory binding failure: %v", err)
	}
	for what, fs := range map[string][]CallFrame{
		"no frame":         nil,
		"only an allow":    {allow},
		"deny, no audit":   {{ToolKind: "tool.deliver", Outcome: "deny"}},
		"deny, wrong kind": {{ToolKind: "tool.echo", Outcome: "deny", AuditID: "ap"}},
		"odd outcome":      {{ToolKind: "tool.deliver", Outcome: "maybe", AuditID: "ap"}},
	} {
		if err := CheckCallFrames(fail, "tool.deliver", "p", fs); err == nil {
			t.Errorf("%s for an advisory binding failure was allowed", what)
		}
	}
	ok := m.Call("p", "tool.echo")
	if err := CheckCallFrames(ok, "tool.echo", "p", []CallFrame{{ToolKind: "tool.echo", Outcome: "deny", AuditID: "ap"}, {ToolKind: "tool.echo", Outcome: "allow", AuditID: "ap"}}); err == nil {
		t.Error("a deny frame for a call its binding binds was allowed")
	}
	// Both readings of a call missing a required preflight in advisory.
	missing := m.Call("", "tool.deliver")
	for _, fs := range [][]CallFrame{{{ToolKind: "tool.deliver", Outcome: "deny"}}, {{ToolKind: "tool.deliver", Outcome: "allow"}}} {
		if err := CheckCallFrames(missing, "tool.deliver", "", fs); err != nil {
			t.Errorf("a reading the text allows was refused: %v", err)
		}
	}
	ign := NewIn(Disabled, 0, nil).Call("x-1", "tool.echo")
	if err := CheckCallFrames(ign, "tool.echo", "x-1", []CallFrame{{ToolKind: "tool.echo", Outcome: "allow", Raw: []byte(`{"preflight_id":"x-1"}`)}}); err == nil {
		t.Error("a disabled host's frame naming the ignored id was allowed")
	}
}

func TestThePreflightFrameAgreesWithItsDecision(t *testing.T) {
	m := New(2)
	d := doc("r", "ar", Repair, 1)
	_ = m.Post(Request{Variant: VRepair}, "r", Repair, "", d)
	x, _ := m.Lookup("r")
	dj, _ := json.Marshal(d)
	good := func() map[string]any {
		return map[string]any{"preflight_id": "r", "audit_id": "ar", "outcome": Repair, "reason": "contract: passed",
			"capability": "tool.echo", "plan_hash": "blake3:h", "lock_fingerprint": "blake3:live", "expires_at": "",
			"repair_hints_count": float64(1), "decision_json": string(dj)}
	}
	if err := CheckPreflightFrame(x, "tool.echo", "blake3:h", "blake3:live", []map[string]any{good()}); err != nil {
		t.Fatalf("the faithful frame: %v", err)
	}
	if err := CheckPreflightFrame(x, "tool.echo", "blake3:h", "blake3:live", []map[string]any{good(), good()}); err == nil {
		t.Error("two frames for one decision were allowed")
	}
	for attr, v := range map[string]any{"outcome": Pass, "audit_id": "other", "lock_fingerprint": "blake3:built", "plan_hash": "blake3:g",
		"repair_hints_count": float64(0), "decision_json": `{"outcome":"pass"}`, "capability": "tool.deliver"} {
		f := good()
		f[attr] = v
		if err := CheckPreflightFrame(x, "tool.echo", "blake3:h", "blake3:live", []map[string]any{f}); err == nil {
			t.Errorf("a frame whose %s is %v was allowed", attr, v)
		}
	}
	f := good()
	delete(f, "plan_hash")
	if err := CheckPreflightFrame(x, "tool.echo", "", "blake3:live", []map[string]any{f}); err != nil {
		t.Errorf("a frame without plan_hash for a request naming none: %v", err)
	}
}
