package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/parley-conformance/parley/verdict"
)

// consoleWidth is where the console wraps what it prints: details are
// wrapped, never cut, so that a reason or a hang message reaches the reader
// whole.
const consoleWidth = 100

// consoleTail is how many of a detail's last lines the console shows when
// it has more (a host's log tail): the report and the bundle keep them all.
const consoleTail = 6

// wrap breaks text into lines of at most width columns after indent,
// keeping its own line breaks and their leading spaces; a word longer than
// a line (a URL) stands alone on its line, whole.
func wrap(text, indent string, width int) string {
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

// consoleDetail is a detail as the console shows it: whole when short; when
// it runs to more lines than consoleTail, its first line and its last
// consoleTail, saying how many lines between are in the report.
func consoleDetail(d string) string {
	lines := strings.Split(strings.TrimRight(d, "\n"), "\n")
	if len(lines) <= consoleTail+2 {
		return strings.Join(lines, "\n")
	}
	skipped := len(lines) - 1 - consoleTail
	out := []string{lines[0], fmt.Sprintf("  … %d more lines (whole in report.html and the bundle) …", skipped)}
	return strings.Join(append(out, lines[len(lines)-consoleTail:]...), "\n")
}

// printGroups prints the failed and blocked rows, one block per cause: a
// row alone under its id and its whole detail; rows that ended the same way
// under one count, their common detail and their ids.
func printGroups(w io.Writer, rows []verdict.Row) {
	const pad = "           "
	for _, g := range verdict.GroupByGist(rows) {
		label := "FAIL    "
		if g.Result == verdict.Blocked {
			label = "BLOCKED "
		}
		if len(g.Rows) == 1 {
			r := g.Rows[0]
			head := r.ID
			if r.Cause != "" {
				head += " (" + r.Cause + ")"
			}
			fmt.Fprintf(w, "  %s %s\n", label, head)
			fmt.Fprint(w, wrap(consoleDetail(r.Detail), pad, consoleWidth))
			continue
		}
		head := fmt.Sprintf("%d requirements", len(g.Rows))
		if g.Cause != "" {
			head += " (" + g.Cause + ")"
		}
		fmt.Fprintf(w, "  %s %s, all ended the same way:\n", label, head)
		fmt.Fprint(w, wrap(consoleDetail(g.Gist), pad, consoleWidth))
		fmt.Fprint(w, wrap(idList(g.Rows, 2*(consoleWidth-len(pad))), pad, consoleWidth))
	}
}

// idList names rows by id within about budget characters, then says how
// many more there are.
func idList(rows []verdict.Row, budget int) string {
	s := "ids: "
	for i, r := range rows {
		if i > 0 && len(s)+len(r.ID)+2 > budget {
			return s + fmt.Sprintf("… and %d more (report.html lists them all)", len(rows)-i)
		}
		if i > 0 {
			s += ", "
		}
		s += r.ID
	}
	return s
}

// printExchange prints an exchange whole (bodies as the bundle keeps them),
// wrapped.
func printExchange(w io.Writer, id string, x *verdict.Exchange) {
	const pad = "           "
	fmt.Fprintf(w, "  first failing exchange (%s):\n", id)
	req := x.Method + " " + x.Target
	if x.RequestBody != "" {
		req += "\n" + x.RequestBody
	}
	fmt.Fprint(w, wrap(req, pad+"> ", consoleWidth))
	if x.Status != 0 {
		resp := fmt.Sprint(x.Status)
		if x.ResponseBody != "" {
			resp += "\n" + x.ResponseBody
		}
		fmt.Fprint(w, wrap(resp, pad+"< ", consoleWidth))
	}
}
