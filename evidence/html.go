package evidence

import (
	_ "embed"
	"fmt"
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
	Banner     Banner
	// Alike groups the failed and blocked rows that ended the same way
	// (two or more), largest first: one cause to fix for each.
	Alike []verdict.Group
	// Strip is the share of each verdict among the requirements, in the
	// order the strip shows them, empty shares left out.
	Strip []share
}

type share struct {
	Result string
	Count  int
	// Percent of the strip's width, to two decimals.
	Percent string
}

// Banner is the verdict of a report at a glance: whether the run certifies
// the host, for which profiles, which subject, and why in one line.
type Banner struct {
	Certified bool
	// Subject names the host build, or says it is undeclared.
	Subject  string
	Profiles []string
	Why      string
}

// Headline reads "CERTIFIED" or "NOT CERTIFIED".
func (b Banner) Headline() string {
	if b.Certified {
		return "CERTIFIED"
	}
	return "NOT CERTIFIED"
}

// SubjectName names a statement's subject for a title: its name when it
// declares one, else "subject undeclared".
func SubjectName(st Statement) string {
	if len(st.Subject) == 0 || len(st.Subject[0].Digest) == 0 || st.Subject[0].Name == Undeclared {
		return "subject undeclared"
	}
	return st.Subject[0].Name
}

// Verdict says whether a statement certifies its host, as parley run
// decides its exit code: nothing scored failed, nothing scored is blocked
// (unless the run accepted blocked requirements), and something was
// witnessed. reg says which requirements are scored; nil scores them all.
func Verdict(st Statement, reg *scenarios.Registry) Banner {
	b := Banner{Subject: SubjectName(st), Profiles: st.Predicate.ProfilesCertified}
	if d := st.Subject[0].Digest["sha256"]; b.Subject != "subject undeclared" && d != "" {
		b.Subject += " sha256:" + d
	}
	var failed, blocked []verdict.Row
	executed := false
	for _, r := range st.Predicate.Requirements {
		executed = executed || r.Result == verdict.ExecutedPass || r.Result == verdict.ExecutedFail
		if reg != nil {
			if e, ok := reg.Lookup(r.ID); ok && !e.Scored() {
				continue
			}
		}
		switch r.Result {
		case verdict.ExecutedFail:
			failed = append(failed, r)
		case verdict.Blocked:
			blocked = append(blocked, r)
		}
	}
	most := func(rows []verdict.Row) string {
		g := verdict.GroupByGist(rows)
		sort.SliceStable(g, func(i, j int) bool { return len(g[i].Rows) > len(g[j].Rows) })
		// One line: the gist's lines joined (a host's last log line
		// belongs with "its last log lines:"), clipped; the table below
		// has it whole.
		gist := strings.Join(strings.Fields(g[0].Gist), " ")
		if r := []rune(gist); len(r) > 280 {
			gist = string(r[:279]) + "…"
		}
		if len(g[0].Rows) == 1 {
			return g[0].Rows[0].ID + ": " + gist
		}
		return fmt.Sprintf("%d of them alike: %s", len(g[0].Rows), gist)
	}
	switch {
	case len(failed) > 0:
		b.Why = fmt.Sprintf("%d scored requirement(s) failed", len(failed))
		if len(blocked) > 0 {
			b.Why += fmt.Sprintf(" and %d are blocked", len(blocked))
		}
		b.Why += "; " + most(failed)
	case len(blocked) > 0 && !st.Predicate.AllowBlocked:
		b.Why = fmt.Sprintf("%d scored requirement(s) are blocked, so the host is not certified for them; %s", len(blocked), most(blocked))
	case !executed:
		b.Why = "no requirement was witnessed: every selected one was blocked, skipped or inapplicable"
	default:
		b.Certified = true
		b.Why = "every scored requirement of the profiles run passed (or cannot arise on this host)"
		if len(blocked) > 0 {
			b.Why = fmt.Sprintf("a partial certification: nothing failed, and %d blocked requirement(s) were accepted (--allow-blocked)", len(blocked))
		}
	}
	return b
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
	tot := st.Predicate.Totals
	if n := tot.Requirements; n > 0 {
		d.Percent = tot.ExecutedPass * 100 / n
		for _, x := range []struct {
			r string
			n int
		}{{verdict.ExecutedPass, tot.ExecutedPass}, {verdict.ExecutedFail, tot.ExecutedFail}, {verdict.Blocked, tot.Blocked}, {verdict.Skipped, tot.Skipped}, {verdict.Inapplicable, tot.Inapplicable}} {
			if x.n > 0 {
				d.Strip = append(d.Strip, share{x.r, x.n, fmt.Sprintf("%.2f", float64(x.n)*100/float64(n))})
			}
		}
	}
	d.Banner = Verdict(st, reg)
	var notPassing []verdict.Row
	for _, r := range d.NotPassing {
		notPassing = append(notPassing, r.Row)
	}
	for _, g := range verdict.GroupByGist(notPassing) {
		if len(g.Rows) > 1 && g.Cause != verdict.CausePrecondition {
			d.Alike = append(d.Alike, g)
		}
	}
	sort.SliceStable(d.Alike, func(i, j int) bool { return len(d.Alike[i].Rows) > len(d.Alike[j].Rows) })
	return t.Execute(w, d)
}

func rank(v string) int {
	return map[string]int{"executed-fail": 4, "blocked": 3, "skipped": 2, "inapplicable": 1}[v]
}
