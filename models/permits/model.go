// Package permits is a sequential model of one AGL exact-action permit
// (agl-behavioral-contracts.txt §6.3 consumption, §11 the claim, and the
// binding in docs/hosts/agl.md §9-§10) against which a concurrent history of
// dispatches and reads of that permit is checked for linearizability with
// github.com/anishathalye/porcupine: there must be one order of the calls,
// each taking effect at one instant between its call and its answer, in
// which the model gives every answer the host gave.
//
// The model: a permit is unconsumed until a dispatch claims it; the first
// dispatch that claims it is answered 200 with its operation; every later
// dispatch is refused 409 permit_consumed; a read says whether the permit is
// consumed and, once it is, by which operation.
package permits

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kinds of call.
const (
	Dispatch = "dispatch"
	Read     = "read"
)

// Input is a call.
type Input struct{ Kind string }

// Output is what the host answered, as the model reads it.
type Output struct {
	// Dispatch: Completed with its operation, Consumed when refused as a
	// claimed permit; neither is any other answer (Status says which).
	Completed bool
	Consumed  bool
	Status    int
	Code      string
	// Both: Operation is the dispatch's operation, or the one a read names
	// as the permit's consumer.
	Operation string
	// Read: whether the permit read as consumed.
	ReadConsumed bool
}

// state is the permit: "" unconsumed, else the operation that consumed it.
type state string

// Model is the permit's sequential specification.
var Model = porcupine.Model{
	Init: func() any { return state("") },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(state), in.(Input), out.(Output)
		switch i.Kind {
		case Dispatch:
			if st == "" {
				return o.Completed && o.Operation != "", state(o.Operation)
			}
			return o.Consumed, st
		default:
			if st == "" {
				return !o.ReadConsumed, st
			}
			return o.ReadConsumed && o.Operation == string(st), st
		}
	},
	DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
	DescribeState: func(s any) string {
		if s.(state) == "" {
			return "unconsumed"
		}
		return "consumed by " + string(s.(state))
	},
}

// Describe renders one call and its answer.
func Describe(i Input, o Output) string {
	if i.Kind == Dispatch {
		switch {
		case o.Completed:
			return "dispatch → 200 " + o.Operation
		case o.Consumed:
			return "dispatch → 409 permit_consumed"
		}
		return fmt.Sprintf("dispatch → %d %s", o.Status, o.Code)
	}
	if !o.ReadConsumed {
		return "read → unconsumed"
	}
	return "read → consumed by " + o.Operation
}

// Check checks a history; ok is false when it is not linearizable (or the
// check ran out of time, which says so). drawing renders the history, one
// line per call in the order of calls, with its interval, for a report.
func Check(history []porcupine.Operation, timeout time.Duration) (ok bool, verdict string, drawing string) {
	return CheckModel(Model, history, timeout)
}

// CheckModel is Check against another sequential model (another machine's
// histories are judged and drawn the same way); the drawing describes each
// call with the model's DescribeOperation.
func CheckModel(m porcupine.Model, history []porcupine.Operation, timeout time.Duration) (ok bool, verdict string, drawing string) {
	res := porcupine.CheckOperationsTimeout(m, history, timeout)
	switch res {
	case porcupine.Ok:
		verdict = "linearizable"
	case porcupine.Illegal:
		verdict = "not linearizable: no order of the calls, each taking effect between its call and its answer, gives every answer the host gave"
	default:
		verdict = "undecided within " + timeout.String()
	}
	return res == porcupine.Ok, verdict, DrawModel(m, history)
}

// Draw renders a history as a timeline: per call its client, interval (µs
// from the first call) and answer, ordered by call time.
func Draw(history []porcupine.Operation) string { return DrawModel(Model, history) }

// DrawModel is Draw with the calls described by m's DescribeOperation.
func DrawModel(m porcupine.Model, history []porcupine.Operation) string {
	h := append([]porcupine.Operation(nil), history...)
	sort.Slice(h, func(a, b int) bool { return h[a].Call < h[b].Call })
	var t0 int64
	if len(h) > 0 {
		t0 = h[0].Call
	}
	var b strings.Builder
	for _, op := range h {
		fmt.Fprintf(&b, "  client %d [%7dµs … %7dµs] %s\n", op.ClientId, (op.Call-t0)/1000, (op.Return-t0)/1000, m.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}
