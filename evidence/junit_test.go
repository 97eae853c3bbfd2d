package evidence_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/verdict"
)

// junit10 is what Jenkins' xunit junit-10.xsd allows: per element, its
// required and optional attributes and its children.
var junit10 = map[string]struct {
	required, optional []string
	children           []string
}{
	"testsuites": {required: nil, optional: []string{"name", "time", "tests", "failures", "errors"}, children: []string{"testsuite"}},
	"testsuite": {required: []string{"name", "tests", "failures", "errors"},
		optional: []string{"skipped", "time", "timestamp", "hostname", "id", "package", "file", "log", "url", "group"},
		children: []string{"testcase", "properties", "system-out", "system-err"}},
	"testcase":   {required: []string{"name"}, optional: []string{"time", "classname", "group"}, children: []string{"skipped", "error", "failure", "system-out", "system-err"}},
	"failure":    {optional: []string{"message", "type"}},
	"error":      {optional: []string{"message", "type"}},
	"skipped":    {optional: []string{"message"}},
	"system-out": {},
	"system-err": {},
}

var junitTime = regexp.MustCompile(`^\d+(\.\d+)?$`)

func mixedStatement(allowBlocked bool) evidence.Statement {
	rows := []verdict.Row{
		{ID: "contractrefine.preflight.post.decision-shape", Result: verdict.ExecutedPass, Assertions: 2},
		{ID: "contractrefine.preflight.post.outcome-closed-enum", Result: verdict.ExecutedFail, Assertions: 1, Detail: "expected 200 & <got> 403"},
		{ID: "contractrefine.preflight.get.returns-stored-decision", Result: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: []string{"contractrefine.preflight.post.outcome-closed-enum"}, Detail: "precondition not met"},
		{ID: "agtp.rcns.gate.server-policy-disabled", Result: verdict.Skipped, Detail: "its profile is not certified in this run"},
		{ID: "openwop.requirement.0242.inbound.recorded", Result: verdict.Inapplicable, Detail: "no inbound facet"},
	}
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return evidence.Statement{Subject: []evidence.Subject{{Name: "acme", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}},
		Predicate: evidence.Predicate{Requirements: rows, Totals: evidence.Count(rows), StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), AllowBlocked: allowBlocked}}
}

// TestJUnitSatisfiesTheStrictestSchema parses junit.xml and holds every
// element and attribute to junit-10.xsd's rules; blocked is an error (a
// dashboard must not show it neutral) unless the run allowed blocked.
func TestJUnitSatisfiesTheStrictestSchema(t *testing.T) {
	for _, allow := range []bool{false, true} {
		var buf bytes.Buffer
		if err := evidence.WriteJUnit(&buf, mixedStatement(allow)); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&buf)
		var stack []string
		kinds := map[string]string{}
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not well-formed XML: %v", err)
			}
			switch e := tok.(type) {
			case xml.StartElement:
				name := e.Name.Local
				rule, known := junit10[name]
				if !known {
					t.Fatalf("element <%s> is not in junit-10", name)
				}
				if len(stack) == 0 && name != "testsuites" {
					t.Fatalf("the root is <%s>, want <testsuites>", name)
				}
				if len(stack) > 0 {
					parent := stack[len(stack)-1]
					if !contains(junit10[parent].children, name) {
						t.Errorf("<%s> inside <%s>", name, parent)
					}
				}
				have := map[string]string{}
				for _, a := range e.Attr {
					have[a.Name.Local] = a.Value
					if !contains(rule.required, a.Name.Local) && !contains(rule.optional, a.Name.Local) {
						t.Errorf("<%s %s=...> is not allowed", name, a.Name.Local)
					}
				}
				for _, r := range rule.required {
					if _, ok := have[r]; !ok {
						t.Errorf("<%s> lacks %s", name, r)
					}
				}
				if v, ok := have["time"]; ok && !junitTime.MatchString(v) {
					t.Errorf("<%s time=%q> is not digits with an optional fraction", name, v)
				}
				if name == "testcase" {
					kinds[have["name"]] = ""
				}
				if (name == "failure" || name == "error" || name == "skipped") && len(stack) > 0 {
					for id := range kinds {
						if kinds[id] == "" {
							kinds[id] = name
						}
					}
				}
				stack = append(stack, name)
			case xml.EndElement:
				if e.Name.Local == "testcase" {
					for id := range kinds {
						if kinds[id] == "" {
							kinds[id] = "pass"
						}
					}
				}
				stack = stack[:len(stack)-1]
			}
		}
		blocked := "error"
		if allow {
			blocked = "skipped"
		}
		want := map[string]string{
			"contractrefine.preflight.post.decision-shape":         "pass",
			"contractrefine.preflight.post.outcome-closed-enum":    "failure",
			"contractrefine.preflight.get.returns-stored-decision": blocked,
			"agtp.rcns.gate.server-policy-disabled":                "skipped",
			"openwop.requirement.0242.inbound.recorded":            "skipped",
		}
		for id, k := range want {
			if kinds[id] != k {
				t.Errorf("allowBlocked %v: %s is reported as %q, want %q", allow, id, kinds[id], k)
			}
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Each test case carries its scenarios' time, and each family the sum of
// its cases'; a bundle without times (written before they were kept) reads
// as zero.
func TestJUnitCarriesPerCaseTimes(t *testing.T) {
	subj := evidence.Subject{Name: "acme", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}
	st := crafted(subj, verdict.Row{ID: "x.a", Result: verdict.ExecutedPass, Assertions: 1}, verdict.Row{ID: "x.b", Result: verdict.ExecutedPass, Assertions: 1},
		verdict.Row{ID: "y.c", Result: verdict.ExecutedPass, Assertions: 1})
	st.Predicate.Requirements[0].Scenarios[0].DurationMs = 1500
	st.Predicate.Requirements[1].Scenarios[0].DurationMs = 250
	var b bytes.Buffer
	if err := evidence.WriteJUnit(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<testcase name="x.a" classname="x" time="1.500">`, `<testcase name="x.b" classname="x" time="0.250">`, `<testcase name="y.c" classname="y" time="0.000">`, `name="x" tests="2" failures="0" errors="0" skipped="0" time="1.750"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("junit.xml lacks %s:\n%s", want, b.String())
		}
	}
}
