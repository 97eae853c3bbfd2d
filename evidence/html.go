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
	// NotSelected: every row is skipped (its profiles were not certified),
	// so the family reads as one line, not a table of skipped rows.
	NotSelected bool
}

type htmlRow struct {
	// Top marks a row repeated in the failed-and-blocked list, which
	// carries no anchor of its own.
	Top bool
	verdict.Row
	Entry scenarios.Entry
	Known bool
}

type htmlData struct {
	St       Statement
	Verified string
	Roots    []verdict.Root
	// NotPassing lists the failed and blocked rows, failures first.
	NotPassing []htmlRow
	Families   []htmlFamily
	Percent    int
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
		for _, r := range f.Rows {
			if r.Result == verdict.ExecutedFail || r.Result == verdict.Blocked {
				top := r
				top.Top = true
				d.NotPassing = append(d.NotPassing, top)
			}
		}
		f.NotSelected = true
		for _, r := range f.Rows {
			if r.Result != verdict.Skipped {
				f.NotSelected = false
			}
		}
		// Failures first: that is what the reader came for.
		sort.SliceStable(f.Rows, func(i, j int) bool {
			return rank(f.Rows[i].Result) > rank(f.Rows[j].Result)
		})
		d.Families = append(d.Families, *f)
	}
	sort.SliceStable(d.NotPassing, func(i, j int) bool {
		if a, b := rank(d.NotPassing[i].Result), rank(d.NotPassing[j].Result); a != b {
			return a > b
		}
		return d.NotPassing[i].ID < d.NotPassing[j].ID
	})
	sort.Slice(d.Families, func(i, j int) bool { return d.Families[i].Name < d.Families[j].Name })
	if n := st.Predicate.Totals.Requirements; n > 0 {
		d.Percent = st.Predicate.Totals.ExecutedPass * 100 / n
	}
	return t.Execute(w, d)
}

func rank(v string) int {
	return map[string]int{"executed-fail": 4, "blocked": 3, "skipped": 2, "inapplicable": 1}[v]
}
