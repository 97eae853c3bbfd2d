package sabotage

import (
	"fmt"
	"sort"
	"strings"
)

// Matrix renders the sabotage matrix, docs/sabotage.md.
func Matrix() string {
	rules := Rules()
	ids := make([]string, 0, len(rules))
	for id := range rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	b.WriteString("# Sabotage matrix\n\n")
	b.WriteString("Generated from `sabotage/` by `PARLEY_UPDATE_DOCS=1 go test ./sabotage -run TestMatrixDocIsCurrent`; do not edit by hand.\n\n")
	b.WriteString("For each requirement, a host broken for exactly that requirement. `go test ./sabotage` runs the requirement's scenarios against it and expects `executed-fail` on that id; a pass-through control run expects every requirement to pass.\n\n")
	b.WriteString("| requirement | how the sabotaged host is broken | mechanism |\n|---|---|---|\n")
	for _, id := range ids {
		r := rules[id]
		var how []string
		if r.Config != nil {
			how = append(how, "configuration")
		}
		if r.Intercept != nil {
			how = append(how, "proxy answers")
		}
		if r.Response != nil {
			how = append(how, "proxy rewrites")
		}
		if r.Stream != nil {
			how = append(how, "proxy rewrites the event stream")
		}
		if r.AGTPRequest != nil {
			how = append(how, "AGTP proxy rewrites or answers the request")
		}
		if r.AGTP != nil {
			how = append(how, "AGTP proxy rewrites")
		}
		if r.Logs != nil {
			how = append(how, "log filter")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", id, r.Broken, strings.Join(how, ", "))
	}
	return b.String()
}
