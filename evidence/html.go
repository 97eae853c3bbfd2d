package evidence

import (
	_ "embed"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/verdict"
)

//go:embed report.html.tmpl
var reportTemplate string

type htmlFamily struct {
	Name string
	Rows []htmlRow
	Fail int
	Pass int
}

type htmlRow struct {
	verdict.Row
	Entry scenarios.Entry
	Known bool
}

type htmlData struct {
	St       Statement
	Verified string
	Roots    []verdict.Root
	Families []htmlFamily
	Percent  int
}

// RenderHTML writes a self-contained report a person can read: totals, then
// each family's requirements with their statements, verdicts and scenarios.
// verified says how the bundle's signature was checked, for the header.
func RenderHTML(w io.Writer, st Statement, reg *scenarios.Registry, verified string) error {
	t, err := template.New("report").Funcs(template.FuncMap{
		"lower": strings.ToLower,
	}).Parse(reportTemplate)
	if err != nil {
		return err
	}
	fams := map[string]*htmlFamily{}
	for _, r := range st.Predicate.Requirements {
		fam, _, _ := strings.Cut(r.ID, ".")
		f := fams[fam]
		if f == nil {
			f = &htmlFamily{Name: fam}
			fams[fam] = f
		}
		row := htmlRow{Row: r}
		if reg != nil {
			row.Entry, row.Known = reg.Lookup(r.ID)
		}
		switch r.Result {
		case "executed-pass":
			f.Pass++
		case "executed-fail":
			f.Fail++
		}
		f.Rows = append(f.Rows, row)
	}
	d := htmlData{St: st, Verified: verified, Roots: verdict.RootCauses(st.Predicate.Requirements)}
	for _, f := range fams {
		// Failures first: that is what the reader came for.
		sort.SliceStable(f.Rows, func(i, j int) bool {
			return rank(f.Rows[i].Result) > rank(f.Rows[j].Result)
		})
		d.Families = append(d.Families, *f)
	}
	sort.Slice(d.Families, func(i, j int) bool { return d.Families[i].Name < d.Families[j].Name })
	if n := st.Predicate.Totals.Requirements; n > 0 {
		d.Percent = st.Predicate.Totals.ExecutedPass * 100 / n
	}
	return t.Execute(w, d)
}

func rank(v string) int {
	return map[string]int{"executed-fail": 4, "blocked": 3, "skipped": 2, "inapplicable": 1}[v]
}
