package evidence

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parley-conformance/parley/verdict"
)

// The shapes follow Jenkins' xunit junit-10.xsd, the strictest common
// consumer: <testsuites> carries only name, time, tests, failures and
// errors; <testsuite> name, tests, failures, errors and optionally skipped,
// time, timestamp; <testcase> name, classname, time.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Time     string       `xml:"time,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// junitSkipped carries only a message: junit-10 gives <skipped> no type.
type junitSkipped struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes one test case per requirement, named by its id and
// grouped by family, so CI dashboards show requirement ids. A blocked
// requirement is an error, or skipped when the run allowed blocked.
func WriteJUnit(w io.Writer, st Statement) error {
	p := st.Predicate
	byFamily := map[string]*junitSuite{}
	famTime := map[string]time.Duration{}
	all := junitSuites{Name: "parley " + st.Subject[0].Name, Time: seconds(p.FinishedAt.Sub(p.StartedAt))}
	for _, r := range p.Requirements {
		fam, _, _ := strings.Cut(r.ID, ".")
		s := byFamily[fam]
		if s == nil {
			s = &junitSuite{Name: fam, Time: "0", Timestamp: p.StartedAt.UTC().Format("2006-01-02T15:04:05")}
			byFamily[fam] = s
		}
		// A case's time is its scenarios' (a scenario witnessing several
		// requirements counts for each); a family's is its cases'.
		c := junitCase{Name: r.ID, Classname: fam, Time: seconds(r.Duration())}
		famTime[fam] += r.Duration()
		var out strings.Builder
		for _, sc := range r.Scenarios {
			fmt.Fprintf(&out, "%-13s %s:%d %s (%d assertions)\n", sc.Result, sc.URI, sc.Line, sc.Name, sc.Assertions)
			if sc.Detail != "" {
				fmt.Fprintf(&out, "    %s\n", sc.Detail)
			}
		}
		c.SystemOut = out.String()
		what := r.Result
		if r.Cause != "" {
			what += " (" + r.Cause + ")"
		}
		msg := &junitMessage{Message: what + ": " + firstLine(r.Detail), Type: r.Result, Body: r.Detail}
		switch {
		case r.Result == verdict.ExecutedFail:
			c.Failure = msg
			s.Failures++
		case r.Result == verdict.Blocked && !p.AllowBlocked:
			// Blocked fails certification unless a partial one was asked
			// for: a dashboard must not show it as neutral.
			c.Error = msg
			s.Errors++
		case r.Result != verdict.ExecutedPass:
			c.Skipped = &junitSkipped{Message: msg.Message, Body: msg.Body}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	names := make([]string, 0, len(byFamily))
	for n := range byFamily {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := byFamily[n]
		s.Time = seconds(famTime[n])
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Errors += s.Errors
		all.Suites = append(all.Suites, *s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// seconds renders a duration as the schema's time: digits, an optional
// fraction, never negative.
func seconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}
