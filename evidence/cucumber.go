package evidence

import (
	"encoding/json"
	"fmt"

	"github.com/parley-conformance/parley/verdict"
)

// RewriteCucumber makes a cucumber JSON report agree with the verdicts:
// godog writes it from what its steps returned, so a refused vacuous pass
// reads "passed" there and a blocked scenario reads "skipped". Each
// scenario's steps are rewritten from its verdict: executed-fail is
// "failed"; blocked is "failed" too (it fails the run), or "skipped" when
// the run allowed blocked; skipped and inapplicable are "skipped". The step
// that ended the scenario carries the verdict, its cause and its detail as
// its error message.
func RewriteCucumber(raw []byte, st Statement) ([]byte, error) {
	// Only scenarios that did not pass are rewritten; when every one
	// passed, the report stands as godog wrote it (once checked to be
	// JSON), and is not decoded into maps, which would take several times
	// its size in memory.
	results := map[string]verdict.ScenarioResult{}
	for _, r := range st.Predicate.Requirements {
		for _, s := range r.Scenarios {
			if s.Result != verdict.ExecutedPass {
				results[fmt.Sprintf("%s:%d", s.URI, s.Line)] = s
			}
		}
	}
	if len(results) == 0 {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("cucumber report: not JSON")
		}
		return raw, nil
	}
	var features []map[string]any
	if err := json.Unmarshal(raw, &features); err != nil {
		return nil, fmt.Errorf("cucumber report: %w", err)
	}
	for _, f := range features {
		uri, _ := f["uri"].(string)
		elements, _ := f["elements"].([]any)
		for _, el := range elements {
			e, _ := el.(map[string]any)
			line, _ := e["line"].(float64)
			s, ok := results[fmt.Sprintf("%s:%d", uri, int64(line))]
			if !ok || s.Result == verdict.ExecutedPass {
				continue
			}
			rewriteSteps(e, s, st.Predicate.AllowBlocked)
		}
	}
	return json.MarshalIndent(features, "", "    ")
}

func rewriteSteps(e map[string]any, s verdict.ScenarioResult, allowBlocked bool) {
	status := "skipped"
	switch {
	case s.Result == verdict.ExecutedFail, s.Result == verdict.Blocked && !allowBlocked:
		status = "failed"
	}
	msg := s.Result
	if s.Cause != "" {
		msg += " (" + s.Cause + ")"
	}
	if s.Detail != "" {
		msg += ": " + s.Detail
	}
	stepList, _ := e["steps"].([]any)
	if len(stepList) == 0 {
		return
	}
	// The step that ended the scenario is the first that did not pass; a
	// refused vacuous pass has none, and its last step carries the verdict.
	end := len(stepList) - 1
	for i, x := range stepList {
		if r := result(x); r != nil && r["status"] != "passed" {
			end = i
			break
		}
	}
	for i, x := range stepList {
		r := result(x)
		if r == nil {
			continue
		}
		switch {
		case i == end:
			r["status"] = status
			r["error_message"] = msg
		case i > end:
			r["status"] = "skipped"
			delete(r, "error_message")
		}
	}
}

func result(step any) map[string]any {
	m, _ := step.(map[string]any)
	r, _ := m["result"].(map[string]any)
	if r == nil && m != nil {
		r = map[string]any{}
		m["result"] = r
	}
	return r
}
