package textwrap

import (
	"strings"
	"testing"
)

func TestWrapKeepsEveryWordAndBreaks(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("word ", 60) + "\n  indented line\nhttp://" + strings.Repeat("x", 120)
	got := Wrap(text, "    ", 40)
	for _, l := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
		if len(l) > 40 && !strings.Contains(l, "http://") {
			t.Errorf("line over 40 columns: %q", l)
		}
		if !strings.HasPrefix(l, "    ") {
			t.Errorf("line without its indent: %q", l)
		}
	}
	if Unwrap(got) != Unwrap(text) {
		t.Errorf("words lost or changed:\n%s", got)
	}
	if !strings.Contains(got, "\n      indented line\n") {
		t.Errorf("a line's own indent is lost:\n%s", got)
	}
}

// A long host log tail reads on the console as its first line and last few
// lines, saying how many are in the report.
func TestConsoleDetailKeepsTheTail(t *testing.T) {
	t.Parallel()
	d := "the host did not start; its last log lines:"
	for i := 0; i < 20; i++ {
		d += "\n  log line " + strings.Repeat("x", i)
	}
	got := Detail(d)
	if n := strings.Count(got, "\n") + 1; n != Tail+2 {
		t.Errorf("%d lines, want %d:\n%s", n, Tail+2, got)
	}
	if !strings.Contains(got, "14 more lines") || !strings.HasSuffix(got, strings.Repeat("x", 19)) {
		t.Errorf("got:\n%s", got)
	}
}
