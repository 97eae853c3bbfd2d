package contractrefine

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestPreflightStatusCodes(t *testing.T) {
	good := mustJSON(t, goodRequest("s-status"))
	cases := []struct {
		name   string
		cfg    Config
		method string
		body   string
		want   int
	}{
		{"pass", Config{}, http.MethodPost, good, http.StatusOK},
		{"explicit advisory", Config{Mode: "advisory"}, http.MethodPost, good, http.StatusOK},
		{"enforce", Config{Mode: "enforce"}, http.MethodPost, good, http.StatusOK},
		{"disabled", Config{Mode: "disabled"}, http.MethodPost, good, http.StatusServiceUnavailable},
		{"typo falls back to disabled", Config{Mode: "advsiory"}, http.MethodPost, good, http.StatusServiceUnavailable},
		{"no verifier wired", Config{Verifier: VerifierConfig{Wired: ptr(false)}}, http.MethodPost, good, http.StatusServiceUnavailable},
		{"disabled wins over bad body", Config{Mode: "disabled"}, http.MethodPost, "{", http.StatusServiceUnavailable},
		{"missing body", Config{}, http.MethodPost, "", http.StatusBadRequest},
		{"whitespace body", Config{}, http.MethodPost, "  \n", http.StatusBadRequest},
		{"malformed JSON", Config{}, http.MethodPost, `{"intent":`, http.StatusBadRequest},
		{"JSON array", Config{}, http.MethodPost, `[]`, http.StatusBadRequest},
		{"JSON null", Config{}, http.MethodPost, `null`, http.StatusBadRequest},
		{"trailing garbage", Config{}, http.MethodPost, good + `x`, http.StatusBadRequest},
		{"wrong field type", Config{}, http.MethodPost, `{"plan":"tool.echo"}`, http.StatusBadRequest},
		{"body too large", Config{}, http.MethodPost, `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"emitter not wired", Config{Emitter: "none"}, http.MethodPost, good, http.StatusInternalServerError},
		{"wal emit fails", Config{Faults: FaultConfig{WALEmit: "fail"}}, http.MethodPost, good, http.StatusInternalServerError},
		{"wrong method", Config{}, http.MethodGet, "", http.StatusMethodNotAllowed},
		{"wrong method PUT", Config{}, http.MethodPut, good, http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, tc.cfg)
			w := hs.do(tc.method, "/v1/preflight", tc.body)
			expect(t).Equal(tc.want, w.Code, w.Body.String())
			expect(t).Equal("application/json", w.Header().Get("Content-Type"))
			var body map[string]any
			must(t).NoError(json.Unmarshal(w.Body.Bytes(), &body), "every answer is a JSON object")
			if tc.want != http.StatusOK {
				expect(t).NotEmpty(body["error"])
				for _, k := range []string{"outcome", "preflight_id", "audit_id", "reason"} {
					expect(t).NotContains(body, k, "an error carries no decision")
				}
			}
			if tc.want == http.StatusMethodNotAllowed {
				expect(t).Equal(http.MethodPost, w.Header().Get("Allow"))
			}
		})
	}
}

// mutate returns goodRequest(session) changed by f.
func mutate(session string, f func(*PreflightRequest)) PreflightRequest {
	r := goodRequest(session)
	f(&r)
	return r
}

func TestPreflightOutcomes(t *testing.T) {
	all := func(fail map[string]string) []string {
		// contract -> outcome list in evaluation order, "fail" where named.
		var out []string
		for _, c := range []string{"session_metadata", "plan_shape", "capability_binding", "zone_policy", "provenance", "rollback", "evidence"} {
			o := "pass"
			if _, ok := fail[c]; ok {
				o = "fail"
			}
			out = append(out, c+"="+o)
		}
		return out
	}
	cases := []struct {
		name    string
		req     PreflightRequest
		outcome string
		reason  string
		results []string
		hints   []RepairHint
	}{
		{
			name: "pass", req: goodRequest("s1"),
			outcome: OutcomePass, reason: "contract: passed", results: all(nil),
		},
		{
			name: "session id missing", req: mutate("", func(r *PreflightRequest) { r.Intent.PlanHash = "blake3:p" }),
			outcome: OutcomeDeny, reason: "contract: session_metadata_missing", results: []string{"session_metadata=fail"},
		},
		{
			name: "plan hash missing", req: mutate("s2", func(r *PreflightRequest) { r.Intent.PlanHash = "" }),
			outcome: OutcomeDeny, reason: "contract: session_metadata_missing", results: []string{"session_metadata=fail"},
		},
		{
			name: "empty plan", req: mutate("s3", func(r *PreflightRequest) { r.Plan = nil }),
			outcome: OutcomeDeny, reason: "contract: plan_shape_invalid", results: all(map[string]string{"plan_shape": ""}),
		},
		{
			name: "step without kind", req: mutate("s4", func(r *PreflightRequest) { r.Plan[0].Kind = "" }),
			outcome: OutcomeDeny, reason: "contract: plan_shape_invalid",
			results: all(map[string]string{"plan_shape": "", "capability_binding": ""}),
		},
		{
			name: "capability mismatch", req: mutate("s5", func(r *PreflightRequest) { r.Capability = "tool.other" }),
			outcome: OutcomeDeny, reason: "contract: capability_mismatch", results: all(map[string]string{"capability_binding": ""}),
		},
		{
			name: "zone not allowed", req: mutate("s6", func(r *PreflightRequest) { r.Context.Zone = "prod" }),
			outcome: OutcomeDeny, reason: "contract: zone_not_allowed", results: all(map[string]string{"zone_policy": ""}),
		},
		{
			name: "zone unset passes", req: mutate("s7", func(r *PreflightRequest) { r.Context.Zone = "" }),
			outcome: OutcomePass, reason: "contract: passed", results: all(nil),
		},
		{
			name: "provenance missing", req: mutate("s8", func(r *PreflightRequest) {
				r.Plan[0].Params["b"] = json.RawMessage(`1`)
				r.Plan[0].Params["a"] = json.RawMessage(`2`)
			}),
			outcome: OutcomeRepairRequired, reason: "contract: provenance_missing", results: all(map[string]string{"provenance": ""}),
			hints: []RepairHint{
				{Contract: "provenance", Path: "plan[0].provenance.a.source", Op: "set", Value: "operator"},
				{Contract: "provenance", Path: "plan[0].provenance.b.source", Op: "set", Value: "operator"},
			},
		},
		{
			name: "rollback missing for a write", req: mutate("s9", func(r *PreflightRequest) {
				r.Capability, r.Plan[0].Kind, r.Context.RollbackContract = "tool.write", "tool.write", ""
			}),
			outcome: OutcomeRepairRequired, reason: "contract: rollback_missing", results: all(map[string]string{"rollback": ""}),
			hints: []RepairHint{{Contract: "rollback", Path: "context.rollback_contract", Op: "set", Value: "rb-required"}},
		},
		{
			name: "rollback not needed for a read", req: mutate("s10", func(r *PreflightRequest) { r.Context.RollbackContract = "" }),
			outcome: OutcomePass, reason: "contract: passed", results: all(nil),
		},
		{
			name: "evidence missing", req: mutate("s11", func(r *PreflightRequest) { r.Context.ExpectedEvidence = []string{"trace_id"} }),
			outcome: OutcomeRepairRequired, reason: "contract: evidence_missing", results: all(map[string]string{"evidence": ""}),
			hints: []RepairHint{{Contract: "evidence", Path: "context.expected_evidence", Op: "add", Value: "audit_id"}},
		},
		{
			name: "several repairable: first reason, every hint", req: mutate("s12", func(r *PreflightRequest) {
				r.Capability, r.Plan[0].Kind, r.Context.RollbackContract = "tool.write", "tool.write", ""
				r.Plan[0].Provenance = nil
				r.Context.ExpectedEvidence = nil
			}),
			outcome: OutcomeRepairRequired, reason: "contract: provenance_missing",
			results: all(map[string]string{"provenance": "", "rollback": "", "evidence": ""}),
			hints: []RepairHint{
				{Contract: "provenance", Path: "plan[0].provenance.text.source", Op: "set", Value: "operator"},
				{Contract: "rollback", Path: "context.rollback_contract", Op: "set", Value: "rb-required"},
				{Contract: "evidence", Path: "context.expected_evidence", Op: "add", Value: "audit_id"},
			},
		},
		{
			name: "blocking beats repairable", req: mutate("s13", func(r *PreflightRequest) {
				r.Context.Zone = "prod"
				r.Context.ExpectedEvidence = nil
			}),
			outcome: OutcomeDeny, reason: "contract: zone_not_allowed",
			results: all(map[string]string{"zone_policy": "", "evidence": ""}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, Config{})
			d := hs.mustPost(tc.req)
			expect(t).Equal(tc.outcome, d.Outcome)
			expect(t).Equal(tc.reason, d.Reason)
			expect(t).Regexp(reasonShape, d.Reason)
			var got []string
			for _, r := range d.ContractResults {
				got = append(got, r.Contract+"="+r.Outcome)
				expect(t).Contains([]string{"blocking", "repairable"}, r.Severity)
				expect(t).Equal(r.Outcome == "fail", r.Detail != "", "detail only on failure")
			}
			expect(t).Equal(tc.results, got)
			expect(t).Equal(tc.hints, d.RepairHints)

			for _, id := range []string{d.PreflightID, d.AuditID} {
				u, err := uuid.Parse(id)
				must(t).NoError(err)
				expect(t).Equal(uuid.Version(4), u.Version())
			}
			expect(t).NotEqual(d.PreflightID, d.AuditID)
			expect(t).Equal(DefaultPolicyRef, d.PolicyRef)

			el := d.ExecutionEligibility
			if tc.outcome == OutcomePass {
				expect(t).True(el.Allowed)
				expect(t).Equal([]string{tc.req.Capability}, el.BoundToolKinds)
				expect(t).Equal("2026-06-12T12:05:00Z", el.ExpiresAt)
			} else {
				expect(t).False(el.Allowed)
				expect(t).Equal([]string{}, el.BoundToolKinds)
				expect(t).Empty(el.ExpiresAt)
			}
		})
	}
}

func TestDenyWireShape(t *testing.T) {
	hs := newHarness(t, Config{})
	w, _ := hs.post(mutate("s", func(r *PreflightRequest) { r.Context.Zone = "prod" }))
	must(t).Equal(http.StatusOK, w.Code)
	var raw map[string]json.RawMessage
	must(t).NoError(json.Unmarshal(w.Body.Bytes(), &raw))
	expect(t).JSONEq(`{"allowed":false,"bound_tool_kinds":[],"expires_at":""}`, string(raw["execution_eligibility"]),
		"expires_at is present and empty on deny")
	expect(t).NotContains(raw, "repair_hints", "hints only accompany repair_required")
}

func TestRepairBudget(t *testing.T) {
	repairable := func(session, plan string) PreflightRequest {
		return mutate(session, func(r *PreflightRequest) {
			r.Intent.PlanHash = plan
			r.Context.ExpectedEvidence = nil
		})
	}
	hs := newHarness(t, Config{})
	for i := range DefaultMaxRepairAttempts {
		d := hs.mustPost(repairable("s", "p1"))
		expect(t).Equal(OutcomeRepairRequired, d.Outcome, "attempt %d", i+1)
	}
	d := hs.mustPost(repairable("s", "p1"))
	expect(t).Equal(OutcomeDeny, d.Outcome)
	expect(t).Equal("contract: repair_budget_exhausted", d.Reason)
	expect(t).Empty(d.RepairHints)
	expect(t).Empty(d.ExecutionEligibility.ExpiresAt)

	// Exhaustion is scoped to one (session, plan hash) pair.
	expect(t).Equal(OutcomeRepairRequired, hs.mustPost(repairable("s", "p2")).Outcome)
	expect(t).Equal(OutcomeRepairRequired, hs.mustPost(repairable("other", "p1")).Outcome)

	// A repaired request still passes once the ladder is spent.
	fixed := goodRequest("s")
	fixed.Intent.PlanHash = "p1"
	expect(t).Equal(OutcomePass, hs.mustPost(fixed).Outcome)

	// Budgets are rebuilt from the WAL.
	hs = hs.reopen(Config{})
	expect(t).Equal("contract: repair_budget_exhausted", hs.mustPost(repairable("s", "p1")).Reason)
	expect(t).Equal(OutcomeRepairRequired, hs.mustPost(repairable("s", "p2")).Outcome)
	expect(t).Equal("contract: repair_budget_exhausted", hs.mustPost(repairable("s", "p2")).Reason)

	t.Run("zero attempts", func(t *testing.T) {
		hs := newHarness(t, Config{MaxRepairAttempts: ptr(0)})
		expect(t).Equal("contract: repair_budget_exhausted", hs.mustPost(repairable("s", "p")).Reason)
	})
}

func TestRepairBudgetConcurrent(t *testing.T) {
	hs := newHarness(t, Config{MaxRepairAttempts: ptr(3)})
	req := mutate("s", func(r *PreflightRequest) { r.Context.ExpectedEvidence = nil })
	outcomes := make(chan string, 40)
	done := make(chan struct{})
	for range 40 {
		go func() {
			defer func() { done <- struct{}{} }()
			w, d := hs.post(req)
			if w.Code == http.StatusOK {
				outcomes <- d.Outcome
			}
		}()
	}
	for range 40 {
		<-done
	}
	close(outcomes)
	count := map[string]int{}
	for o := range outcomes {
		count[o]++
	}
	expect(t).Equal(map[string]int{OutcomeRepairRequired: 3, OutcomeDeny: 37}, count)
}

func TestLiveLockFingerprintOverridesVerifiers(t *testing.T) {
	hs := newHarness(t, Config{
		LockFingerprint: "blake3:live0001",
		PolicyRef:       "test-policy/1.0.0",
		Verifier:        VerifierConfig{LockFingerprint: "blake3:stale0001"},
	})
	d := hs.mustPost(goodRequest("s"))
	expect(t).Equal("blake3:live0001", d.LockFingerprint)
	expect(t).Equal("test-policy/1.0.0", d.PolicyRef)
	fr := hs.frames("kind=autonomy.preflight")
	must(t).Len(fr, 1)
	expect(t).Equal("blake3:live0001", fr[0].stringAttr("lock_fingerprint"))

	def := newHarness(t, Config{})
	d = def.mustPost(goodRequest("s"))
	expect(t).Equal(Fingerprint(DefaultPolicyRef), d.LockFingerprint)
	expect(t).NotEqual(Fingerprint("verifier-default"), d.LockFingerprint)
	expect(t).Regexp(regexp.MustCompile(`^blake3:[0-9a-f]{64}$`), d.LockFingerprint)
}

func TestEligibilityTTL(t *testing.T) {
	hs := newHarness(t, Config{EligibilityTTL: "90s"})
	d := hs.mustPost(goodRequest("s"))
	exp, err := time.Parse(time.RFC3339, d.ExecutionEligibility.ExpiresAt)
	must(t).NoError(err)
	expect(t).Equal(hs.clock.Now().Add(90*time.Second), exp)
}

func TestPreflightFrame(t *testing.T) {
	hs := newHarness(t, Config{})
	w, d := hs.post(mutate("s", func(r *PreflightRequest) { r.Context.ExpectedEvidence = nil }))
	must(t).Equal(http.StatusOK, w.Code)

	frames := hs.frames("kind=autonomy.preflight")
	must(t).Len(frames, 1, "exactly one frame per decision")
	fr := frames[0]
	expect(t).Equal(uint64(1), fr.Seq)
	_, err := time.Parse(time.RFC3339Nano, fr.Time)
	must(t).NoError(err)

	var keys []string
	for k := range fr.Attrs {
		keys = append(keys, k)
	}
	expect(t).ElementsMatch([]string{
		"preflight_id", "audit_id", "outcome", "reason", "policy_ref", "lock_fingerprint",
		"plan_hash", "capability", "zone", "environment", "actor_node_id", "actor_agent_id",
		"contract_results", "repair_hints_count", "expires_at", "decision_json", "session_id",
	}, keys)

	expect(t).Equal(d.PreflightID, fr.stringAttr("preflight_id"))
	expect(t).Equal(d.AuditID, fr.stringAttr("audit_id"))
	expect(t).Equal(OutcomeRepairRequired, fr.stringAttr("outcome"))
	expect(t).Equal("contract: evidence_missing", fr.stringAttr("reason"))
	expect(t).Equal("blake3:plan-s", fr.stringAttr("plan_hash"))
	expect(t).Equal("s", fr.stringAttr("session_id"))
	expect(t).Equal("tool.echo", fr.stringAttr("capability"))
	expect(t).Equal("default", fr.stringAttr("zone"))
	expect(t).Equal("edge", fr.stringAttr("environment"))
	expect(t).Equal("node-a", fr.stringAttr("actor_node_id"))
	expect(t).Equal("agent-1", fr.stringAttr("actor_agent_id"))
	expect(t).JSONEq(`1`, string(fr.Attrs["repair_hints_count"]), "an int, not a string")
	expect(t).Equal("", fr.stringAttr("expires_at"))
	expect(t).JSONEq(`""`, string(fr.Attrs["expires_at"]))

	var results []ContractResult
	must(t).NoError(json.Unmarshal([]byte(fr.stringAttr("contract_results")), &results))
	expect(t).Equal(d.ContractResults, results)
	expect(t).Equal(w.Body.String(), fr.stringAttr("decision_json"), "decision_json is byte-identical to the POST body")

	t.Run("optional attrs omitted when unset", func(t *testing.T) {
		hs := newHarness(t, Config{})
		hs.mustPost(mutate("s", func(r *PreflightRequest) {
			r.Intent.PlanHash = ""
			r.Actor = Actor{SessionID: "s"}
			r.Context = PlanContext{}
		}))
		fr := hs.frames("kind=autonomy.preflight")
		must(t).Len(fr, 1)
		for _, k := range []string{"plan_hash", "zone", "environment", "actor_node_id", "actor_agent_id"} {
			expect(t).NotContains(fr[0].Attrs, k)
		}
		expect(t).Equal("contract: session_metadata_missing", fr[0].stringAttr("reason"))
	})
}

func TestGetPreflight(t *testing.T) {
	hs := newHarness(t, Config{})
	post, d := hs.post(goodRequest("s"))
	must(t).Equal(http.StatusOK, post.Code)

	w := hs.do(http.MethodGet, "/v1/preflight/"+d.PreflightID, "")
	must(t).Equal(http.StatusOK, w.Code)
	expect(t).Equal("application/json", w.Header().Get("Content-Type"))
	expect(t).Equal(post.Body.Bytes(), w.Body.Bytes(), "verbatim")

	cases := []struct {
		name, method, path string
		want               int
	}{
		{"empty id", http.MethodGet, "/v1/preflight/", http.StatusBadRequest},
		{"unknown id", http.MethodGet, "/v1/preflight/" + uuid.NewString(), http.StatusNotFound},
		{"not a uuid", http.MethodGet, "/v1/preflight/nope", http.StatusNotFound},
		{"nested path", http.MethodGet, "/v1/preflight/" + d.PreflightID + "/x", http.StatusNotFound},
		{"wrong method", http.MethodDelete, "/v1/preflight/" + d.PreflightID, http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := hs.do(tc.method, tc.path, "")
			expect(t).Equal(tc.want, w.Code, w.Body.String())
		})
	}

	t.Run("disabled after restart", func(t *testing.T) {
		hs := hs.reopen(Config{Mode: "disabled"})
		expect(t).Equal(http.StatusServiceUnavailable, hs.do(http.MethodGet, "/v1/preflight/"+d.PreflightID, "").Code)
		expect(t).Equal(http.StatusServiceUnavailable, hs.do(http.MethodGet, "/v1/preflight/", "").Code)
	})
	t.Run("emitter not wired", func(t *testing.T) {
		hs := newHarness(t, Config{Emitter: "none"})
		expect(t).Equal(http.StatusServiceUnavailable, hs.do(http.MethodGet, "/v1/preflight/"+d.PreflightID, "").Code)
	})
}

func TestGetPreflightReadError(t *testing.T) {
	hs := newHarness(t, Config{})
	d := hs.mustPost(goodRequest("s"))
	// Damage the committed frame in place, behind the host's back.
	f, err := os.OpenFile(hs.h.wal.path, os.O_WRONLY, 0)
	must(t).NoError(err)
	_, err = f.WriteAt([]byte("##########"), 0)
	must(t).NoError(err)
	must(t).NoError(f.Close())

	w := hs.do(http.MethodGet, "/v1/preflight/"+d.PreflightID, "")
	expect(t).Equal(http.StatusInternalServerError, w.Code)
	expect(t).NotContains(w.Body.String(), "outcome")
}

func TestEmitFailureConsumesNoBudget(t *testing.T) {
	hs := newHarness(t, Config{})
	req := mutate("s", func(r *PreflightRequest) { r.Context.ExpectedEvidence = nil })
	setFail := func(v bool) {
		hs.h.wal.mu.Lock()
		hs.h.wal.fail = v
		hs.h.wal.mu.Unlock()
	}
	setFail(true)
	for range 3 {
		w, _ := hs.post(req)
		must(t).Equal(http.StatusInternalServerError, w.Code)
		expect(t).NotContains(w.Body.String(), "preflight_id")
	}
	setFail(false)
	expect(t).Empty(hs.frames(""), "a failed emit leaves no frame")
	expect(t).Equal(OutcomeRepairRequired, hs.mustPost(req).Outcome)
	expect(t).Equal(OutcomeRepairRequired, hs.mustPost(req).Outcome)
	expect(t).Equal(OutcomeDeny, hs.mustPost(req).Outcome)
}

func TestFaultInjectionWritesNothing(t *testing.T) {
	hs := newHarness(t, Config{Faults: FaultConfig{WALEmit: "fail"}})
	w, _ := hs.post(goodRequest("s"))
	expect(t).Equal(http.StatusInternalServerError, w.Code)
	expect(t).Empty(hs.frames(""))
	expect(t).Zero(hs.walSize())
}
