// Package revisions is a sequential model of one AGL resource (an email
// draft) whose revisions move by compare-and-swap (agl-behavioral-contracts.txt
// §6.3 the revision/state check inside the claim, §9 the runtime
// compare-and-swap on the resource revision, and the binding in
// docs/hosts/agl.md §8-§10), against which a concurrent history of edits,
// proposals, dispatches and reads of that resource is checked for
// linearizability with porcupine (models/permits draws and judges it).
//
// The model: the resource is at a revision, in a state. Of the transitions
// that start from one revision at most one takes effect:
//
//   - an edit expecting the current revision, of a draft not yet
//     dispatched, makes revision n+1 in Draft (200 with that revision);
//     expecting another revision it is refused 409 stale_revision, and a
//     dispatched draft refuses it 409 invalid_protocol_state (either when
//     both hold);
//   - a proposal with the handle of the current revision of a draft in
//     Draft moves it to Proposed (201); otherwise it is refused 409
//     stale_revision or invalid_protocol_state;
//   - a dispatch of the permit of the current revision of an Authorized
//     draft claims it (200), the draft dispatched; otherwise it is refused
//     409 stale_revision or invalid_protocol_state, or permit_consumed once
//     the draft was dispatched;
//   - a read answers the current revision and state (a dispatched draft
//     reads Dispatching or one of the outcomes).
package revisions

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Kinds of call.
const (
	Read     = "read"
	Edit     = "edit"
	Propose  = "propose"
	Dispatch = "dispatch"
)

// Input is a call: its kind and the revision it names (an edit's
// expected_revision, the revision of a proposal's handle or of a dispatched
// permit; none for a read).
type Input struct {
	Kind     string
	Revision int64
}

// Output is the host's answer as the model reads it.
type Output struct {
	Status int
	Code   string // a refusal's error.code
	// Revision and State: a read's, or the revision an edit made.
	Revision int64
	State    string
}

// Dispatched is the model's state of a draft whose permit was claimed.
const Dispatched = "Dispatched"

// State is the resource: its revision and state (Draft, Proposed,
// Authorized, or Dispatched).
type State struct {
	Revision int64
	State    string
}

// dispatchedStates are what a read of a dispatched draft may say: in
// flight, or one of the outcomes (the handler's, not the model's).
var dispatchedStates = map[string]bool{"Dispatching": true, "Sent": true, "FailedNoEffect": true, "Unknown": true}

// refused: the answer is a 409 with one of codes.
func refused(o Output, codes ...string) bool {
	if o.Status != 409 {
		return false
	}
	for _, c := range codes {
		if o.Code == c {
			return true
		}
	}
	return false
}

// Model is the resource's sequential specification, starting from an
// approved send: revision 1, Authorized.
var Model = porcupine.Model{
	Init:  func() any { return State{Revision: 1, State: "Authorized"} },
	Step:  func(s, in, out any) (bool, any) { return Step(s.(State), in.(Input), out.(Output)) },
	Equal: func(a, b any) bool { return a.(State) == b.(State) },
	DescribeOperation: func(in, out any) string {
		return Describe(in.(Input), out.(Output))
	},
	DescribeState: func(s any) string {
		st := s.(State)
		return fmt.Sprintf("revision %d, %s", st.Revision, st.State)
	},
}

// Step is one call from state s: whether the answer o is one the model
// allows, and the state after it.
func Step(s State, i Input, o Output) (bool, State) {
	current := i.Revision == s.Revision
	switch i.Kind {
	case Read:
		if s.State == Dispatched {
			return o.Status == 200 && o.Revision == s.Revision && dispatchedStates[o.State], s
		}
		return o.Status == 200 && o.Revision == s.Revision && o.State == s.State, s
	case Edit:
		editable := s.State != Dispatched
		if current && editable {
			return o.Status == 200 && o.Revision == s.Revision+1, State{Revision: s.Revision + 1, State: "Draft"}
		}
		var codes []string
		if !current {
			codes = append(codes, "stale_revision")
		}
		if !editable {
			codes = append(codes, "invalid_protocol_state")
		}
		return refused(o, codes...), s
	case Propose:
		if current && s.State == "Draft" {
			return o.Status == 201, State{Revision: s.Revision, State: "Proposed"}
		}
		return refused(o, "stale_revision", "invalid_protocol_state"), s
	default: // Dispatch
		if current && s.State == "Authorized" {
			return o.Status == 200, State{Revision: s.Revision, State: Dispatched}
		}
		if s.State == Dispatched {
			return refused(o, "stale_revision", "invalid_protocol_state", "permit_consumed"), s
		}
		return refused(o, "stale_revision", "invalid_protocol_state"), s
	}
}

// Describe renders one call and its answer.
func Describe(i Input, o Output) string {
	var call string
	switch i.Kind {
	case Read:
		call = "read"
	case Edit:
		call = fmt.Sprintf("edit expecting revision %d", i.Revision)
	case Propose:
		call = fmt.Sprintf("propose revision %d", i.Revision)
	default:
		call = fmt.Sprintf("dispatch the permit of revision %d", i.Revision)
	}
	switch {
	case o.Status >= 400:
		return fmt.Sprintf("%s → %d %s", call, o.Status, o.Code)
	case i.Kind == Read:
		return fmt.Sprintf("%s → revision %d, %s", call, o.Revision, o.State)
	case i.Kind == Edit:
		return fmt.Sprintf("%s → %d revision %d", call, o.Status, o.Revision)
	}
	return fmt.Sprintf("%s → %d", call, o.Status)
}
