package contractrefine

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func toolBody(kind string) string {
	return `{"kind":"` + kind + `","params":{"text":"hi"},"actor":{"session_id":"s"}}`
}

func decodeTool(t *testing.T, body []byte) ToolResponse {
	t.Helper()
	var r ToolResponse
	must(t).NoError(json.Unmarshal(body, &r))
	return r
}

type frameWant struct{ outcome, reason, stage string }

func TestToolBinding(t *testing.T) {
	type setup struct {
		header string // "", "none", "unknown", "pass", "repair", "expired", "mismatch"
		kind   string
	}
	cases := []struct {
		name     string
		cfg      Config
		setup    setup
		status   int
		reason   string
		frames   []frameWant
		joined   bool // audit_id is the preflight's
		bindAttr bool // frames carry preflight_id
	}{
		{"disabled ignores a bogus header", Config{Mode: "disabled"}, setup{"unknown", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, false, false},
		{"disabled ignores requires_preflight", Config{Mode: "disabled", Policy: PolicyConfig{RequiresPreflight: []string{"tool.echo"}}}, setup{"", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, false, false},
		{"advisory bound pass", Config{}, setup{"pass", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, true, true},
		{"advisory unknown id continues to policy", Config{}, setup{"unknown", "tool.echo"},
			200, "", []frameWant{{"deny", "contract: binding_not_found", "binding"}, {"allow", "policy: allowed", "policy"}}, false, true},
		{"advisory empty header value", Config{}, setup{"empty", "tool.echo"},
			200, "", []frameWant{{"deny", "contract: binding_not_found", "binding"}, {"allow", "policy: allowed", "policy"}}, false, true},
		{"advisory not-pass continues", Config{}, setup{"repair", "tool.echo"},
			200, "", []frameWant{{"deny", "contract: binding_not_pass", "binding"}, {"allow", "policy: allowed", "policy"}}, true, true},
		{"advisory preflight required continues", Config{Policy: PolicyConfig{RequiresPreflight: []string{"tool.echo"}}}, setup{"", "tool.echo"},
			200, "", []frameWant{{"deny", "contract: preflight_required", "binding"}, {"allow", "policy: allowed", "policy"}}, false, false},
		{"advisory binding fails then policy denies", Config{Policy: PolicyConfig{AllowedTools: []string{"tool.write"}}}, setup{"unknown", "tool.echo"},
			403, "policy: tool_not_allowed", []frameWant{{"deny", "contract: binding_not_found", "binding"}, {"deny", "policy: tool_not_allowed", "policy"}}, false, true},
		{"enforce bound pass", Config{Mode: "enforce"}, setup{"pass", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, true, true},
		{"enforce no header, not required", Config{Mode: "enforce"}, setup{"", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, false, false},
		{"enforce unknown id", Config{Mode: "enforce"}, setup{"unknown", "tool.echo"},
			403, "contract: binding_not_found", []frameWant{{"deny", "contract: binding_not_found", "binding"}}, false, true},
		{"enforce not pass", Config{Mode: "enforce"}, setup{"repair", "tool.echo"},
			403, "contract: binding_not_pass", []frameWant{{"deny", "contract: binding_not_pass", "binding"}}, true, true},
		{"enforce expired", Config{Mode: "enforce"}, setup{"expired", "tool.echo"},
			403, "contract: binding_expired", []frameWant{{"deny", "contract: binding_expired", "binding"}}, true, true},
		{"enforce kind mismatch", Config{Mode: "enforce"}, setup{"pass", "tool.write"},
			403, "contract: binding_kind_mismatch", []frameWant{{"deny", "contract: binding_kind_mismatch", "binding"}}, true, true},
		{"enforce preflight required", Config{Mode: "enforce", Policy: PolicyConfig{RequiresPreflight: []string{"tool.echo"}}}, setup{"", "tool.echo"},
			403, "contract: preflight_required", []frameWant{{"deny", "contract: preflight_required", "binding"}}, false, false},
		{"enforce required and bound", Config{Mode: "enforce", Policy: PolicyConfig{RequiresPreflight: []string{"tool.echo"}}}, setup{"pass", "tool.echo"},
			200, "", []frameWant{{"allow", "policy: allowed", "policy"}}, true, true},
		{"policy denies an unlisted tool", Config{Policy: PolicyConfig{AllowedTools: []string{"tool.echo"}}}, setup{"", "tool.write"},
			403, "policy: tool_not_allowed", []frameWant{{"deny", "policy: tool_not_allowed", "policy"}}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Preflights are issued by an advisory host on the same WAL, then
			// the host restarts in the mode under test.
			hs := newHarness(t, Config{})
			var header, preflightAudit string
			switch tc.setup.header {
			case "unknown":
				header = uuid.NewString()
			case "pass", "expired":
				d := hs.mustPost(goodRequest("s"))
				header, preflightAudit = d.PreflightID, d.AuditID
			case "repair":
				d := hs.mustPost(mutate("s", func(r *PreflightRequest) { r.Context.ExpectedEvidence = nil }))
				header, preflightAudit = d.PreflightID, d.AuditID
			}
			hs = hs.reopen(tc.cfg)
			if tc.setup.header == "expired" {
				hs.clock.Advance(DefaultEligibilityTTL)
			}
			before := len(hs.frames("kind=autonomy.decision"))

			var hdr []string
			if tc.setup.header != "" {
				hdr = []string{PreflightIDHeader, header}
			}
			w := hs.do(http.MethodPost, "/v1/tool", toolBody(tc.setup.kind), hdr...)
			must(t).Equal(tc.status, w.Code, w.Body.String())
			resp := decodeTool(t, w.Body.Bytes())
			if tc.status == http.StatusOK {
				expect(t).Equal("allow", resp.Outcome)
				expect(t).Empty(resp.Reason)
				expect(t).NotEmpty(resp.Result)
			} else {
				expect(t).Equal("deny", resp.Outcome)
				expect(t).Equal(tc.reason, resp.Reason)
				expect(t).Empty(resp.Result, "no execution")
			}
			if tc.joined {
				expect(t).Equal(preflightAudit, resp.AuditID, "the preflight's audit_id is the join key")
			} else {
				_, err := uuid.Parse(resp.AuditID)
				must(t).NoError(err)
				expect(t).NotEqual(preflightAudit, resp.AuditID)
			}

			frames := hs.frames("kind=autonomy.decision")[before:]
			must(t).Len(frames, len(tc.frames))
			for i, want := range tc.frames {
				fr := frames[i]
				expect(t).Equal(want, frameWant{fr.stringAttr("outcome"), fr.stringAttr("reason"), fr.stringAttr("stage")})
				expect(t).Equal(resp.AuditID, fr.stringAttr("audit_id"))
				expect(t).Equal(tc.setup.kind, fr.stringAttr("tool_kind"))
				expect(t).Equal(string(hs.h.Mode()), fr.stringAttr("mode"))
				if tc.bindAttr {
					expect(t).Equal(header, fr.stringAttr("preflight_id"))
				} else {
					expect(t).NotContains(fr.Attrs, "preflight_id")
				}
			}
		})
	}
}

func TestToolExecution(t *testing.T) {
	hs := newHarness(t, Config{})
	w := hs.do(http.MethodPost, "/v1/tool", `{"kind":"tool.echo","params":{"text":"hello"}}`)
	must(t).Equal(http.StatusOK, w.Code)
	expect(t).JSONEq(`{"text":"hello"}`, string(decodeTool(t, w.Body.Bytes()).Result))

	w = hs.do(http.MethodPost, "/v1/tool", `{"kind":"tool.write","params":{"k":"v"}}`)
	must(t).Equal(http.StatusOK, w.Code)
	resp := decodeTool(t, w.Body.Bytes())
	expect(t).JSONEq(`{"written":true}`, string(resp.Result))
	written, err := os.ReadFile(filepath.Join(hs.dir, toolWritesFile))
	must(t).NoError(err)
	expect(t).Contains(string(written), `"params":{"k":"v"}`)
	expect(t).Contains(string(written), resp.AuditID)
}

func TestToolStatusCodes(t *testing.T) {
	cases := []struct {
		name, method, body string
		cfg                Config
		want               int
	}{
		{"missing body", http.MethodPost, "", Config{}, http.StatusBadRequest},
		{"malformed", http.MethodPost, `{"kind":`, Config{}, http.StatusBadRequest},
		{"not an object", http.MethodPost, `"tool.echo"`, Config{}, http.StatusBadRequest},
		{"params not an object", http.MethodPost, `{"kind":"tool.echo","params":[1]}`, Config{}, http.StatusBadRequest},
		{"no kind", http.MethodPost, `{"params":{}}`, Config{}, http.StatusBadRequest},
		{"a mailbox outside the destination", http.MethodPost, `{"kind":"tool.deliver","params":{"text":"x","mailbox":"../etc"}}`, Config{Tools: ToolsConfig{DeliverURL: "http://127.0.0.1:1/"}}, http.StatusBadRequest},
		{"too large", http.MethodPost, `{"kind":"tool.echo","params":{"text":"` + strings.Repeat("x", MaxBodyBytes) + `"}}`, Config{}, http.StatusRequestEntityTooLarge},
		{"wrong method", http.MethodGet, "", Config{}, http.StatusMethodNotAllowed},
		{"emit fails: no execution", http.MethodPost, toolBody("tool.write"), Config{Faults: FaultConfig{WALEmit: "fail"}}, http.StatusInternalServerError},
		{"no emitter: unaudited but served", http.MethodPost, toolBody("tool.echo"), Config{Emitter: "none"}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, tc.cfg)
			w := hs.do(tc.method, "/v1/tool", tc.body)
			expect(t).Equal(tc.want, w.Code, w.Body.String())
			if tc.want != http.StatusOK {
				expect(t).NoFileExists(filepath.Join(hs.dir, toolWritesFile))
				expect(t).Empty(hs.frames(""))
			}
		})
	}
}

func TestToolBindingSurvivesClockBeforeExpiry(t *testing.T) {
	hs := newHarness(t, Config{Mode: "enforce"})
	d := hs.mustPost(goodRequest("s"))
	hs.clock.Advance(DefaultEligibilityTTL - time.Second)
	w := hs.do(http.MethodPost, "/v1/tool", toolBody("tool.echo"), PreflightIDHeader, d.PreflightID)
	expect(t).Equal(http.StatusOK, w.Code, w.Body.String())
}
