package evidence

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/parley-conformance/parley/internal/textwrap"
	"github.com/parley-conformance/parley/verdict"
)

// Change is one requirement whose verdict differs between two bundles.
type Change struct {
	ID        string
	Old, New  string // verdicts
	OldDetail string
	NewDetail string
	NewCause  string
	// NewGist is how the new row ended, without what differs between
	// scenarios that ended alike (verdict.Gist); NewReliesOn names the
	// requirements a failed precondition relied on.
	NewGist     string
	NewReliesOn []string
}

// ChangeGroup is changes that ended alike in the new bundle: one verdict,
// one cause and one root (the requirements a failed precondition relied
// on, or the gist of the detail).
type ChangeGroup struct {
	New, Cause, Root string
	Changes          []Change
}

// Groups groups changes by root cause, largest group first, then in the
// order given.
func Groups(cs []Change) []ChangeGroup {
	var out []ChangeGroup
	at := map[string]int{}
	for _, c := range cs {
		root := c.NewGist
		if len(c.NewReliesOn) > 0 {
			root = "a setup relying on " + strings.Join(c.NewReliesOn, ", ") + " failed"
		}
		k := c.New + "\x00" + c.NewCause + "\x00" + root
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, ChangeGroup{New: c.New, Cause: c.NewCause, Root: root})
		}
		out[i].Changes = append(out[i].Changes, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Changes) > len(out[j].Changes) })
	return out
}

// Side names one bundle of a diff.
type Side struct {
	Subject        Subject
	Seed           int64
	StartedAt      string
	SuiteVersion   string
	RegistryDigest string
}

// Diff is what changed between an old and a new bundle.
type Diff struct {
	Old, New Side
	// Regressed got worse: a pass or inapplicable that now fails or is
	// blocked, a blocked that now fails.
	Regressed []Change
	// NewlyPassing now passes and did not.
	NewlyPassing []Change
	// NewlyBlocked is now blocked and was not, and did not regress: a
	// pass that is now blocked is listed once, as regressed.
	NewlyBlocked []Change
	// Other lists every other change (into or out of skipped, a failure
	// that is now blocked).
	Other []Change
	// OnlyOld and OnlyNew list ids one bundle has and the other has not
	// (only when the registries differ and that was allowed).
	OnlyOld, OnlyNew []string
	// RegistryChanged is set when the two bundles come from different
	// registries and their common ids were compared.
	RegistryChanged bool
}

// ErrRegistryChanged refuses a diff of bundles from different registries.
var ErrRegistryChanged = errors.New("the two bundles come from different requirement registries")

// Compare diffs two verified statements. Bundles of different registries
// are refused, unless allowRegistryChange, which compares the ids present
// in both and lists the others.
func Compare(old, new Statement, allowRegistryChange bool) (Diff, error) {
	d := Diff{Old: side(old), New: side(new)}
	if old.Predicate.RegistryDigest != new.Predicate.RegistryDigest {
		if !allowRegistryChange {
			return d, fmt.Errorf("%w (%s, suite %s; %s, suite %s): a requirement may mean something else in each; compare the ids present in both with --allow-registry-change",
				ErrRegistryChanged, old.Predicate.RegistryDigest, old.Predicate.Suite.Version, new.Predicate.RegistryDigest, new.Predicate.Suite.Version)
		}
		d.RegistryChanged = true
	}
	oldRows := map[string]verdict.Row{}
	for _, r := range old.Predicate.Requirements {
		oldRows[r.ID] = r
	}
	seen := map[string]bool{}
	for _, n := range new.Predicate.Requirements {
		seen[n.ID] = true
		o, ok := oldRows[n.ID]
		if !ok {
			d.OnlyNew = append(d.OnlyNew, n.ID)
			continue
		}
		if o.Result == n.Result {
			continue
		}
		c := Change{ID: n.ID, Old: o.Result, New: n.Result, OldDetail: o.Detail, NewDetail: n.Detail, NewCause: n.Cause,
			NewGist: verdict.Gist(n.ScenarioDetail()), NewReliesOn: n.ReliesOn}
		classified := false
		if n.Result != verdict.Skipped && o.Result != verdict.Skipped && verdict.Severity(n.Result) > verdict.Severity(o.Result) {
			d.Regressed = append(d.Regressed, c)
			classified = true
		}
		if n.Result == verdict.ExecutedPass {
			d.NewlyPassing = append(d.NewlyPassing, c)
			classified = true
		}
		if n.Result == verdict.Blocked && !classified {
			d.NewlyBlocked = append(d.NewlyBlocked, c)
			classified = true
		}
		if !classified {
			d.Other = append(d.Other, c)
		}
	}
	for id := range oldRows {
		if !seen[id] {
			d.OnlyOld = append(d.OnlyOld, id)
		}
	}
	sort.Strings(d.OnlyOld)
	sort.Strings(d.OnlyNew)
	return d, nil
}

func side(st Statement) Side {
	s := Side{Seed: st.Predicate.Seed, StartedAt: st.Predicate.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"),
		SuiteVersion: st.Predicate.Suite.Version, RegistryDigest: st.Predicate.RegistryDigest}
	if len(st.Subject) > 0 {
		s.Subject = st.Subject[0]
	}
	return s
}

// SubjectString names a side's subject for a reader.
func (s Side) SubjectString() string {
	if d := s.Subject.Digest["sha256"]; d != "" {
		return s.Subject.Name + " sha256:" + d
	}
	return s.Subject.Name + " (no digest)"
}

// WriteText writes the diff for a console.
func (d Diff) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "old: %s, seed %d, %s, suite %s\n", d.Old.SubjectString(), d.Old.Seed, d.Old.StartedAt, d.Old.SuiteVersion)
	fmt.Fprintf(&b, "new: %s, seed %d, %s, suite %s\n", d.New.SubjectString(), d.New.Seed, d.New.StartedAt, d.New.SuiteVersion)
	if d.RegistryChanged {
		fmt.Fprintf(&b, "the registries differ: only ids present in both are compared (%d only in old, %d only in new)\n", len(d.OnlyOld), len(d.OnlyNew))
	}
	section := func(title string, cs []Change, detail bool) {
		fmt.Fprintf(&b, "\n%s: %d\n", title, len(cs))
		if !detail {
			for _, c := range cs {
				fmt.Fprintf(&b, "  %-60s %s -> %s\n", c.ID, c.Old, c.New)
			}
			return
		}
		// Grouped by root cause: a reader fixes each once.
		for _, g := range Groups(cs) {
			what := g.New
			if g.Cause != "" {
				what += " (" + g.Cause + ")"
			}
			if len(g.Changes) == 1 {
				c := g.Changes[0]
				fmt.Fprintf(&b, "  %-60s %s -> %s\n", c.ID, c.Old, what)
				if c.NewDetail != "" {
					b.WriteString(textwrap.Wrap(textwrap.Detail(c.NewDetail), "      ", textwrap.Width))
				}
				continue
			}
			// The cause whole (a host's reason, its log tail), wrapped.
			fmt.Fprintf(&b, "  %d now %s, one cause:\n", len(g.Changes), what)
			b.WriteString(textwrap.Wrap(textwrap.Detail(g.Root), "      ", textwrap.Width))
			for _, c := range g.Changes {
				fmt.Fprintf(&b, "    %-58s %s -> %s\n", c.ID, c.Old, c.New)
			}
		}
	}
	section("regressed", d.Regressed, true)
	section("newly passing", d.NewlyPassing, false)
	section("newly blocked", d.NewlyBlocked, true)
	if len(d.Other) > 0 {
		section("other changes", d.Other, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

//go:embed diff.html.tmpl
var diffTemplate string

// RenderDiffHTML writes the diff as a page a person can read.
func RenderDiffHTML(w io.Writer, d Diff) error {
	t, err := template.New("diff").Funcs(template.FuncMap{"groups": Groups}).Parse(diffTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, d)
}
