package permits

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, kind string, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Kind: kind}, Output: out}
}

func TestOneClaimOverlappingReadsIsLinearizable(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, Output{Completed: true, Operation: "op1"}),
		op(1, 1, 12, Dispatch, Output{Consumed: true}),
		op(2, 2, 3, Read, Output{}),                                      // before the claim took effect
		op(3, 5, 15, Read, Output{ReadConsumed: true, Operation: "op1"}), // after
	}
	if ok, v, d := Check(h, time.Second); !ok {
		t.Errorf("%s\n%s", v, d)
	}
}

func TestAStaleReadAfterTheClaimIsNot(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, Output{Completed: true, Operation: "op1"}),
		op(1, 11, 12, Read, Output{}),
	}
	if ok, _, _ := Check(h, time.Second); ok {
		t.Error("a read that began after the claim answered and says unconsumed was accepted")
	}
}

func TestTwoClaimsAreNot(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, Output{Completed: true, Operation: "op1"}),
		op(1, 0, 10, Dispatch, Output{Completed: true, Operation: "op2"}),
	}
	if ok, _, _ := Check(h, time.Second); ok {
		t.Error("two completed dispatches of one permit were accepted")
	}
}

func TestARefusalBeforeAnyClaimIsNot(t *testing.T) {
	h := []porcupine.Operation{
		op(1, 0, 1, Dispatch, Output{Consumed: true}),
		op(0, 2, 10, Dispatch, Output{Completed: true, Operation: "op1"}),
	}
	if ok, _, _ := Check(h, time.Second); ok {
		t.Error("a refusal as consumed that answered before the only claim began was accepted")
	}
}
