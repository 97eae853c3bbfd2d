package checker

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
)

// TestFixturesAreDeterministic: every fixture decodes, and checking it
// again, or checking it with every object's members in reverse order, gives
// the same result; every diagnostic carries a known code, its remediation
// and a span.
func TestFixturesAreDeterministic(t *testing.T) {
	names := aglchecker.Names()
	if len(names) < 60 {
		t.Fatalf("%d fixtures, want at least 60", len(names))
	}
	var positive, negative int
	for _, n := range names {
		b, _ := aglchecker.Fixture(n)
		wf, err := Decode(b)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		r := Check(wf)
		if r.OK() {
			positive++
		} else {
			negative++
		}
		for _, d := range r.Diagnostics {
			if Codes[d.Code] == "" || d.Remediation == "" || d.Span.Line == 0 {
				t.Errorf("%s: diagnostic without a known code, remediation or span: %+v", n, d)
			}
		}
		if again := Check(wf); !reflect.DeepEqual(r, again) {
			t.Errorf("%s: two checks disagree", n)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		wf2, err := Decode(aglchecker.Reordered(v))
		if err != nil {
			t.Fatalf("%s reordered: %v", n, err)
		}
		if r2 := Check(wf2); !reflect.DeepEqual(r, r2) {
			t.Errorf("%s: checking it with its members reordered gives another result", n)
		}
	}
	if negative < positive {
		t.Errorf("%d negative fixtures and %d positive: at least half must be negative", negative, positive)
	}
	t.Logf("%d fixtures: %d positive, %d negative", len(names), positive, negative)
}

// TestFixturesDump prints what the checker says of every fixture (with -v
// and PARLEY_CHECKER_DUMP=1), for a person writing fixtures.
func TestFixturesDump(t *testing.T) {
	if os.Getenv("PARLEY_CHECKER_DUMP") == "" {
		t.Skip("set PARLEY_CHECKER_DUMP=1")
	}
	for _, n := range aglchecker.Names() {
		b, _ := aglchecker.Fixture(n)
		wf, err := Decode(b)
		if err != nil {
			t.Logf("%s: INVALID %v", n, err)
			continue
		}
		r := Check(wf)
		if r.OK() {
			t.Logf("%s: OK effects=%v after=%v", n, r.EffectBound, r.ResourcesAfter)
			continue
		}
		for _, d := range r.Diagnostics {
			t.Logf("%s: %s %v", n, d, d.Related)
		}
	}
}
