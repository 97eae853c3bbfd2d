package sabotage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// AGL behavioral-contracts rules, against the binding agl-binding/1
// (docs/agl-binding.md). Where a rule needs the host to have acted (a second
// effect), the proxy performs that effect itself at the fake destination the
// scenario configured, exactly as a host that double-dispatched would: the
// suite counts effects there, not in the host's answer.

const aglAPI = "/agl/v1"

func aglIs(x *Exchange, method, path string) bool {
	return x.Method == method && x.Path == aglAPI+path
}
func aglDispatch(x *Exchange) bool { return aglIs(x, http.MethodPost, "/dispatch") }
func aglPropose(x *Exchange) bool  { return aglIs(x, http.MethodPost, "/proposals") }
func aglGetOperation(x *Exchange) bool {
	return x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/operations/") && !strings.HasSuffix(x.Path, "/reconcile")
}
func aglApprovalRequest(x *Exchange) bool {
	return (x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/approval-requests/")) ||
		(x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/proposals/") && strings.HasSuffix(x.Path, "/approval-requests"))
}

func aglDoc(b []byte) map[string]any { return decodeUseNumber(b) }

func aglStr(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	s, _ := v.(string)
	return s
}

func aglCode(r *Response) string { return aglStr(aglDoc(r.Body), "error", "code") }

// aglEffect performs, at the scenario's own fake destination, the send a
// host that ignored the refusal would have made for this dispatch.
func aglEffect(x *Exchange) {
	body := aglDoc(x.Body)
	which := "email"
	if aglStr(body, "operation") == "ledger.transfer" {
		which = "webhook"
	}
	dest, _ := x.Section("agl")[which].(map[string]any)
	u, _ := dest["url"].(string)
	if u == "" {
		return
	}
	op := "op_sabotage_" + time.Now().Format("150405.000000000")
	raw, _ := json.Marshal(map[string]any{"operation_id": op, "operation": aglStr(body, "operation"), "payload": body["arguments"]})
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(u, "/")+"/send", bytes.NewReader(raw))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", op)
	req.Header.Set("X-AGL-Operation-Id", op)
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// aglDispatchAnyway turns a dispatch refusal with one of codes into a
// completed dispatch with its effect.
func aglDispatchAnyway(codes ...string) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !aglDispatch(x) || r.Status < 400 {
			return
		}
		for _, c := range codes {
			if aglCode(r) == c {
				aglEffect(x)
				r.Status = http.StatusOK
				r.SetJSON(map[string]any{"operation_id": "op_sabotage", "state": "Completed"})
				return
			}
		}
	}
}

// aglAccept turns a refusal with one of codes on matching exchanges into
// the success status.
func aglAccept(match func(*Exchange) bool, status int, codes ...string) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !match(x) || r.Status < 400 {
			return
		}
		for _, c := range codes {
			if aglCode(r) == c {
				r.Status = status
				r.SetJSON(map[string]any{"accepted": true})
				return
			}
		}
	}
}

// aglRewriteOperation edits operation records (a dispatch answer or a GET).
func aglRewriteOperation(edit func(x *Exchange, op map[string]any) bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !(aglDispatch(x) || aglGetOperation(x)) || r.Status != http.StatusOK {
			return
		}
		if op := aglDoc(r.Body); op != nil && edit(x, op) {
			r.SetJSON(op)
		}
	}
}

func aglOutcomeReason(op map[string]any) string { return aglStr(op, "outcome", "reason") }

// aglRewriteAgent edits the agent configuration on its way to the host.
func aglRewriteAgent(edit func(a map[string]any)) func(x *Exchange) *Response {
	return func(x *Exchange) *Response {
		if x.Method != http.MethodPut || !strings.HasPrefix(x.Path, aglAPI+"/agents/") {
			return nil
		}
		if a := aglDoc(x.Body); a != nil {
			edit(a)
			x.Body, _ = json.Marshal(a)
		}
		return nil
	}
}

var aglSeen struct {
	sync.Mutex
	permitTokens []string
	retried      map[string]bool
}

// aglChain applies response rules in turn.
func aglChain(fs ...func(x *Exchange, r *Response)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		for _, f := range fs {
			f(x, r)
		}
	}
}

var aglRules = []Rule{
	{
		ID:       "agl.contract.fingerprint-verified",
		Broken:   "registers a contract whatever implementation fingerprint it quotes, and dispatches permits issued under an older contract",
		Response: aglChain(aglAccept(func(x *Exchange) bool { return aglIs(x, http.MethodPost, "/contracts") }, 201, "implementation_fingerprint_mismatch", "contract_conflict"), aglDispatchAnyway("contract_fingerprint_mismatch")),
	},
	{
		ID:       "agl.contract.financial-keeps-external-write",
		Broken:   "registers a financial contract that dropped external_write",
		Response: aglAccept(func(x *Exchange) bool { return aglIs(x, http.MethodPost, "/contracts") }, 201, "invalid_contract"),
	},
	{
		ID:       "agl.authority.issued-only-by-service",
		Broken:   "issues grants to any caller, and dispatches on a made-up grant",
		Response: aglChain(aglAccept(func(x *Exchange) bool { return aglIs(x, http.MethodPost, "/grants") }, 201, "unauthenticated", "wrong_credentials"), aglDispatchAnyway("authority_missing")),
	},
	{
		ID:       "agl.authority.scope-enforced",
		Broken:   "accepts actions outside the grant's principal, operations, resources or validity",
		Response: aglAccept(func(x *Exchange) bool { return aglPropose(x) || aglDispatch(x) }, 201, "authority_missing", "grant_expired", "grant_not_yet_valid"),
	},
	{
		ID:       "agl.authority.delegation-only-narrows",
		Broken:   "lets a delegation widen its parent",
		Response: aglAccept(func(x *Exchange) bool { return strings.HasSuffix(x.Path, "/delegations") }, 201, "delegation_widens"),
	},
	{
		ID:     "agl.authority.revocation-stops-dispatch",
		Broken: "keeps dispatching under a revoked grant (and its delegations)",
		Response: aglChain(aglDispatchAnyway("grant_revoked"),
			aglAccept(aglPropose, 201, "grant_revoked")),
	},
	{
		ID:     "agl.authority.deployment-policy-intersected",
		Broken: "ignores its deployment policy: the grant alone decides",
		Config: func(c map[string]map[string]any) {
			if s := c["agl"]; s != nil {
				delete(s, "deployment")
			}
		},
	},
	{
		ID:     "agl.dispatch.toolset-enforced",
		Broken: "keeps every registered operation in an agent's tool set whatever the operator narrowed it to",
		Intercept: aglRewriteAgent(func(a map[string]any) {
			a["tools"] = []string{"mail.send_email", "ledger.transfer"}
		}),
	},
	{
		ID:     "agl.dispatch.effect-ceiling",
		Broken: "ignores the agent's effect ceiling",
		Intercept: aglRewriteAgent(func(a map[string]any) {
			a["effect_ceiling"] = []string{"external_write", "email_send", "financial_write"}
		}),
	},
	{
		ID:       "agl.protocol.states",
		Broken:   "dispatches a draft that is not Authorized",
		Response: aglDispatchAnyway("invalid_protocol_state"),
	},
	{
		ID:       "agl.protocol.unknown-not-reusable",
		Broken:   "lets a permit whose send ended Unknown dispatch again",
		Response: aglDispatchAnyway("uncertain_completion", "permit_consumed"),
	},
	{
		ID:       "agl.protocol.edit-invalidates-approval",
		Broken:   "keeps an approval valid across an edit of the draft",
		Response: aglChain(aglDispatchAnyway("stale_revision", "invalid_protocol_state"), aglAccept(func(x *Exchange) bool { return strings.HasSuffix(x.Path, "/decision") }, 201, "request_not_pending")),
	},
	{
		ID:       "agl.protocol.handle-trusted-lookup",
		Broken:   "accepts handles it never issued (or another principal's)",
		Response: aglAccept(aglPropose, 201, "unknown_handle", "authority_missing"),
	},
	{
		ID:     "agl.approval.propose-no-effect",
		Broken: "sends the message when the action is proposed",
		Response: func(x *Exchange, r *Response) {
			if aglPropose(x) && r.Status == http.StatusCreated {
				aglEffect(x)
			}
		},
	},
	{
		ID:       "agl.approval.only-resolver-mints",
		Broken:   "accepts a granted decision from anyone, and a permit token it never issued",
		Response: aglChain(aglAccept(func(x *Exchange) bool { return strings.HasSuffix(x.Path, "/decision") }, 201, "unauthenticated_decision", "approver_role_mismatch", "proposal_mismatch"), aglDispatchAnyway("unauthenticated_decision", "unbound_approval")),
	},
	{
		ID:     "agl.approval.rejection-stops-dispatch",
		Broken: "hands out a permit with a denied decision and dispatches the denied draft",
		Response: aglChain(func(x *Exchange, r *Response) {
			if strings.HasSuffix(x.Path, "/decision") && r.Status == http.StatusOK {
				if d := aglDoc(r.Body); d != nil && d["status"] == "denied" {
					d["permit"] = map[string]any{"permit_id": "permit_sabotage", "permit_token": "apt_sabotage"}
					r.SetJSON(d)
				}
			}
		}, aglDispatchAnyway("invalid_protocol_state")),
	},
	{
		ID:       "agl.approval.binds-exact-arguments",
		Broken:   "dispatches a permit with arguments or a destination other than those approved",
		Response: aglDispatchAnyway("proposal_mismatch"),
	},
	{
		ID:     "agl.approval.defaults-materialized",
		Broken: "shows the approver the arguments as written, defaults left implicit",
		Response: func(x *Exchange, r *Response) {
			if !aglApprovalRequest(x) || r.Status/100 != 2 {
				return
			}
			d := aglDoc(r.Body)
			args, _ := aglLookup(d, "proposal", "snapshot", "arguments").(map[string]any)
			if args == nil {
				return
			}
			delete(args, "currency")
			if p, _ := aglLookup(args, "draft", "payload").(map[string]any); p != nil {
				delete(p, "cc")
				delete(p, "priority")
			}
			r.SetJSON(d)
		},
	},
	{
		ID:     "agl.approval.shown-snapshot-executed",
		Broken: "shows the approver a recipient list other than the one it sends to",
		Response: func(x *Exchange, r *Response) {
			if !aglApprovalRequest(x) || r.Status/100 != 2 {
				return
			}
			d := aglDoc(r.Body)
			if p, _ := aglLookup(d, "proposal", "snapshot", "arguments", "draft", "payload").(map[string]any); p != nil {
				p["to"] = []any{"someone-else@example.com"}
				r.SetJSON(d)
			}
		},
	},
	{
		ID:     "agl.canon.versioned-encoding",
		Broken: "hashes plain JSON of the snapshot instead of the versioned canonical encoding",
		Response: func(x *Exchange, r *Response) {
			if !aglPropose(x) || r.Status != http.StatusCreated {
				return
			}
			d := aglDoc(r.Body)
			plain, _ := json.Marshal(d["snapshot"])
			sum := sha256.Sum256(plain)
			d["canonical_encoding"] = string(plain)
			d["digest"] = "sha256:" + hex.EncodeToString(sum[:])
			r.SetJSON(d)
		},
	},
	{
		ID:       "agl.approval.expiry-stops-dispatch",
		Broken:   "dispatches on an expired permit",
		Response: aglDispatchAnyway("permit_expired"),
	},
	{
		ID:       "agl.approval.revocation-stops-dispatch",
		Broken:   "dispatches on a revoked permit",
		Response: aglDispatchAnyway("permit_revoked"),
	},
	{
		ID:       "agl.dispatch.permit.single-claim",
		Broken:   "dispatches a permit again after it was claimed",
		Response: aglDispatchAnyway("permit_consumed", "unbound_approval"),
	},
	{
		ID:     "agl.dispatch.permit.single-claim-cross-process",
		Broken: "claims a permit exclusively only within one process: a host on a shared store dispatches it again",
		Response: func(x *Exchange, r *Response) {
			if _, shared := x.Section("agl")["database_path"]; shared {
				aglDispatchAnyway("permit_consumed")(x, r)
			}
		},
	},
	{
		ID:     "agl.dispatch.step-order",
		Broken: "checks the approval before authority and effects: those denials come from step 5",
		Response: func(x *Exchange, r *Response) {
			if !aglDispatch(x) || r.Status < 400 || aglStr(aglDoc(x.Body), "permit_token") == "" {
				return
			}
			d := aglDoc(r.Body)
			e, _ := d["error"].(map[string]any)
			if st, _ := e["step"].(json.Number); st == "3" || st == "4" {
				e["step"], e["code"] = 5, "unbound_approval"
				r.SetJSON(d)
			}
		},
	},
	{
		ID:       "agl.dispatch.intent-failure-prevents-dispatch",
		Broken:   "dispatches even when the claim and intent could not be persisted",
		Response: aglDispatchAnyway("persistence_failure"),
	},
	{
		ID:     "agl.dispatch.result-persist-failure-is-unknown",
		Broken: "reports an outcome it could not persist as Completed",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if op["state"] == "Unknown" && strings.Contains(aglOutcomeReason(op), "could not be persisted") {
				op["state"], op["awaiting_reconciliation"] = "Completed", false
				return true
			}
			return false
		}),
	},
	{
		ID:     "agl.durability.operation-lifecycle",
		Broken: "records no Pending operation at proposal time",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if op["state"] == "Pending" {
				op["state"] = "Claimed"
				return true
			}
			return false
		}),
	},
	{
		ID:     "agl.durability.crash-while-claimed-unknown",
		Broken: "silently retries a send whose host crashed while it was claimed",
		Response: aglRewriteOperation(func(x *Exchange, op map[string]any) bool {
			id, _ := op["operation_id"].(string)
			if op["state"] != "Unknown" || !strings.Contains(aglOutcomeReason(op), "stopped while the operation was claimed") {
				return false
			}
			aglSeen.Lock()
			if aglSeen.retried == nil {
				aglSeen.retried = map[string]bool{}
			}
			again := !aglSeen.retried[id]
			aglSeen.retried[id] = true
			aglSeen.Unlock()
			if again {
				aglEffect(&Exchange{Body: []byte(`{"operation":"mail.send_email","arguments":{}}`), Config: x.Config})
			}
			return false
		}),
	},
	{
		ID:     "agl.durability.invalid-receipt-not-no-effect",
		Broken: "classifies an unreadable receipt as no effect",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if op["state"] == "Unknown" && strings.Contains(aglOutcomeReason(op), "unreadable receipt") {
				op["state"], op["awaiting_reconciliation"] = "FailedNoEffect", false
				return true
			}
			return false
		}),
	},
	{
		ID:     "agl.durability.no-blind-retry",
		Broken: "retries an uncertain send to a destination that does not deduplicate",
		Response: func(x *Exchange, r *Response) {
			if !aglDispatch(x) || r.Status != http.StatusOK {
				return
			}
			if op := aglDoc(r.Body); op != nil && op["state"] == "Unknown" {
				aglEffect(x)
				op["state"], op["awaiting_reconciliation"] = "Completed", false
				r.SetJSON(op)
			}
		},
	},
	{
		ID:     "agl.durability.idempotent-retry",
		Broken: "never retries, even when contract and destination promise deduplication",
		Config: func(c map[string]map[string]any) {
			if s := c["agl"]; s != nil {
				if e, _ := s["email"].(map[string]any); e != nil {
					e["honours_idempotency_key"] = false
				}
			}
		},
	},
	{
		ID:     "agl.durability.reconcile",
		Broken: "settles Unknown operations without recording the evidence, and for any authenticated caller",
		Response: aglChain(aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if rc, _ := op["reconciliation"].(map[string]any); rc != nil {
				delete(rc, "evidence")
				delete(rc, "actor")
				return true
			}
			return false
		}), func(x *Exchange, r *Response) {
			if strings.HasSuffix(x.Path, "/reconcile") && r.Status == http.StatusOK {
				if op := aglDoc(r.Body); op != nil {
					if rc, _ := op["reconciliation"].(map[string]any); rc != nil {
						delete(rc, "evidence")
						r.SetJSON(op)
					}
				}
			}
		}),
	},
	{
		ID:     "agl.parallel.race-write-refused",
		Broken: "runs protected writes inside a race",
		Intercept: func(x *Exchange) *Response {
			if aglDispatch(x) {
				if b := aglDoc(x.Body); b != nil {
					if _, ok := b["context"]; ok {
						delete(b, "context")
						x.Body, _ = json.Marshal(b)
					}
				}
			}
			return nil
		},
	},
	{
		ID:       "agl.parallel.revision-cas",
		Broken:   "lets concurrent transitions of one revision all succeed",
		Response: aglChain(aglAccept(aglPropose, 201, "stale_revision", "invalid_protocol_state"), aglDispatchAnyway("stale_revision")),
	},
	{
		ID:     "agl.diag.denials-distinct-not-retryable",
		Broken: "answers every dispatch denial as a retryable 503 network error",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && r.Status >= 400 {
				r.Status = http.StatusServiceUnavailable
				r.Header.Set("Retry-After", "1")
				if d := aglDoc(r.Body); d != nil {
					if e, _ := d["error"].(map[string]any); e != nil {
						e["retryable"] = true
					}
					r.SetJSON(d)
				}
			}
		},
	},
	{
		ID:     "agl.audit.fields",
		Broken: "records no policy fingerprint or decision time in its audit trail",
		Response: func(x *Exchange, r *Response) {
			if !aglIs(x, http.MethodGet, "/audit") || r.Status != http.StatusOK {
				return
			}
			d := aglDoc(r.Body)
			recs, _ := d["records"].([]any)
			for _, e := range recs {
				if m, _ := e.(map[string]any); m != nil {
					delete(m, "policy_fingerprint")
					delete(m, "decision_at")
				}
			}
			r.SetJSON(d)
		},
	},
	{
		ID:     "agl.audit.no-secrets",
		Broken: "writes the permit token it was presented into its audit trail",
		Intercept: func(x *Exchange) *Response {
			if aglDispatch(x) {
				if t := aglStr(aglDoc(x.Body), "permit_token"); t != "" {
					aglSeen.Lock()
					aglSeen.permitTokens = append(aglSeen.permitTokens, t)
					aglSeen.Unlock()
				}
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			if !aglIs(x, http.MethodGet, "/audit") || r.Status != http.StatusOK {
				return
			}
			aglSeen.Lock()
			toks := append([]string(nil), aglSeen.permitTokens...)
			aglSeen.Unlock()
			d := aglDoc(r.Body)
			recs, _ := d["records"].([]any)
			for _, e := range recs {
				if m, _ := e.(map[string]any); m != nil && m["event"] == "claimed" && len(toks) > 0 {
					m["permit_token"] = toks[len(toks)-1]
				}
			}
			r.SetJSON(d)
		},
	},
}

func aglLookup(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}
