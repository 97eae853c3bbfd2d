package main

import (
	"fmt"
	"io"

	"github.com/parley-conformance/parley/internal/textwrap"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/verdict"
)

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
			fmt.Fprint(w, textwrap.Wrap(textwrap.Detail(r.Detail), pad, textwrap.Width))
			continue
		}
		head := fmt.Sprintf("%d requirements", len(g.Rows))
		if g.Cause != "" {
			head += " (" + g.Cause + ")"
		}
		fmt.Fprintf(w, "  %s %s, all ended the same way:\n", label, head)
		fmt.Fprint(w, textwrap.Wrap(textwrap.Detail(g.Gist), pad, textwrap.Width))
		fmt.Fprint(w, textwrap.Wrap(idList(g.Rows, 2*(textwrap.Width-len(pad))), pad, textwrap.Width))
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

// exchangeToShow picks the failing row whose exchange the summary prints
// whole: a failing root cause first (fixing it unblocks others), then a
// hand-written scenario's (one exchange that shows the rule), then a model
// row's (an exchange deep in a random sequence); among equals, the first by
// id.
func exchangeToShow(rows []verdict.Row, roots []verdict.Root, reg *scenarios.Registry) *verdict.Row {
	root := map[string]bool{}
	for _, r := range roots {
		root[r.ID] = true
	}
	var best *verdict.Row
	bestRank := 3
	for i := range rows {
		r := &rows[i]
		e, _ := reg.Lookup(r.ID)
		if r.Result != verdict.ExecutedFail || !e.Scored() || r.Exchange == nil {
			continue
		}
		rank := 2
		switch {
		case root[r.ID]:
			rank = 0
		case e.Witness != scenarios.WitnessModel:
			rank = 1
		}
		if rank < bestRank {
			best, bestRank = r, rank
		}
	}
	return best
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
	fmt.Fprint(w, textwrap.Wrap(req, pad+"> ", textwrap.Width))
	if x.Status != 0 {
		resp := fmt.Sprint(x.Status)
		if x.ResponseBody != "" {
			resp += "\n" + x.ResponseBody
		}
		fmt.Fprint(w, textwrap.Wrap(resp, pad+"< ", textwrap.Width))
	}
}
