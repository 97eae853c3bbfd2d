package decisions

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Frame presence, where the text leaves it open or fixes it.
const (
	MustNot = iota // no frame of that outcome
	May            // either (the text allows both readings)
	Must           // at least one
)

// CallAnswer is what the model allows a /v1/tool call: its status, whether
// its effect happens, and the autonomy.decision frames it leaves.
type CallAnswer struct {
	Status int  // 200 or 403
	Runs   bool // its effect happens (tool.echo echoes, tool.deliver delivers once)
	// Deny and Allow say whether the call's frames include one with that
	// outcome (Must, May or MustNot).
	Deny, Allow int
	// AuditID, when set, is the audit_id of the preflight the header names:
	// at least one of the call's frames carries it.
	AuditID string
	// Ignored: the header is ignored entirely (disabled), so no frame of
	// the call mentions the id it named.
	Ignored bool
	// Why says, for a failure message, which rule gave this answer.
	Why string
}

// Call is what the model allows a call of kind whose header names id (""
// for a call without the header).
//
//   - disabled: the header is ignored; the call is decided by policy (every
//     kind the model calls is allowed), its frames mention no id;
//   - enforce: a call the header does not bind, or without the header for a
//     kind the bundle requires, is refused 403 before it runs and recorded
//     as a deny; a bound call runs and is recorded as an allow;
//   - advisory: a binding failure is recorded as a deny and the call
//     continues to policy (it runs); a call without the header for a
//     required kind runs, and whether it leaves a deny frame is open
//     (docs/interpretations.md, "A required preflight in advisory").
func (m *Model) Call(id, kind string) CallAnswer {
	audit := ""
	if d, ok := m.byID[id]; ok {
		audit = auditOf(d.Doc)
	}
	required := slices.Contains(m.requires, kind)
	switch m.mode {
	case Disabled:
		return CallAnswer{Status: 200, Runs: true, Deny: May, Allow: May, Ignored: true, Why: "disabled ignores the header"}
	case Advisory:
		switch {
		case id == "" && required:
			return CallAnswer{Status: 200, Runs: true, Deny: May, Allow: May, Why: "advisory lets a call missing a required preflight continue to policy"}
		case id == "":
			return CallAnswer{Status: 200, Runs: true, Deny: May, Allow: May, Why: "a call without a header for a kind no bundle requires goes to policy"}
		case m.Binds(id, kind):
			return CallAnswer{Status: 200, Runs: true, Deny: MustNot, Allow: Must, AuditID: audit, Why: "a pass binding the kind binds the call"}
		default:
			return CallAnswer{Status: 200, Runs: true, Deny: Must, Allow: May, AuditID: audit, Why: "advisory records a binding failure as a deny frame and continues to policy"}
		}
	default: // enforce
		switch {
		case id == "" && required:
			return CallAnswer{Status: 403, Deny: Must, Allow: MustNot, Why: "enforce refuses a call missing a preflight its bundle requires"}
		case id == "":
			return CallAnswer{Status: 200, Runs: true, Deny: May, Allow: May, Why: "a call without a header for a kind no bundle requires goes to policy"}
		case m.Binds(id, kind):
			return CallAnswer{Status: 200, Runs: true, Deny: MustNot, Allow: Must, AuditID: audit, Why: "a pass binding the kind binds the call"}
		default:
			return CallAnswer{Status: 403, Deny: Must, Allow: MustNot, AuditID: audit, Why: "enforce refuses a call its header does not bind"}
		}
	}
}

// CallFrame is one autonomy.decision frame a call left.
type CallFrame struct {
	ToolKind, Outcome, AuditID string
	Raw                        []byte
}

// CheckCallFrames checks the autonomy.decision frames a call of kind,
// whose header named id, left (those its agent's WAL gained during the
// call) against the answer the model allows: at least one frame (every
// call is recorded, in every mode), each of the call's kind with outcome
// allow or deny, deny and allow frames as required, the preflight's
// audit_id on one of them, and none mentioning an ignored id.
func CheckCallFrames(a CallAnswer, kind, id string, fs []CallFrame) error {
	if len(fs) == 0 {
		return fmt.Errorf("the call left no autonomy.decision frame (every /v1/tool call is recorded)")
	}
	var deny, allow, audit int
	var outcomes []string
	for _, f := range fs {
		outcomes = append(outcomes, f.Outcome)
		if f.ToolKind != kind {
			return fmt.Errorf("the call's frame names tool_kind %q, want %q: %s", f.ToolKind, kind, f.Raw)
		}
		switch f.Outcome {
		case "deny":
			deny++
		case "allow":
			allow++
		default:
			return fmt.Errorf("the call's frame has outcome %q, want allow or deny: %s", f.Outcome, f.Raw)
		}
		if a.AuditID != "" && f.AuditID == a.AuditID {
			audit++
		}
		if a.Ignored && id != "" && strings.Contains(string(f.Raw), id) {
			return fmt.Errorf("the header was not ignored: the call's frame mentions the id it named: %s", f.Raw)
		}
	}
	for _, c := range []struct {
		what string
		want int
		n    int
	}{{"deny", a.Deny, deny}, {"allow", a.Allow, allow}} {
		switch {
		case c.want == Must && c.n == 0:
			return fmt.Errorf("the call left no %s frame (%s); its frames' outcomes: %v", c.what, a.Why, outcomes)
		case c.want == MustNot && c.n > 0:
			return fmt.Errorf("the call left a %s frame (%s); its frames' outcomes: %v", c.what, a.Why, outcomes)
		}
	}
	if a.AuditID != "" && audit == 0 {
		return fmt.Errorf("no frame of the call carries the audit_id %s of the preflight its header named; its frames: %d", a.AuditID, len(fs))
	}
	return nil
}

// CheckPreflightFrame checks the autonomy.preflight frames that name the
// decision's preflight_id (attrs decoded from JSON): exactly one, whose
// attributes agree with the decision POST answered and the request sent
// ("WAL event": outcome, reason, audit_id, expires_at, repair_hints_count
// and decision_json from the decision; plan_hash and capability from the
// request; lock_fingerprint the host's live one, when live is set).
func CheckPreflightFrame(d *Decision, capability, planHash, live string, frames []map[string]any) error {
	if len(frames) != 1 {
		return fmt.Errorf("%d autonomy.preflight frames name preflight_id %s, want exactly one", len(frames), d.ID)
	}
	a := frames[0]
	doc, _ := d.Doc.(map[string]any)
	str := func(m map[string]any, k string) (string, bool) { v, ok := m[k].(string); return v, ok }
	want := map[string]string{"preflight_id": d.ID, "outcome": d.Outcome, "capability": capability}
	for _, k := range []string{"audit_id", "reason"} {
		want[k], _ = str(doc, k)
	}
	if el, ok := doc["execution_eligibility"].(map[string]any); ok {
		want["expires_at"], _ = str(el, "expires_at")
	}
	if live != "" {
		want["lock_fingerprint"] = live
	}
	if planHash != "" {
		want["plan_hash"] = planHash
	}
	for _, k := range sortedKeys(want) {
		if got, ok := str(a, k); !ok || got != want[k] {
			return fmt.Errorf("the frame's %s is %v, the %s says %q", k, a[k], source(k), want[k])
		}
	}
	if planHash == "" {
		// The text carries the plan hash "when present": absent, or empty.
		if v, ok := a["plan_hash"]; ok && v != "" {
			return fmt.Errorf("the frame's plan_hash is %v for a request that named none", v)
		}
	}
	hints, _ := doc["repair_hints"].([]any)
	if n, ok := a["repair_hints_count"].(float64); !ok || int(n) != len(hints) {
		return fmt.Errorf("the frame's repair_hints_count is %v, the decision has %d hints", a["repair_hints_count"], len(hints))
	}
	dj, _ := str(a, "decision_json")
	var got any
	if json.Unmarshal([]byte(dj), &got) != nil || !reflect.DeepEqual(got, d.Doc) {
		return fmt.Errorf("the frame's decision_json is not the decision POST answered: %s", dj)
	}
	return nil
}

func source(attr string) string {
	switch attr {
	case "capability", "plan_hash":
		return "request"
	case "lock_fingerprint":
		return "host's live configuration"
	}
	return "decision"
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func auditOf(doc any) string {
	m, _ := doc.(map[string]any)
	s, _ := m["audit_id"].(string)
	return s
}
