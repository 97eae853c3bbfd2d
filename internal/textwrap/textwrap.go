// Package textwrap lays out details for a terminal: wrapped, never cut, so
// that a host's reason or a hang message reaches the reader whole. The run
// summary and `parley diff` print through it.
package textwrap

import (
	"fmt"
	"strings"
)

// Width is where console output wraps.
const Width = 100

// Tail is how many of a detail's last lines the console shows when it has
// more (a host's log tail): the report and the bundle keep them all.
const Tail = 6

// Wrap breaks text into lines of at most width columns after indent,
// keeping its own line breaks and their leading spaces; a word longer than
// a line (a URL) stands alone on its line, whole.
func Wrap(text, indent string, width int) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		lead := indent + line[:len(line)-len(trimmed)]
		words := strings.Fields(trimmed)
		cur := lead
		for _, w := range words {
			if cur != lead && len([]rune(cur))+1+len([]rune(w)) > width {
				b.WriteString(strings.TrimRight(cur, " ") + "\n")
				cur = lead
			}
			if cur != lead {
				cur += " "
			}
			cur += w
		}
		b.WriteString(strings.TrimRight(cur, " ") + "\n")
	}
	return b.String()
}

// Detail is a detail as the console shows it: whole when short; when it
// runs to more lines than Tail, its first line and its last Tail, saying
// how many lines between are in the report.
func Detail(d string) string {
	lines := strings.Split(strings.TrimRight(d, "\n"), "\n")
	if len(lines) <= Tail+2 {
		return strings.Join(lines, "\n")
	}
	skipped := len(lines) - 1 - Tail
	out := []string{lines[0], fmt.Sprintf("  … %d more lines (whole in report.html and the bundle) …", skipped)}
	return strings.Join(append(out, lines[len(lines)-Tail:]...), "\n")
}

// Unwrap joins wrapped text back into one line of its words: what a reader
// gets from Wrap's output, for checking that wrapping lost nothing.
func Unwrap(s string) string { return strings.Join(strings.Fields(s), " ") }
