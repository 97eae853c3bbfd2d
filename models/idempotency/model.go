// Package idempotency is a sequential model of an AGTP RCNS server's
// idempotency cache (agtp-rcns.txt, "Headers and Rate Limiting": the cache
// is scoped by (Agent-ID, Idempotency-Key); a replay of the same key from
// the same agent receives the cached response; the same key from another
// agent is an independent request), against which a concurrent history of
// keyed gate requests is checked for linearizability with porcupine
// (models/permits judges and draws it).
//
// The model: each (agent, key) pair is a slot. The first request of a slot
// to take effect executes: it passes the gate and is answered with a
// contract of its own (a 461 preview or a success served under it) that no
// other slot was answered with. Every later request of the slot is answered
// with exactly that response (status and document). So of any number of
// requests of one slot, made at once or not, exactly one executes.
package idempotency

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Slots is the most (agent, key) pairs one history holds.
const Slots = 4

// Input is a request: the slot it belongs to and how the slot is called in
// a drawing ("alice k1").
type Input struct {
	Slot int
	Name string
}

// Output is the server's answer as the model reads it.
type Output struct {
	Status int
	// Contract is the synthesis_id the answer previews (461) or is served
	// under (a success naming it in Contract-Synthesized); "" for none.
	Contract string
	// Answer is the whole response as compared for a replay: the status
	// and the document, normalised (steps/agtp/model_idempotency.go).
	Answer string
}

// State is the cache: each slot's cached answer and contract ("" while
// the slot has not executed).
type State struct {
	Answers   [Slots]string
	Contracts [Slots]string
}

// executes: an answer the first request of a slot may have: a 461 or a
// success, naming a contract no other slot was answered with.
func executes(s State, slot int, o Output) bool {
	if o.Contract == "" || !(o.Status == 461 || (o.Status >= 200 && o.Status < 300)) {
		return false
	}
	for i, c := range s.Contracts {
		if i != slot && c == o.Contract {
			return false
		}
	}
	return true
}

// Step is one request from state s: whether the answer is one the model
// allows, and the state after it.
func Step(s State, i Input, o Output) (bool, State) {
	if s.Answers[i.Slot] == "" {
		if !executes(s, i.Slot, o) {
			return false, s
		}
		s.Answers[i.Slot], s.Contracts[i.Slot] = o.Answer, o.Contract
		return true, s
	}
	return o.Answer == s.Answers[i.Slot], s
}

// Model is the cache's sequential specification.
var Model = porcupine.Model{
	Init:              func() any { return State{} },
	Step:              func(s, in, out any) (bool, any) { return Step(s.(State), in.(Input), out.(Output)) },
	DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
	DescribeState: func(s any) string {
		return fmt.Sprintf("%v", s.(State).Contracts)
	},
}

// Describe renders one request and its answer.
func Describe(i Input, o Output) string {
	if o.Contract != "" {
		return fmt.Sprintf("%s → %d contract %s", i.Name, o.Status, o.Contract)
	}
	return fmt.Sprintf("%s → %d", i.Name, o.Status)
}
