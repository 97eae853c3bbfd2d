package sabotage

import (
	"bytes"
	"testing"
)

// TestIDMapReplacesAsReplaceAllWould: one pass over the text finds every
// learnt id, next to any character, in either case it was learnt in, and
// leaves every other UUID alone; ids of another shape are replaced too.
func TestIDMapReplacesAsReplaceAllWould(t *testing.T) {
	a, b := "0b6f1c52-9a7e-4d3b-8c1f-2e4a5b6c7d8e", "0B6F1C52-9A7E-4D3B-8C1F-2E4A5B6C7D8F"
	other := "11111111-2222-4333-8444-555555555555"
	var m idMap
	m.set(a, "A")
	m.set(b, "B")
	m.set("pf_17", "P")
	texts := []string{
		"",
		a,
		`{"id":"` + a + `","again":"` + a + `","other":"` + other + `"}`,
		"x" + a + b + "y",
		"/v1/preflight/" + b + "?q=" + other,
		"pf_17 and " + a[:35],
		"1" + a,
	}
	for _, text := range texts {
		want := []byte(text)
		for _, r := range [][2]string{{a, "A"}, {b, "B"}, {"pf_17", "P"}} {
			want = bytes.ReplaceAll(want, []byte(r[0]), []byte(r[1]))
		}
		if got := m.apply([]byte(text)); !bytes.Equal(got, want) {
			t.Errorf("%q: got %q, want %q", text, got, want)
		}
	}
	if m.len() != 3 {
		t.Errorf("len %d, want 3", m.len())
	}
}
