package subscriptions

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func rec(client int, call, ret int64, tenant int, ws string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Kind: Record, Tenant: tenant, Workspace: ws, What: "exchange"}, Output: Output{Answer: "accepted"}}
}

func sub(client int, call, ret int64, tenant int, after string, got ...string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Kind: Subscribe, Tenant: tenant, After: after}, Output: Output{Delivered: got}}
}

func TestConcurrentRecordsInEitherOrderAgreedByAllSubscribers(t *testing.T) {
	h := []porcupine.Operation{
		rec(0, 0, 1, 0, "s"),
		rec(1, 2, 10, 0, "p"), // p and q overlap: either order
		rec(2, 3, 11, 0, "q"),
		rec(3, 4, 5, -1, "anon"),
		rec(4, 12, 13, 0, "z"), // the barrier
		sub(5, 2, 20, 0, "", "s", "q", "p", "z"),
		sub(6, 3, 21, 0, "s", "q", "p", "z"),
		sub(7, 3, 21, 1, ""),
	}
	if ok, v, d := Check(h, time.Second); !ok {
		t.Errorf("%s\n%s", v, d)
	}
}

func TestSubscribersDisagreeingOnOrderAreNot(t *testing.T) {
	h := []porcupine.Operation{
		rec(1, 2, 10, 0, "p"),
		rec(2, 3, 11, 0, "q"),
		sub(5, 2, 20, 0, "", "q", "p"),
		sub(6, 3, 21, 0, "", "p", "q"),
	}
	if ok, _, _ := Check(h, time.Second); ok {
		t.Error("two subscribers that saw concurrent records in different orders were accepted")
	}
}

func TestARecordMissedBeforeTheBarrierIsNot(t *testing.T) {
	h := []porcupine.Operation{
		rec(1, 2, 10, 0, "p"),
		rec(4, 12, 13, 0, "z"),
		sub(5, 1, 20, 0, "", "z"),
	}
	ok, _, d := Check(h, time.Second)
	if ok {
		t.Error("a stream that skipped a record logged before the barrier was accepted")
	}
	if !strings.Contains(d, "delivered [a2]") || !strings.Contains(d, "(record a1)") {
		t.Errorf("the drawing does not name records by tenant and order:\n%s", d)
	}
}

func TestOrderAgainstRealTimeIsNot(t *testing.T) {
	h := []porcupine.Operation{
		rec(1, 0, 1, 0, "p"),
		rec(2, 2, 3, 0, "q"),
		sub(5, 4, 20, 0, "", "q", "p"),
	}
	if ok, _, _ := Check(h, time.Second); ok {
		t.Error("a log order against the order of exchanges that did not overlap was accepted")
	}
}

func TestOtherTenantsAndAnonymousRecordsAreNot(t *testing.T) {
	for _, h := range [][]porcupine.Operation{
		{rec(1, 0, 1, 1, "p"), sub(5, 2, 20, 0, "", "p")},
		{rec(1, 0, 1, -1, "p"), sub(5, 2, 20, 0, "", "p")},
	} {
		if ok, _, d := Check(h, time.Second); ok {
			t.Errorf("a stream delivering a record not of its tenant was accepted:\n%s", d)
		}
	}
}

func TestAResumeDeliversWhatFollowsItsRecord(t *testing.T) {
	base := []porcupine.Operation{rec(0, 0, 1, 0, "s1"), rec(0, 2, 3, 0, "s2"), rec(1, 10, 14, 0, "p")}
	good := append(append([]porcupine.Operation(nil), base...), sub(5, 11, 20, 0, "s1", "s2", "p"))
	if ok, v, d := Check(good, time.Second); !ok {
		t.Errorf("%s\n%s", v, d)
	}
	skip := append(append([]porcupine.Operation(nil), base...), sub(5, 11, 20, 0, "s1", "p"))
	if ok, _, _ := Check(skip, time.Second); ok {
		t.Error("a resume that skipped the record after the one named was accepted")
	}
	// A resume may take effect before a concurrent record (and deliver
	// nothing of it) only if its cut came before the record was logged.
	early := append(append([]porcupine.Operation(nil), base...), sub(5, 11, 12, 0, "s1", "s2"))
	if ok, v, d := Check(early, time.Second); !ok {
		t.Errorf("%s\n%s", v, d)
	}
}

// A history of many overlapping records is decided at once, linearizable
// or not: Check pins records to where a new subscription delivered them.
func TestManyOverlappingRecordsAreDecidedAtOnce(t *testing.T) {
	var h []porcupine.Operation
	var all []string
	for k := range 30 {
		ws := string(rune('A' + k))
		h = append(h, rec(k%3, int64(k), int64(k+20), 0, ws))
		all = append(all, ws)
	}
	rev := append([]string(nil), all...)
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	good := append(append([]porcupine.Operation(nil), h...), sub(5, 0, 100, 0, "", all...))
	if ok, v, _ := Check(good, 5*time.Second); !ok {
		t.Errorf("%s", v)
	}
	missing := append(append([]porcupine.Operation(nil), h...), sub(5, 0, 100, 0, "", all...), sub(6, 0, 100, 0, "", all[1:]...))
	if ok, v, _ := Check(missing, 5*time.Second); ok || strings.Contains(v, "undecided") {
		t.Errorf("a stream missing the first record: %s", v)
	}
	disagree := append(append([]porcupine.Operation(nil), h...), sub(5, 0, 100, 0, "", all...), sub(6, 0, 100, 0, "", rev...))
	if ok, v, _ := Check(disagree, 5*time.Second); ok || strings.Contains(v, "undecided") {
		t.Errorf("streams in opposite orders: %s", v)
	}
}
