package sabotage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// AGL workflow-checker rules (profile agl-checker, and module-interface
// compatibility in agl-core). A checker broken for a rule of the judgment is
// one that stops seeing it: the proxy drops the diagnostics of that rule's
// codes from the host's answer, and certifies the workflow when none remain,
// as a checker without the rule would. A checker too strict for a construct
// rejects every workflow that uses it. Each negative fixture is thus shown to
// fail against the checker broken for its own code, each positive one
// against a checker that refuses its construct.

const chkPath = "/agl/v1/workflows/check"

func chkIsCheck(x *Exchange) bool { return x.Method == http.MethodPost && x.Path == chkPath }

func chkDoc(b []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// chkCertificate is the certificate a sabotaged checker answers with.
func chkCertificate(x *Exchange) map[string]any {
	sum := sha256.Sum256(x.Body)
	name, _ := chkDoc(x.Body)["name"].(string)
	return map[string]any{"checked": true, "ir_version": "agl-workflow/1", "diagnostics": []any{},
		"certificate": map[string]any{"certificate_version": "agl-certificate/1", "workflow": name, "ir_version": "agl-workflow/1",
			"ir_digest": "sha256:" + hex.EncodeToString(sum[:]), "canon_version": "agl-canon/1", "checker_version": "sabotaged",
			"effect_bound": []any{}, "resources_after": []any{}}}
}

// chkBlind is a checker that does not see the rules behind codes.
func chkBlind(codes ...string) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !chkIsCheck(x) || r.Status != http.StatusOK {
			return
		}
		d := chkDoc(r.Body)
		list, _ := d["diagnostics"].([]any)
		if d == nil || d["checked"] != false {
			return
		}
		var kept []any
		for _, e := range list {
			m, _ := e.(map[string]any)
			code, _ := m["code"].(string)
			drop := false
			for _, c := range codes {
				drop = drop || code == c
			}
			if !drop {
				kept = append(kept, e)
			}
		}
		if len(kept) == len(list) {
			return
		}
		if len(kept) == 0 {
			r.SetJSON(chkCertificate(x))
			return
		}
		d["diagnostics"] = kept
		r.SetJSON(d)
	}
}

// chkFind walks a workflow for the first node that match accepts and
// returns its span.
func chkFind(v any, match func(node map[string]any) bool) (map[string]any, bool) {
	switch t := v.(type) {
	case map[string]any:
		if _, isStmt := t["kind"]; isStmt && match(t) {
			sp, _ := t["span"].(map[string]any)
			return sp, sp != nil
		}
		for _, k := range []string{"body", "then", "else", "arms", "catch", "branches", "primary"} {
			if sp, ok := chkFind(t[k], match); ok {
				return sp, true
			}
		}
	case []any:
		for _, e := range t {
			if sp, ok := chkFind(e, match); ok {
				return sp, true
			}
		}
	}
	return nil, false
}

func chkKind(kinds ...string) func(node map[string]any) bool {
	return func(n map[string]any) bool {
		k, _ := n["kind"].(string)
		for _, want := range kinds {
			if k == want {
				return true
			}
		}
		return false
	}
}

// chkStrict is a checker that rejects every workflow with a node that match
// accepts, however sound it is.
func chkStrict(code, why string, match func(node map[string]any) bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !chkIsCheck(x) || r.Status != http.StatusOK || chkDoc(r.Body)["checked"] != true {
			return
		}
		sp, ok := chkFind(chkDoc(x.Body), match)
		if !ok {
			return
		}
		r.SetJSON(map[string]any{"checked": false, "ir_version": "agl-workflow/1", "diagnostics": []any{map[string]any{
			"code": code, "message": why, "span": sp, "related": []any{}, "remediation": "rewrite the workflow without it"}}})
	}
}

// chkEditCertificate rewrites a certificate the host issued.
func chkEditCertificate(edit func(x *Exchange, cert map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !chkIsCheck(x) || r.Status != http.StatusOK {
			return
		}
		d := chkDoc(r.Body)
		if cert, _ := d["certificate"].(map[string]any); cert != nil {
			edit(x, cert)
			r.SetJSON(d)
		}
	}
}

// chkSend performs at the scenario's email destination the send a host
// that ignored its refusal would have made.
func chkSend(x *Exchange) {
	dest, _ := x.Section("agl")["email"].(map[string]any)
	u, _ := dest["url"].(string)
	if u == "" {
		return
	}
	op := "op_sabotage_" + time.Now().Format("150405.000000000")
	raw, _ := json.Marshal(map[string]any{"operation_id": op, "operation": "mail.send_email", "payload": chkDoc(x.Body)["arguments"]})
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(u, "/")+"/send", bytes.NewReader(raw))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", op)
	req.Header.Set("X-AGL-Operation-Id", op)
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
		resp.Body.Close()
	}
}

// chkDispatchAnyway completes a refused dispatch that when accepts.
func chkDispatchAnyway(when func(x *Exchange, code string) bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if x.Method != http.MethodPost || x.Path != "/agl/v1/dispatch" || r.Status < 400 {
			return
		}
		e, _ := chkDoc(r.Body)["error"].(map[string]any)
		code, _ := e["code"].(string)
		if !when(x, code) {
			return
		}
		chkSend(x)
		r.Status = http.StatusOK
		r.SetJSON(map[string]any{"operation_id": "op_sabotage", "state": "Completed"})
	}
}

func chkContractVersion(x *Exchange) string {
	if x.Method != http.MethodPost || x.Path != "/agl/v1/contracts" {
		return ""
	}
	v, _ := chkDoc(x.Body)["contract_version"].(string)
	return v
}

// onlyUnlistedChanges is a refusal whose every change (the reference
// host's detail.changes) is one section 10 does not list: a dropped
// authority requirement or a changed idempotency contract.
func onlyUnlistedChanges(r *Response) bool {
	e, _ := r.JSON()["error"].(map[string]any)
	d, _ := e["detail"].(map[string]any)
	changes, _ := d["changes"].([]any)
	for _, c := range changes {
		s, _ := c.(string)
		if !strings.HasPrefix(s, "drops authority requirement ") && s != "changes the idempotency contract" {
			return false
		}
	}
	return len(changes) > 0
}

func chkDenial(status int, code string) *Response {
	r := &Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}}
	r.SetJSON(map[string]any{"error": map[string]any{"code": code, "category": "proposal_mismatch", "message": "refused: " + code, "retryable": false}})
	return r
}

var aglCheckerRules = []Rule{
	{ID: "agl.protocol.static-judgment", Broken: "keeps a resource, and a name a branch bound, available after a join however the joining paths left it",
		Response: chkBlind("AGL-E0210", "AGL-E0001")},
	{ID: "agl.protocol.static-judgment", Variant: "rejects-joins", Broken: "rejects every workflow with a conditional or a match, sound or not",
		Response: chkStrict("AGL-E0210", "joins are not supported", chkKind("if", "match"))},
	{ID: "agl.checker.boolean-no-narrowing", Broken: "lets a Bool narrow a resource, be matched as an outcome and stand in for a permit",
		Response: chkBlind("AGL-E0201", "AGL-E0202", "AGL-E0501")},
	{ID: "agl.checker.boolean-no-narrowing", Variant: "rejects-conditions", Broken: "rejects every workflow with a condition or a match",
		Response: chkStrict("AGL-E0202", "conditions are not supported", chkKind("if", "match"))},
	{ID: "agl.checker.match-exhaustive", Broken: "accepts a match that misses an outcome, names one twice or one that cannot happen",
		Response: chkBlind("AGL-E0401", "AGL-E0402")},
	{ID: "agl.checker.match-exhaustive", Variant: "rejects-matches", Broken: "rejects every workflow with a match",
		Response: chkStrict("AGL-E0401", "matches are not supported", chkKind("match"))},
	{ID: "agl.checker.loop-invariant", Broken: "does not check a loop body's resource invariant at the back edge",
		Response: chkBlind("AGL-E0310", "AGL-E0311")},
	{ID: "agl.checker.loop-invariant", Variant: "rejects-loops", Broken: "rejects every workflow with a loop",
		Response: chkStrict("AGL-E0311", "loops are not supported", chkKind("loop"))},
	{ID: "agl.checker.try-catch", Broken: "lets a catch clause use what the try body consumed, and leaves failure outcomes unhandled",
		Response: chkBlind("AGL-E0101", "AGL-E0330", "AGL-E0331")},
	{ID: "agl.checker.try-catch", Variant: "rejects-try", Broken: "rejects every workflow with a try",
		Response: chkStrict("AGL-E0330", "try is not supported", chkKind("try"))},
	{ID: "agl.checker.fallback-not-affine", Broken: "lets a fallback value stand in for a permit or a handle",
		Response: chkBlind("AGL-E0520")},
	{ID: "agl.checker.fallback-not-affine", Variant: "rejects-fallbacks", Broken: "rejects every fallback",
		Response: chkStrict("AGL-E0520", "fallbacks are not supported", chkKind("fallback"))},
	{ID: "agl.checker.operation-declaration", Broken: "does not hold calls to their declarations",
		Response: chkBlind("AGL-E0110", "AGL-E0120", "AGL-E0130", "AGL-E0201", "AGL-E0002", "AGL-E0901")},
	{ID: "agl.checker.operation-declaration", Variant: "forgets-returned-handles", Broken: "does not track the handles operations return: the certificate lists nothing left available",
		Response: chkEditCertificate(func(_ *Exchange, c map[string]any) { c["resources_after"] = []any{} })},
	{ID: "agl.checker.affine-consumption", Broken: "lets a consumed or moved handle or permit be used again",
		Response: chkBlind("AGL-E0101")},
	{ID: "agl.checker.affine-consumption", Variant: "rejects-moves", Broken: "rejects every workflow that binds one name to another",
		Response: chkStrict("AGL-E0101", "moves are not supported", chkKind("let"))},
	{ID: "agl.checker.permit-binding", Broken: "accepts a protected call without its permit or with a permit for something else",
		Response: chkBlind("AGL-E0140", "AGL-E0141")},
	{ID: "agl.checker.permit-binding", Variant: "rejects-permits", Broken: "rejects every call that presents a permit",
		Response: chkStrict("AGL-E0141", "permits are not supported", func(n map[string]any) bool { return n["kind"] == "call" && n["permit"] != nil })},
	{ID: "agl.checker.stale-handle", Broken: "does not see that an edit makes the old revision's handle, proposal and permit stale",
		Response: chkBlind("AGL-E0230")},
	{ID: "agl.checker.stale-handle", Variant: "rejects-edits", Broken: "rejects every workflow that edits a draft",
		Response: chkStrict("AGL-E0230", "edits are not supported", func(n map[string]any) bool { return n["op"] == "mail.edit_draft" })},
	{ID: "agl.checker.forged-values", Broken: "takes literals and model or host output for handles, permits and outcomes, and lets operations mint permits",
		Response: chkBlind("AGL-E0501", "AGL-E0901")},
	{ID: "agl.checker.forged-values", Variant: "rejects-model-output", Broken: "rejects every workflow that uses a model's output",
		Response: chkStrict("AGL-E0501", "model output is not supported", chkKind("agent"))},
	{ID: "agl.checker.retry-safety", Broken: "lets a retry repeat a non-idempotent write or reuse what a failed attempt consumed",
		Response: chkBlind("AGL-E0320")},
	{ID: "agl.checker.retry-safety", Variant: "rejects-retries", Broken: "rejects every retry",
		Response: chkStrict("AGL-E0320", "retries are not supported", chkKind("retry"))},
	{ID: "agl.checker.parallel-disjoint", Broken: "lets parallel branches and parallel maps share handles and permits",
		Response: chkBlind("AGL-E0601", "AGL-E0603")},
	{ID: "agl.checker.parallel-disjoint", Variant: "rejects-parallel", Broken: "rejects every parallel scope and parallel map",
		Response: chkStrict("AGL-E0601", "parallel scopes are not supported", chkKind("parallel", "parallel_map"))},
	{ID: "agl.checker.race-protected-write", Broken: "allows protected writes inside a race",
		Response: chkBlind("AGL-E0610")},
	{ID: "agl.checker.race-protected-write", Variant: "rejects-races", Broken: "rejects every race",
		Response: chkStrict("AGL-E0610", "races are not supported", chkKind("race"))},
	{ID: "agl.checker.tool-set-effects", Broken: "counts only the tools an agent's prompt lets it use",
		Response: chkBlind("AGL-E0701")},
	{ID: "agl.checker.tool-set-effects", Variant: "rejects-agents", Broken: "rejects every agent step",
		Response: chkStrict("AGL-E0701", "agents are not supported", chkKind("agent"))},
	{ID: "agl.checker.diagnostics", Broken: "lists its diagnostics in an order that depends on how the document was written (the order of its members, its layout)",
		Response: func(x *Exchange, r *Response) {
			if !chkIsCheck(x) || r.Status != http.StatusOK {
				return
			}
			d := chkDoc(r.Body)
			list, _ := d["diagnostics"].([]any)
			if len(list) < 2 || bytes.Contains(x.Body, []byte("\n")) {
				return
			}
			for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
				list[i], list[j] = list[j], list[i]
			}
			r.SetJSON(d)
		}},
	{ID: "agl.checker.diagnostics", Variant: "no-related-spans", Broken: "reports no related spans",
		Response: func(x *Exchange, r *Response) {
			if !chkIsCheck(x) || r.Status != http.StatusOK {
				return
			}
			d := chkDoc(r.Body)
			list, _ := d["diagnostics"].([]any)
			for _, e := range list {
				if m, _ := e.(map[string]any); m != nil {
					m["related"] = []any{}
				}
			}
			r.SetJSON(d)
		}},
	{ID: "agl.checker.ir-versioned", Broken: "certifies any document, whatever IR version it declares and whatever its shape",
		Response: func(x *Exchange, r *Response) {
			if chkIsCheck(x) && r.Status == http.StatusUnprocessableEntity {
				r.Status = http.StatusOK
				r.SetJSON(chkCertificate(x))
			}
		}},
	{ID: "agl.checker.certificate", Broken: "names in its certificate the hash of the bytes received, not of the document's canonical encoding",
		Response: chkEditCertificate(func(x *Exchange, c map[string]any) {
			sum := sha256.Sum256(x.Body)
			c["ir_digest"] = "sha256:" + hex.EncodeToString(sum[:])
		})},
	{ID: "agl.checker.certificate-not-authorization", Broken: "dispatches an approved send presented with a checked-workflow certificate instead of its permit",
		Response: chkDispatchAnyway(func(x *Exchange, code string) bool {
			b := chkDoc(x.Body)
			tok, _ := b["permit_token"].(string)
			return b["approval"] != nil || b["decision"] != nil || strings.HasPrefix(tok, "sha256:")
		})},
	{ID: "agl.contract.interface-compatibility", Broken: "registers incompatible interface changes section 10 lists under a minor version",
		Response: func(x *Exchange, r *Response) {
			// The changes section 10 does not list are parley's binding
			// (agl.contract.interface-binding-changes): they stay refused.
			if chkContractVersion(x) != "" && r.Status == http.StatusConflict && strings.Contains(string(r.Body), "incompatible_contract_change") && !onlyUnlistedChanges(r) {
				r.Status = http.StatusCreated
				r.SetJSON(map[string]any{"accepted": true})
			}
		}},
	{ID: "agl.contract.interface-binding-changes", Broken: "registers the removal of authority and an idempotency change under a minor version (faithful to section 10's list, not to parley's binding)",
		Response: func(x *Exchange, r *Response) {
			// Only those two changes: a change section 10 lists stays
			// refused, so the rule breaks its own id and no other.
			if chkContractVersion(x) != "" && r.Status == http.StatusConflict && strings.Contains(string(r.Body), "incompatible_contract_change") && onlyUnlistedChanges(r) {
				r.Status = http.StatusCreated
				r.SetJSON(map[string]any{"accepted": true})
			}
		}},
	{ID: "agl.contract.interface-compatibility", Variant: "refuses-minor-versions", Broken: "refuses every new minor version, compatible or not",
		Intercept: func(x *Exchange) *Response {
			if v := chkContractVersion(x); strings.Contains(v, ".") {
				return chkDenial(http.StatusConflict, "incompatible_contract_change")
			}
			return nil
		}},
	{ID: "agl.contract.interface-compatibility", Variant: "refuses-new-majors", Broken: "refuses an incompatible change even under a new major version",
		Intercept: func(x *Exchange) *Response {
			if v := chkContractVersion(x); v != "" && v != "1" && !strings.Contains(v, ".") {
				return chkDenial(http.StatusConflict, "incompatible_contract_change")
			}
			return nil
		}},
	{ID: "agl.contract.interface-compatibility", Variant: "fingerprint-kept", Broken: "keeps the contract fingerprint across a compatible version: permits issued before still dispatch",
		Response: chkDispatchAnyway(func(_ *Exchange, code string) bool { return code == "contract_fingerprint_mismatch" })},
}

// Evidence obligations of the checker (features/agl/11_evidence_checker.feature):
// a checker that does not hold publication to them, and one that refuses
// any publication.
func init() {
	evidenceOnly := func(f func(x *Exchange, r *Response)) func(x *Exchange, r *Response) {
		return func(x *Exchange, r *Response) {
			if name, _ := chkDoc(x.Body)["name"].(string); strings.HasPrefix(name, "evidence-") {
				f(x, r)
			}
		}
	}
	aglRules = append(aglRules,
		Rule{ID: "agl.evidence.checker-publication-obligations", Broken: "publishes without looking at the state, presence or origin of the evidence and the report",
			Response: evidenceOnly(chkBlind("AGL-E0201", "AGL-E0110", "AGL-E0501"))},
		Rule{ID: "agl.evidence.checker-publication-obligations", Variant: "rejects-publication", Broken: "rejects every workflow that publishes, whatever its evidence",
			Response: evidenceOnly(chkStrict("AGL-E0201", "publication is never allowed", func(n map[string]any) bool {
				op, _ := n["op"].(string)
				return n["kind"] == "call" && op == "evidence.publish"
			}))},
	)
}
