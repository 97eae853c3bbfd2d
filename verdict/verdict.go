// Package verdict is parley's verdict model: the five verdicts (the OpenWOP
// vocabulary), the closed list of causes a blocked verdict may carry, the
// order in which a requirement takes the worst of its scenarios, the rows a
// run reports, and how blocked rows lead back to the failure that caused
// them. It imports nothing of the suite, so that a verifier can use it
// without linking the runner, the steps or any host.
package verdict

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Verdicts.
const (
	ExecutedPass = "executed-pass"
	ExecutedFail = "executed-fail"
	Skipped      = "skipped"
	Inapplicable = "inapplicable"
	Blocked      = "blocked"
)

// Cause says why a requirement is blocked; the list is closed.
type Cause = string

// Causes of a blocked verdict.
const (
	// CauseSeamAbsent: the host has no seam the scenario reads through (it
	// answered 404, 405 or 501 there).
	CauseSeamAbsent Cause = "seam-absent"
	// CauseDeclined: the host declined the configuration the scenario
	// needs, explicitly (an exec host's declined line).
	CauseDeclined Cause = "configuration-declined"
	// CauseTarget: the target cannot provide what the scenario needs (a url
	// host declares another configuration, a container cannot reach the
	// suite's fakes, the host's log is not visible).
	CauseTarget Cause = "target-cannot-provide"
	// CausePrecondition: a setup the scenario relies on failed because the
	// host misbehaved; ReliesOn names the requirements whose own scenarios
	// witness that setup.
	CausePrecondition Cause = "precondition-failed"
	// CauseSuiteFault: a bug in parley. The run exits 3.
	CauseSuiteFault Cause = "suite-fault"
)

// Causes lists every cause, for validation.
var Causes = []Cause{CauseSeamAbsent, CauseDeclined, CauseTarget, CausePrecondition, CauseSuiteFault}

// IsCause reports whether c is one of the closed list.
func IsCause(c string) bool {
	for _, k := range Causes {
		if c == k {
			return true
		}
	}
	return false
}

// severity orders verdicts from best to worst; a requirement takes the
// worst. Inapplicable ranks below a pass: a variant whose condition cannot
// arise on the host (a protocol form it does not offer) does not hide the
// variants that were witnessed; a requirement is inapplicable only when
// every scenario of it is.
var severity = map[string]int{
	Inapplicable: 0,
	ExecutedPass: 1,
	Skipped:      2,
	Blocked:      3,
	ExecutedFail: 4,
}

// Valid reports whether v is a verdict.
func Valid(v string) bool { _, ok := severity[v]; return ok }

// Worst returns the worse of two verdicts.
func Worst(a, b string) string {
	if severity[b] > severity[a] {
		return b
	}
	return a
}

// Severity ranks a verdict (higher is worse), for sorting.
func Severity(v string) int { return severity[v] }

// Exchange is the last exchange with the host before a scenario ended
// without passing: what the suite sent and what came back, bodies clipped
// at MaxExchangeBody and credentials redacted.
type Exchange struct {
	Method          string              `json:"method"`
	Target          string              `json:"target"`
	RequestHeaders  map[string][]string `json:"requestHeaders,omitempty"`
	RequestBody     string              `json:"requestBody,omitempty"`
	Status          int                 `json:"status,omitempty"`
	ResponseHeaders map[string][]string `json:"responseHeaders,omitempty"`
	ResponseBody    string              `json:"responseBody,omitempty"`
}

// MaxExchangeBody bounds each body an Exchange keeps.
const MaxExchangeBody = 4 << 10

// ScenarioResult is one scenario's verdict: for an outline, one example row.
type ScenarioResult struct {
	URI  string `json:"uri"`
	Line int64  `json:"line"`
	Name string `json:"name"`
	// ReqIDs are the requirements the scenario witnesses (its @req tags).
	ReqIDs     []string  `json:"-"`
	Result     string    `json:"result"`
	Assertions int       `json:"assertions"`
	Cause      Cause     `json:"cause,omitempty"`
	ReliesOn   []string  `json:"reliesOn,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Exchange   *Exchange `json:"exchange,omitempty"`
	// DurationMs is how long the scenario ran, in milliseconds, for the
	// times of a junit report; bundles written before it carry none.
	DurationMs int64 `json:"durationMs,omitempty"`
}

// Row is one requirement's verdict: the worst of its scenarios'.
type Row struct {
	ID         string           `json:"id"`
	Scenarios  []ScenarioResult `json:"scenarios"`
	Result     string           `json:"result"`
	Assertions int              `json:"assertions"`
	Cause      Cause            `json:"cause,omitempty"`
	ReliesOn   []string         `json:"reliesOn,omitempty"`
	Detail     string           `json:"detail,omitempty"`
	Exchange   *Exchange        `json:"exchange,omitempty"`
}

// Fold sets a row's result, assertions, cause and detail from its
// scenarios: the worst verdict wins, and the first scenario with it (in
// file order) gives the cause, the detail and the exchange. A pass's
// detail is what its scenarios noted, each under its scenario.
func (r *Row) Fold() {
	r.Result, r.Assertions, r.Cause, r.ReliesOn, r.Detail, r.Exchange = Inapplicable, 0, "", nil, "", nil
	if len(r.Scenarios) == 0 {
		r.Result = ExecutedPass
	}
	for _, s := range r.Scenarios {
		r.Assertions += s.Assertions
		r.Result = Worst(r.Result, s.Result)
	}
	if r.Result == ExecutedPass {
		// A pass carries what its scenarios noted (trial counts, what
		// they observed), each under the scenario that noted it.
		var notes []string
		for _, s := range r.Scenarios {
			if s.Detail != "" {
				notes = append(notes, fmt.Sprintf("%s:%d %s: %s", s.URI, s.Line, s.Name, s.Detail))
			}
		}
		r.Detail = strings.Join(notes, "\n")
		return
	}
	for _, s := range r.Scenarios {
		if s.Result == r.Result {
			r.Cause, r.ReliesOn, r.Exchange = s.Cause, s.ReliesOn, s.Exchange
			r.Detail = fmt.Sprintf("%s:%d %s: %s", s.URI, s.Line, s.Name, s.Detail)
			return
		}
	}
}

// Totals counts requirement rows by verdict.
type Totals struct {
	Requirements int `json:"requirements"`
	ExecutedPass int `json:"executed-pass"`
	ExecutedFail int `json:"executed-fail"`
	Skipped      int `json:"skipped"`
	Inapplicable int `json:"inapplicable"`
	Blocked      int `json:"blocked"`
}

// Count tallies rows.
func Count(rows []Row) Totals {
	t := Totals{Requirements: len(rows)}
	for _, r := range rows {
		switch r.Result {
		case ExecutedPass:
			t.ExecutedPass++
		case ExecutedFail:
			t.ExecutedFail++
		case Skipped:
			t.Skipped++
		case Inapplicable:
			t.Inapplicable++
		case Blocked:
			t.Blocked++
		}
	}
	return t
}

// Root is a requirement that other requirements' setups relied on, with the
// requirements it blocked.
type Root struct {
	ID string
	// Result is the root's own verdict in this run ("" when it did not run).
	Result string
	// Blocks lists the blocked requirements whose setup relied on it.
	Blocks []string
}

// String reads "agtp.x (executed-fail): 1 failure blocks 18 requirements".
func (r Root) String() string {
	n := len(r.Blocks)
	noun := "requirements"
	if n == 1 {
		noun = "requirement"
	}
	switch r.Result {
	case ExecutedFail:
		return fmt.Sprintf("%s (executed-fail): 1 failure blocks %d %s", r.ID, n, noun)
	case "":
		return fmt.Sprintf("%s (not run): a setup it witnesses failed, blocking %d %s; run it to see why", r.ID, n, noun)
	default:
		return fmt.Sprintf("%s (%s): a setup it witnesses failed elsewhere, blocking %d %s", r.ID, r.Result, n, noun)
	}
}

// RootCauses groups the rows blocked by a failed precondition under the
// requirements the precondition relies on, most-blocking first. A reader
// fixes the root and the blocked rows follow.
func RootCauses(rows []Row) []Root {
	result := map[string]string{}
	for _, r := range rows {
		result[r.ID] = r.Result
	}
	blocks := map[string]map[string]bool{}
	for _, r := range rows {
		if r.Result != Blocked || r.Cause != CausePrecondition {
			continue
		}
		for _, id := range r.ReliesOn {
			if blocks[id] == nil {
				blocks[id] = map[string]bool{}
			}
			blocks[id][r.ID] = true
		}
	}
	out := make([]Root, 0, len(blocks))
	for id, set := range blocks {
		root := Root{ID: id, Result: result[id]}
		for b := range set {
			root.Blocks = append(root.Blocks, b)
		}
		sort.Strings(root.Blocks)
		out = append(out, root)
	}
	sort.Slice(out, func(i, j int) bool {
		fi, fj := out[i].Result == ExecutedFail, out[j].Result == ExecutedFail
		if fi != fj {
			return fi
		}
		if len(out[i].Blocks) != len(out[j].Blocks) {
			return len(out[i].Blocks) > len(out[j].Blocks)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

var (
	configLine = regexp.MustCompile(`\s*\(configuration sha256:[0-9a-f]+\)`)
	digest     = regexp.MustCompile(`sha256:[0-9a-f]{16,}`)
)

// Gist is a detail without what differs between scenarios that ended the
// same way: the digest of the configuration a host was given (a host that
// never starts fails every fixture alike). Details with one gist are one
// cause, for a reader who fixes it once.
func Gist(detail string) string {
	d := configLine.ReplaceAllString(detail, "")
	return strings.TrimRight(digest.ReplaceAllString(d, "sha256:…"), "\n ")
}

// Group is the rows that ended the same way: one verdict, one cause and one
// gist of their first scenario with that verdict.
type Group struct {
	Result, Cause, Gist string
	// Rows in the order given.
	Rows []Row
}

// GroupByGist groups rows by how they ended, in the order each group first
// appears.
func GroupByGist(rows []Row) []Group {
	var out []Group
	at := map[string]int{}
	for _, r := range rows {
		g := Group{Result: r.Result, Cause: r.Cause, Gist: Gist(r.ScenarioDetail())}
		k := g.Result + "\x00" + g.Cause + "\x00" + g.Gist
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, g)
		}
		out[i].Rows = append(out[i].Rows, r)
	}
	return out
}

// ScenarioDetail is the detail of the first scenario with the row's verdict
// (Detail without the scenario it names), or Detail when the row carries no
// scenarios.
func (r Row) ScenarioDetail() string {
	for _, s := range r.Scenarios {
		if s.Result == r.Result {
			return s.Detail
		}
	}
	return r.Detail
}

// Duration is the time a row's scenarios ran, in all.
func (r Row) Duration() time.Duration {
	var ms int64
	for _, s := range r.Scenarios {
		ms += s.DurationMs
	}
	return time.Duration(ms) * time.Millisecond
}
