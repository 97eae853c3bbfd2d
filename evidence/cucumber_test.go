package evidence

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/verdict"
)

const cucumberReport = `[{"uri":"f/a.feature","elements":[{"line":3,"steps":[{"name":"x","result":{"status":"passed"}},{"name":"y","result":{"status":"passed"}}]}]}]`

func statementWith(result string) Statement {
	var st Statement
	st.Predicate.Requirements = []verdict.Row{{ID: "a.b", Result: result, Scenarios: []verdict.ScenarioResult{
		{URI: "f/a.feature", Line: 3, Result: result, Detail: "the host answered 200"}}}}
	return st
}

// A run in which every scenario passed keeps godog's report byte for byte;
// one that did not pass gets the verdict on the step that ended it.
func TestRewriteCucumber(t *testing.T) {
	out, err := RewriteCucumber([]byte(cucumberReport), statementWith(verdict.ExecutedPass))
	if err != nil || string(out) != cucumberReport {
		t.Fatalf("an all-pass report was changed: %v\n%s", err, out)
	}
	if _, err := RewriteCucumber([]byte(`[{"uri":`), statementWith(verdict.ExecutedPass)); err == nil {
		t.Fatal("a report that is not JSON was accepted")
	}
	out, err = RewriteCucumber([]byte(cucumberReport), statementWith(verdict.ExecutedFail))
	if err != nil {
		t.Fatal(err)
	}
	var features []struct {
		Elements []struct {
			Steps []struct {
				Result struct {
					Status       string `json:"status"`
					ErrorMessage string `json:"error_message"`
				}
			}
		}
	}
	if err := json.Unmarshal(out, &features); err != nil {
		t.Fatal(err)
	}
	last := features[0].Elements[0].Steps[1].Result
	if last.Status != "failed" || !strings.Contains(last.ErrorMessage, "the host answered 200") {
		t.Fatalf("the failed scenario's last step reads %+v", last)
	}
}
