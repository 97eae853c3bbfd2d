package idempotency

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/parley-conformance/parley/models/permits"
)

func op(client int, call, ret int64, slot int, status int, sid string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Slot: slot, Name: "k"},
		Output: Output{Status: status, Contract: sid, Answer: sid}}
}

func ok(h []porcupine.Operation) bool {
	good, _, _ := permits.CheckModel(Model, h, time.Second)
	return good
}

func TestOneExecutionPerKeyIsLinearizable(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, 0, 461, "syn_a"), op(1, 0, 10, 0, 461, "syn_a"), op(2, 5, 12, 0, 461, "syn_a"),
		op(3, 0, 10, 1, 461, "syn_b"), op(4, 0, 10, 2, 263, "syn_c"),
	}
	if !ok(h) {
		t.Error("one execution per key, every replay the cached answer, was refused")
	}
}

func TestTwoExecutionsOfOneKeyAreNot(t *testing.T) {
	if ok([]porcupine.Operation{op(0, 0, 10, 0, 461, "syn_a"), op(1, 0, 10, 0, 461, "syn_b")}) {
		t.Error("two contracts for one (agent, key) were accepted")
	}
}

func TestAnotherAgentsKeyAnsweredFromTheCacheIsNot(t *testing.T) {
	if ok([]porcupine.Operation{op(0, 0, 10, 0, 461, "syn_a"), op(1, 11, 20, 2, 461, "syn_a")}) {
		t.Error("another slot answered with the first slot's contract was accepted")
	}
}

func TestARefusalIsNoExecution(t *testing.T) {
	if ok([]porcupine.Operation{op(0, 0, 10, 0, 464, "")}) {
		t.Error("a refusal was accepted as a key's execution")
	}
}
