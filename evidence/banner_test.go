package evidence_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/verdict"
)

func crafted(subject evidence.Subject, rows ...verdict.Row) evidence.Statement {
	for i := range rows {
		rows[i].Scenarios = []verdict.ScenarioResult{{URI: "a.feature", Line: 1, Name: "n", Result: rows[i].Result, Cause: rows[i].Cause, Detail: rows[i].Detail}}
	}
	return evidence.Statement{Subject: []evidence.Subject{subject},
		Predicate: evidence.Predicate{Requirements: rows, Totals: evidence.Count(rows)}}
}

func render(t *testing.T, st evidence.Statement) string {
	t.Helper()
	var b bytes.Buffer
	if err := evidence.RenderHTML(&b, st, nil, "test"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A failing run's report says NOT CERTIFIED at the top, with why in one
// line, the subject (or that it is undeclared) and a strip that shows the
// failures in colour; a passing run's says CERTIFIED and names its profiles.
func TestTheBannerSaysTheVerdictAtTheTop(t *testing.T) {
	undeclared := evidence.Subject{Name: evidence.Undeclared}
	var failing []verdict.Row
	for _, id := range []string{"x.a", "x.b", "x.c"} {
		failing = append(failing, verdict.Row{ID: id, Result: verdict.ExecutedFail, Detail: "the host did not start with this configuration: it exited (status 1)"})
	}
	page := render(t, crafted(undeclared, failing...))
	main := page[strings.Index(page, "<main>"):]
	if i := strings.Index(main, "NOT CERTIFIED"); i < 0 || i > strings.Index(main, `class="totals"`) {
		t.Errorf("NOT CERTIFIED is not at the top of a failing report")
	}
	for _, want := range []string{"subject undeclared", "3 scored requirement(s) failed; 3 of them alike: the host did not start", `class="s-executed-fail" style="width:100.00%"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the report does not say %q", want)
		}
	}
	if i := strings.Index(main, `id="alike"`); i < 0 || !strings.Contains(main[i:], "<b>3 requirements</b>") || i > strings.Index(main, `id="not-passing"`) {
		t.Error("the report does not group the three alike failures before the list")
	}
	if title := regexp.MustCompile(`<title>(.*)</title>`).FindStringSubmatch(page)[1]; strings.Contains(title, ": undeclared") || !strings.Contains(title, "subject undeclared") {
		t.Errorf("title %q", title)
	}
	if strings.Contains(page, "Conformance report: undeclared") {
		t.Error("an undeclared subject is the title")
	}

	acme := evidence.Subject{Name: "acme-host", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}
	st := crafted(acme, verdict.Row{ID: "x.a", Result: verdict.ExecutedPass, Assertions: 1}, verdict.Row{ID: "x.b", Result: verdict.ExecutedPass, Assertions: 1})
	st.Predicate.ProfilesCertified = []string{"x-core"}
	page = render(t, st)
	for _, want := range []string{">CERTIFIED<", "<code>x-core</code>", "acme-host sha256:abab", "<title>CERTIFIED · parley conformance report: acme-host</title>"} {
		if !strings.Contains(page, want) {
			t.Errorf("a passing report does not say %q", want)
		}
	}
	if strings.Contains(page, "NOT CERTIFIED") {
		t.Error("a passing report says NOT CERTIFIED")
	}

	// Mixed: the strip has a share per verdict.
	page = render(t, crafted(acme, verdict.Row{ID: "x.a", Result: verdict.ExecutedPass, Assertions: 1}, verdict.Row{ID: "x.b", Result: verdict.ExecutedFail},
		verdict.Row{ID: "x.c", Result: verdict.Blocked, Cause: verdict.CauseDeclined, Detail: "declined"}, verdict.Row{ID: "x.d", Result: verdict.Skipped}))
	for _, want := range []string{`s-executed-pass" style="width:25.00%"`, `s-executed-fail" style="width:25.00%"`, `s-blocked" style="width:25.00%"`, `s-skipped" style="width:25.00%"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the strip lacks %q", want)
		}
	}
}
