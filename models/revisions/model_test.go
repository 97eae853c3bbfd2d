package revisions

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/parley-conformance/parley/models/permits"
)

func op(client int, call, ret int64, kind string, rev int64, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Kind: kind, Revision: rev}, Output: out}
}

func check(h []porcupine.Operation) (bool, string) {
	ok, v, d := permits.CheckModel(Model, h, time.Second)
	return ok, v + "\n" + d
}

func TestOneEditWinsTheRevisionAndTheDispatchLoses(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, 1, Output{Status: 409, Code: "stale_revision"}),
		op(1, 0, 10, Edit, 1, Output{Status: 200, Revision: 2}),
		op(2, 0, 10, Edit, 1, Output{Status: 409, Code: "stale_revision"}),
		op(3, 1, 2, Read, 0, Output{Status: 200, Revision: 1, State: "Authorized"}), // overlaps, before
		op(3, 11, 12, Read, 0, Output{Status: 200, Revision: 2, State: "Draft"}),
		op(1, 13, 20, Propose, 2, Output{Status: 201}),
		op(2, 13, 20, Edit, 2, Output{Status: 200, Revision: 3}),
		op(3, 21, 22, Read, 0, Output{Status: 200, Revision: 3, State: "Draft"}),
	}
	if ok, d := check(h); !ok {
		t.Error(d)
	}
}

func TestTheDispatchWinsAndEditsSeeADispatchedDraft(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, 1, Output{Status: 200}),
		op(1, 0, 10, Edit, 1, Output{Status: 409, Code: "invalid_protocol_state"}),
		op(2, 11, 12, Read, 0, Output{Status: 200, Revision: 1, State: "Sent"}),
	}
	if ok, d := check(h); !ok {
		t.Error(d)
	}
}

func TestTwoEditsOfOneRevisionAreNot(t *testing.T) {
	h := []porcupine.Operation{
		op(1, 0, 10, Edit, 1, Output{Status: 200, Revision: 2}),
		op(2, 0, 10, Edit, 1, Output{Status: 200, Revision: 2}),
	}
	if ok, _ := check(h); ok {
		t.Error("two edits expecting revision 1 both succeeded and were accepted")
	}
}

func TestTheDispatchAndAnEditBothTakingEffectIsNot(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, Dispatch, 1, Output{Status: 200}),
		op(1, 0, 10, Edit, 1, Output{Status: 200, Revision: 2}),
	}
	if ok, _ := check(h); ok {
		t.Error("a dispatch and an edit of revision 1 both took effect and were accepted")
	}
}

func TestAStaleReadAfterAnEditIsNot(t *testing.T) {
	h := []porcupine.Operation{
		op(1, 0, 10, Edit, 1, Output{Status: 200, Revision: 2}),
		op(2, 11, 12, Read, 0, Output{Status: 200, Revision: 1, State: "Authorized"}),
	}
	if ok, _ := check(h); ok {
		t.Error("a read after the edit answered that still says revision 1 was accepted")
	}
}

func TestAnEditRefusedWhenNothingMovedIsNot(t *testing.T) {
	h := []porcupine.Operation{op(1, 0, 10, Edit, 1, Output{Status: 409, Code: "stale_revision"})}
	if ok, _ := check(h); ok {
		t.Error("an edit of the current revision refused as stale with nothing racing it was accepted")
	}
}

func TestTheDrawingNamesTheCalls(t *testing.T) {
	h := []porcupine.Operation{op(1, 0, 1000, Edit, 1, Output{Status: 200, Revision: 2}), op(0, 500, 2000, Propose, 2, Output{Status: 409, Code: "stale_revision"})}
	_, d := check(h)
	for _, want := range []string{"client 1 [      0µs …       1µs] edit expecting revision 1 → 200 revision 2", "propose revision 2 → 409 stale_revision"} {
		if !strings.Contains(d, want) {
			t.Errorf("the drawing lacks %q:\n%s", want, d)
		}
	}
}
