package sabotage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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

// aglDestination finds where the host sends operation qname: the account
// its contract names (read from the host behind the proxy), looked up in
// the configuration's accounts of the contract's implementation's
// destination. It returns the account's URL and name.
func aglDestination(x *Exchange, qname string) (string, string) {
	a := aglAccount(x, qname)
	return aglStr(a, "url"), aglStr(a, "account")
}

// aglAccount is the configuration of the account operation qname goes to
// (nil when the host has none for it).
func aglAccount(x *Exchange, qname string) map[string]any {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(x.Upstream + aglAPI + "/contracts/" + url.PathEscape(qname))
	if err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	c, _ := aglDoc(b)["contract"].(map[string]any)
	which := "email"
	if aglStr(c, "implementation") == "webhook.post/v1" {
		which = "webhook"
	}
	account := aglStr(c, "destination_account")
	dest, _ := x.Section("agl")[which].(map[string]any)
	if account == "" {
		return dest
	}
	list, _ := dest["accounts"].([]any)
	for _, e := range list {
		a, _ := e.(map[string]any)
		if aglStr(a, "account") == account {
			return a
		}
	}
	return nil
}

// aglEachAccount edits every account of one of the configuration's
// destinations (email or webhook), the entry itself included.
func aglEachAccount(c map[string]map[string]any, which string, edit func(a map[string]any)) {
	d, _ := c["agl"][which].(map[string]any)
	if d == nil {
		return
	}
	edit(d)
	list, _ := d["accounts"].([]any)
	for _, e := range list {
		if a, _ := e.(map[string]any); a != nil {
			edit(a)
		}
	}
}

// aglEffect performs, at the scenario's own fake destination, the send a
// host that ignored the refusal would have made for this dispatch.
func aglEffect(x *Exchange) {
	body := aglDoc(x.Body)
	u, account := aglDestination(x, aglStr(body, "operation"))
	if u == "" {
		return
	}
	op := "op_sabotage_" + time.Now().Format("150405.000000000")
	raw, _ := json.Marshal(map[string]any{"operation_id": op, "operation": aglStr(body, "operation"), "account": account, "payload": body["arguments"]})
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
	permitTokens    []string
	retried         map[string]bool
	edited          map[string]bool // handles of edited draft revisions
	revokedOps      map[string]bool // operations whose permit was revoked
	revokedSubjects map[string]bool // principals whose own grant was revoked
	proposedOwners  map[string]bool // principals who proposed sending a draft
	leaked          map[string]int  // capacity slots a host kept, by host
	refunds         map[string]int  // unsuccessful operations refunded, by execution
	swept           map[string]int  // retention sweeps run, by host
}

// aglRemember and aglRemembered keep facts a rule learns from one exchange
// for a later one. Handles and operation ids are random per scenario, so
// concurrent scenarios never see each other's.
func aglRemember(set *map[string]bool, key string) {
	if key == "" {
		return
	}
	aglSeen.Lock()
	defer aglSeen.Unlock()
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[key] = true
}

func aglRemembered(set *map[string]bool, key string) bool {
	aglSeen.Lock()
	defer aglSeen.Unlock()
	return (*set)[key]
}

// aglDenial is a refusal in the binding's error shape, as the sabotaged
// host would answer it.
func aglDenial(status int, code, category string, step int, detail map[string]any) *Response {
	e := map[string]any{"code": code, "category": category, "message": "refused: " + code, "retryable": false}
	if step > 0 {
		e["step"] = step
	}
	if detail != nil {
		e["detail"] = detail
	}
	r := &Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}}
	r.SetJSON(map[string]any{"error": e})
	return r
}

// aglGetResource matches a read of a resource (a draft).
func aglGetResource(x *Exchange) bool {
	return x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/resources/")
}

// aglRewriteStates renames states in reads of operations (and their
// dispatch answers) and of resources, as a host with another state machine
// would report them.
func aglRewriteStates(ops, resources map[string]string) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		var rename map[string]string
		switch {
		case aglDispatch(x) || aglGetOperation(x):
			rename = ops
		case aglGetResource(x):
			rename = resources
		}
		if rename == nil || r.Status != http.StatusOK {
			return
		}
		d := aglDoc(r.Body)
		st, _ := d["state"].(string)
		if to, ok := rename[st]; ok {
			d["state"] = to
			if to == "Completed" || to == "FailedNoEffect" || to == "Pending" {
				if _, has := d["awaiting_reconciliation"]; has {
					d["awaiting_reconciliation"] = false
				}
			}
			r.SetJSON(d)
		}
	}
}

// aglStep is the step number of a refusal, or 0.
func aglStep(r *Response) int {
	n, _ := aglLookup(aglDoc(r.Body), "error", "step").(json.Number)
	i, _ := n.Int64()
	return int(i)
}

// aglRewriteDenial re-labels a dispatch refusal as the sabotaged host would
// have given it.
func aglRewriteDenial(r *Response, status int, code, category string, step int) {
	d := aglDoc(r.Body)
	e, _ := d["error"].(map[string]any)
	if e == nil {
		return
	}
	e["code"], e["category"], e["step"] = code, category, step
	r.Status = status
	r.SetJSON(d)
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
		ID:       "agl.authority.revocation-stops-dispatch",
		Broken:   "keeps dispatching under a grant that was itself revoked",
		Response: aglRevocation(true),
	},
	{
		ID:       "agl.authority.revocation-cascades",
		Broken:   "revokes only the grant named: grants delegated from it keep proposing and dispatching",
		Response: aglRevocation(false),
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
			// Every operation of the scenario (its names end in its id).
			tools, _ := a["tools"].([]any)
			for _, t := range tools {
				name, _ := t.(string)
				if i := strings.LastIndex(name, "."); i > 0 {
					id := name[i+1:]
					a["tools"] = []string{"mail.send_email." + id, "ledger.transfer." + id}
				}
			}
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
			// Only the cross-process scenarios run under this rule: every
			// one of them has two hosts on one store.
			aglDispatchAnyway("permit_consumed")(x, r)
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
				body, _ := json.Marshal(map[string]any{"operation": op["operation"], "arguments": map[string]any{}})
				aglEffect(&Exchange{Body: body, Config: x.Config, Upstream: x.Upstream})
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
			aglEachAccount(c, "email", func(a map[string]any) { a["honours_idempotency_key"] = false })
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
		ID:     "agl.parallel.revision-cas",
		Broken: "lets concurrent transitions of one revision all succeed: proposals, edits and dispatches alike, whichever came first",
		// Both orders of the dispatch/edit race must end with both taking
		// effect: a late edit is let through, and a late dispatch goes out.
		Response: aglChain(aglAccept(aglPropose, 201, "stale_revision", "invalid_protocol_state"),
			aglAccept(func(x *Exchange) bool {
				return x.Method == http.MethodPut && strings.HasPrefix(x.Path, aglAPI+"/resources/")
			}, 200, "stale_revision", "invalid_protocol_state"),
			aglDispatchAnyway("stale_revision", "invalid_protocol_state")),
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

	// Variants: each breaks what another scenario (or outline row) of the
	// requirement checks, so that every scenario fails against some host.
	{
		ID:      "agl.contract.financial-keeps-external-write",
		Variant: "stored-without-external-write",
		Broken:  "accepts a financial contract that declares both effects but keeps only its application effect, dropping external_write",
		Response: func(x *Exchange, r *Response) {
			if x.Method != http.MethodGet || !strings.HasPrefix(x.Path, aglAPI+"/contracts/") || r.Status != http.StatusOK {
				return
			}
			d := aglDoc(r.Body)
			c, _ := d["contract"].(map[string]any)
			effects, _ := c["possible_effects"].([]any)
			var kept []any
			financial := false
			for _, e := range effects {
				if e == "financial_write" {
					financial = true
				}
				if e != "external_write" {
					kept = append(kept, e)
				}
			}
			if financial {
				c["possible_effects"] = kept
				r.SetJSON(d)
			}
		},
	},
	{
		ID:      "agl.authority.issued-only-by-service",
		Variant: "issuer-is-subject",
		Broken:  "records the principal a grant is for as its issuer, not the authorization service that issued it",
		Response: func(x *Exchange, r *Response) {
			if x.Method != http.MethodGet || !strings.HasPrefix(x.Path, aglAPI+"/grants/") || r.Status != http.StatusOK {
				return
			}
			d := aglDoc(r.Body)
			if sub, _ := d["subject"].(string); sub != "" {
				d["issuer"] = sub
				r.SetJSON(d)
			}
		},
	},
	{
		ID:      "agl.authority.delegation-only-narrows",
		Variant: "inherits-parent-scope",
		Broken:  "gives a delegation its parent's whole operations and resources, whatever narrower scope was asked for",
		Intercept: func(x *Exchange) *Response {
			if x.Method != http.MethodPost || !strings.HasSuffix(x.Path, "/delegations") {
				return nil
			}
			keys, _ := x.Section("agl")["keys"].(map[string]any)
			authority, _ := keys["authority_key"].(string)
			req, err := http.NewRequest(http.MethodGet, x.Upstream+strings.TrimSuffix(x.Path, "/delegations"), nil)
			if err != nil {
				return nil
			}
			req.Header.Set("Authorization", "Bearer "+authority)
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				return nil
			}
			defer resp.Body.Close()
			var parent map[string]any
			if json.NewDecoder(resp.Body).Decode(&parent) != nil || resp.StatusCode != http.StatusOK {
				return nil
			}
			if b := aglDoc(x.Body); b != nil {
				b["operations"], b["resources"] = parent["operations"], parent["resources"]
				x.Body, _ = json.Marshal(b)
			}
			return nil
		},
	},
	{
		ID:       "agl.protocol.states",
		Variant:  "no-proposed",
		Broken:   "has no Proposed state: a draft stays Draft while its proposal awaits approval",
		Response: aglRewriteStates(nil, map[string]string{"Proposed": "Draft"}),
	},
	{
		ID:       "agl.protocol.states",
		Variant:  "denied-reusable",
		Broken:   "returns a draft whose approval was denied to Draft instead of Denied",
		Response: aglRewriteStates(nil, map[string]string{"Denied": "Draft"}),
	},
	{
		ID:       "agl.protocol.states",
		Variant:  "rejected-reusable",
		Broken:   "returns a draft whose send the destination rejected to Authorized instead of FailedNoEffect",
		Response: aglRewriteStates(nil, map[string]string{"FailedNoEffect": "Authorized"}),
	},
	{
		ID:      "agl.protocol.edit-invalidates-approval",
		Variant: "edit-voids-draft",
		Broken:  "voids every approval of an edited draft, the new revision's own included: an edited draft can never be sent",
		Intercept: func(x *Exchange) *Response {
			if !aglDispatch(x) {
				return nil
			}
			h, _ := aglLookup(aglDoc(x.Body), "arguments", "draft").(string)
			if h != "" && aglRemembered(&aglSeen.edited, h) {
				return aglDenial(http.StatusConflict, "stale_revision", "stale_revision", 4, nil)
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			if x.Method == http.MethodPut && strings.HasPrefix(x.Path, aglAPI+"/resources/") && r.Status == http.StatusOK {
				aglRemember(&aglSeen.edited, aglStr(aglDoc(r.Body), "handle"))
			}
		},
	},
	{
		ID:      "agl.approval.binds-exact-arguments",
		Variant: "defaults-unmaterialized-at-dispatch",
		Broken:  "compares a dispatch's arguments as written with the approved snapshot before materializing defaults: an unchanged transfer that leaves its defaulted currency implicit is refused as a mismatch",
		Intercept: func(x *Exchange) *Response {
			if !aglDispatch(x) {
				return nil
			}
			b := aglDoc(x.Body)
			args, _ := b["arguments"].(map[string]any)
			if !strings.HasPrefix(aglStr(b, "operation"), "ledger.transfer") || args == nil {
				return nil
			}
			if _, has := args["currency"]; has {
				return nil
			}
			return aglDenial(http.StatusForbidden, "proposal_mismatch", "proposal_mismatch", 5, map[string]any{"differs": []string{"arguments/currency"}})
		},
	},
	{
		ID:      "agl.approval.revocation-stops-dispatch",
		Variant: "revocation-hides-outcome",
		Broken:  "makes an operation unreadable once its permit is revoked: revocation erases the historical receipt",
		Intercept: func(x *Exchange) *Response {
			if aglGetOperation(x) && aglRemembered(&aglSeen.revokedOps, strings.TrimPrefix(x.Path, aglAPI+"/operations/")) {
				return aglDenial(http.StatusNotFound, "not_found", "not_found", 0, nil)
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			if x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/permits/") && strings.HasSuffix(x.Path, "/revoke") && r.Status == http.StatusOK {
				aglRemember(&aglSeen.revokedOps, aglStr(aglDoc(r.Body), "consumed_by_operation"))
			}
		},
	},
	{
		ID:      "agl.dispatch.step-order",
		Variant: "authority-first",
		Broken:  "checks the grant before the contract and the arguments: a dispatch without a grant is refused at step 3 whatever else is wrong",
		Response: func(x *Exchange, r *Response) {
			if !aglDispatch(x) || r.Status < 400 || aglStr(aglDoc(x.Body), "grant_token") != "" {
				return
			}
			if st := aglStep(r); st == 1 || st == 2 {
				aglRewriteDenial(r, http.StatusForbidden, "authority_missing", "authorization_denied", 3)
			}
		},
	},
	{
		ID:      "agl.dispatch.step-order",
		Variant: "approval-at-claim",
		Broken:  "validates the approval only inside the claim transaction: a revoked permit is refused at step 7, after admission",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && r.Status >= 400 && aglStep(r) == 5 && aglCode(r) == "permit_revoked" {
				aglRewriteDenial(r, r.Status, "permit_revoked", "approval_expired_or_revoked", 7)
			}
		},
	},
	{
		ID:      "agl.dispatch.step-order",
		Variant: "handler-before-claim",
		Broken:  "calls the handler before it persists the claim: when the claim then fails, the message has already gone out",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && r.Status >= 400 && aglCode(r) == "persistence_failure" {
				aglEffect(x)
			}
		},
	},
	{
		ID:       "agl.dispatch.step-order",
		Variant:  "claim-after-call",
		Broken:   "persists the claim only once the external call returns: while the call runs the operation is still Pending and the draft Authorized",
		Response: aglRewriteStates(map[string]string{"Claimed": "Pending"}, map[string]string{"Dispatching": "Authorized"}),
	},
	{
		ID:       "agl.durability.operation-lifecycle",
		Variant:  "terminal-reconciles",
		Broken:   "lets a human reconcile an operation that already ended FailedNoEffect",
		Response: aglAccept(func(x *Exchange) bool { return strings.HasSuffix(x.Path, "/reconcile") }, http.StatusOK, "not_awaiting_reconciliation"),
	},
	{
		ID:       "agl.durability.operation-lifecycle",
		Variant:  "reconciled-not-distinct",
		Broken:   "records a reconciled operation as Completed or FailedNoEffect, as if it had ended so on its own, losing that it was Unknown",
		Response: aglRewriteStates(map[string]string{"ReconciledCompleted": "Completed", "ReconciledNoEffect": "FailedNoEffect"}, nil),
	},
	{
		ID:      "agl.durability.invalid-receipt-not-no-effect",
		Variant: "5xx-no-effect",
		Broken:  "classifies a destination's 5xx answer, which may follow the effect, as no effect",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			out, _ := op["outcome"].(map[string]any)
			n, _ := out["destination_status"].(json.Number)
			if code, _ := n.Int64(); op["state"] != "Unknown" || code < 500 || code > 599 {
				return false
			}
			op["state"], op["awaiting_reconciliation"], out["kind"] = "FailedNoEffect", false, "no_effect"
			return true
		}),
	},
}

// aglRevocation lets through actions refused as grant_revoked: those of the
// principal whose own grant was revoked (own) or those of anyone else, who
// acts under a grant delegated from it (!own). Revoked subjects are learnt
// from the revocations the proxy forwards; principals are random per
// scenario.
func aglRevocation(own bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/grants/") && strings.HasSuffix(x.Path, "/revoke") && r.Status == http.StatusOK {
			aglRemember(&aglSeen.revokedSubjects, aglStr(aglDoc(r.Body), "subject"))
			return
		}
		if r.Status < 400 || aglCode(r) != "grant_revoked" || !(aglPropose(x) || aglDispatch(x)) {
			return
		}
		if aglRemembered(&aglSeen.revokedSubjects, aglStr(aglDoc(x.Body), "principal")) != own {
			return
		}
		if aglDispatch(x) {
			aglDispatchAnyway("grant_revoked")(x, r)
			return
		}
		aglAccept(aglPropose, 201, "grant_revoked")(x, r)
	}
}

func init() { aglRules = append(aglRules, aglRuntimeRules...) }

// aglRuntimeRules break the requirements of the rest of the runtime
// (sections 5 to 12): timeouts, the legacy entry point, handler context,
// party binding, audit storage, retries, admission and scopes,
// cancellation, parallel map and race, retention and recovery.
var aglRuntimeRules = []Rule{
	{
		ID:     "agl.durability.timeout-is-unknown",
		Broken: "classifies a destination that timed out as no effect",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if op["state"] == "Unknown" && strings.Contains(aglOutcomeReason(op), "timed out") {
				op["state"], op["awaiting_reconciliation"] = "FailedNoEffect", false
				return true
			}
			return false
		}),
	},
	{
		ID:     "agl.dispatch.no-legacy-entry-point",
		Broken: "runs a protected handler called through the legacy entry point, without grant or permit",
		Intercept: func(x *Exchange) *Response {
			if !aglIs(x, http.MethodPost, "/legacy/invoke") {
				return nil
			}
			b := aglDoc(x.Body)
			tool := aglStr(b, "tool")
			// The scenario's own contract for the tool: a contract's name
			// ends in the scenario's id, which the arguments carry too (its
			// mailbox ops-<id>@…, its account acct-<id>).
			id := strings.TrimPrefix(strings.SplitN(aglStr(b, "arguments", "from"), "@", 2)[0], "ops-")
			if id == "" {
				id = strings.TrimPrefix(aglStr(b, "arguments", "account"), "acct-")
			}
			op := map[string]string{"email.send/v1": "mail.send_email." + id, "webhook.post/v1": "ledger.transfer." + id}[tool]
			if strings.HasPrefix(tool, "mail.send_email.") || strings.HasPrefix(tool, "ledger.transfer.") {
				op = tool
			}
			if op == "" {
				return nil
			}
			raw, _ := json.Marshal(map[string]any{"operation": op, "arguments": b["arguments"]})
			aglEffect(&Exchange{Body: raw, Config: x.Config, Upstream: x.Upstream})
			r := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
			r.SetJSON(map[string]any{"tool": tool, "result": map[string]any{"sent": true}})
			return r
		},
	},
	{
		ID:     "agl.dispatch.handler-context",
		Broken: "calls its handlers the legacy way: the message carries the arguments but no grant, permit or execution context",
		Config: aglProxyDestinations(func(m map[string]any, _ http.Header) { delete(m, "context") }),
	},
	{
		ID:      "agl.dispatch.handler-context",
		Variant: "grant-of-proposal",
		Broken:  "hands the handler the principal's root grant, whatever grant the dispatch ran under, and numbers no attempts",
		Config: aglProxyDestinations(func(m map[string]any, _ http.Header) {
			if c, _ := m["context"].(map[string]any); c != nil {
				c["grant_id"], c["attempt"] = "grant_root_of_"+aglStr(c, "principal"), 1
			}
		}),
	},
	{
		ID:     "agl.durability.distinct-operation-ids",
		Broken: "identifies a tool call by its parent execution: every call of one execution is sent as the same operation",
		Config: aglProxyDestinations(func(m map[string]any, h http.Header) {
			exec := aglStr(m, "context", "execution_id")
			if exec == "" {
				return
			}
			m["operation_id"] = exec
			h.Set("Idempotency-Key", exec)
			h.Set("X-AGL-Operation-Id", exec)
		}),
	},
	{
		ID:     "agl.approval.binds-parties",
		Broken: "compares only the arguments and the destination with the approved snapshot: any principal or execution may spend a permit",
		Response: func(x *Exchange, r *Response) {
			if !aglDispatch(x) || aglCode(r) != "proposal_mismatch" {
				return
			}
			differs, _ := aglLookup(aglDoc(r.Body), "error", "detail", "differs").([]any)
			for _, d := range differs {
				if d == "principal" || d == "execution_id" {
					aglDispatchAnyway("proposal_mismatch")(x, r)
					return
				}
			}
		},
	},
	{
		ID:       "agl.approval.policy-change-voids",
		Broken:   "honours a permit under whatever deployment policy was in force when it was approved",
		Response: aglDispatchAnyway("policy_fingerprint_mismatch", "deployment_restricted"),
	},
	{
		ID:     "agl.audit.snapshot-by-reference",
		Broken: "copies each action's snapshot arguments into its audit records",
		Response: aglRewriteAudit(func(rec map[string]any, snapshot map[string]any) {
			rec["snapshot"] = snapshot["arguments"]
		}),
	},
	{
		ID:     "agl.audit.keyed-field-digests",
		Broken: "keeps plain SHA-256 digests of the argument values in its audit trail, for searching",
		Response: aglRewriteAudit(func(rec map[string]any, snapshot map[string]any) {
			if rec["event"] != "claimed" {
				return
			}
			fd := map[string]any{}
			var walk func(v any, path string)
			walk = func(v any, path string) {
				switch t := v.(type) {
				case map[string]any:
					for k, e := range t {
						walk(e, path+"/"+k)
					}
				case []any:
					for i, e := range t {
						walk(e, path+"/"+strconv.Itoa(i))
					}
				case string:
					sum := sha256.Sum256([]byte(t))
					fd[path] = "sha256:" + hex.EncodeToString(sum[:])
				case json.Number:
					sum := sha256.Sum256([]byte(t.String()))
					fd[path] = "sha256:" + hex.EncodeToString(sum[:])
				}
			}
			walk(snapshot["arguments"], "/arguments")
			rec["field_digests"] = fd
		}),
	},
	{
		ID:     "agl.retry.authority-rechecked",
		Broken: "retries an uncertain send without looking at its grant or permit again: a revocation between attempts does not stop the next attempt",
		Response: aglRewriteOperation(func(x *Exchange, op map[string]any) bool {
			reason := aglOutcomeReason(op)
			if op["state"] != "Unknown" || !(strings.Contains(reason, "no retry: permit_revoked") || strings.Contains(reason, "no retry: grant_revoked")) {
				return false
			}
			// The attempt the broken host would have made, with the same key.
			aglResend(x, op)
			op["state"], op["awaiting_reconciliation"], op["attempt"] = "Completed", false, json.Number("2")
			return true
		}),
	},
	{
		ID:     "agl.retry.retries-while-allowed",
		Broken: "never retries a deduplicated operation at all (faithful to the text, which permits retries; not to parley's binding)",
		Config: func(c map[string]map[string]any) {
			aglEachAccount(c, "email", func(a map[string]any) { a["honours_idempotency_key"] = false })
		},
	},
	{
		ID:     "agl.retry.attempt-budget",
		Broken: "ignores the contract's attempt budget and retries until the destination answers",
		Intercept: aglRewriteContract(func(sc map[string]any) {
			sc["max_attempts"] = 10
		}),
	},
	{
		ID:      "agl.retry.retries-while-allowed",
		Variant: "off-by-one",
		Broken:  "counts the first attempt against the budget twice: it makes one attempt fewer than the contract allows",
		Intercept: aglRewriteContract(func(sc map[string]any) {
			if n := aglInt(sc["max_attempts"]); n > 1 {
				sc["max_attempts"] = n - 1
			}
		}),
	},
	{
		ID:     "agl.retry.selector-honoured",
		Broken: "reads the retry selector backwards: it retries every failure the selector does not name, and none it does",
		Intercept: aglRewriteContract(func(sc map[string]any) {
			named, ok := sc["retry_on"].([]any)
			if !ok {
				return
			}
			var inverse []string
			for _, k := range []string{"destination_error", "timeout", "connection_lost", "unreadable_receipt"} {
				found := false
				for _, n := range named {
					found = found || n == k
				}
				if !found {
					inverse = append(inverse, k)
				}
			}
			sc["retry_on"] = inverse
		}),
	},
	{
		ID:     "agl.dispatch.admission-rechecks-authority",
		Broken: "checks authority before it waits for capacity and not again after: a revocation during the wait does not stop the dispatch",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && aglStep(r) == 6 {
				aglDispatchAnyway("permit_revoked", "grant_revoked")(x, r)
			}
		},
	},
	{
		ID:      "agl.dispatch.admission-rechecks-authority",
		Variant: "never-waits",
		Broken:  "never waits for capacity: a dispatch that finds none is refused at once",
		Config: func(c map[string]map[string]any) {
			if s := c["agl"]; s != nil {
				s["admission_wait_ms"] = 1
			}
			aglEachAccount(c, "email", func(a map[string]any) {
				if a["max_concurrent_dispatches"] != nil {
					a["admission_wait_ms"] = 1
				}
			})
		},
	},
	{
		ID:     "agl.dispatch.capacity-released",
		Broken: "keeps the capacity slot of a dispatch whose claim failed: enough failed claims and nothing is admitted again",
		// Slots leak per destination account (each has its own limit on a
		// fixture host), and the admission seam read for that account shows
		// them held.
		Intercept: func(x *Exchange) *Response {
			if !aglDispatch(x) {
				return nil
			}
			a := aglAccount(x, aglStr(aglDoc(x.Body), "operation"))
			leaked := aglCount(&aglSeen.leaked, aglHostKey(x)+"\x00"+aglStr(a, "account"), 0)
			capacity := aglInt(a["max_concurrent_dispatches"])
			if f, ok := a["max_concurrent_dispatches"].(float64); ok {
				capacity = int64(f)
			}
			if capacity == 0 {
				capacity = 32
			}
			if int64(leaked) >= capacity {
				d := aglDenial(http.StatusTooManyRequests, "capacity_unavailable", "capacity", 6, nil)
				d.SetJSON(map[string]any{"error": map[string]any{"code": "capacity_unavailable", "category": "capacity", "step": 6, "message": "no capacity", "retryable": true}})
				return d
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			host := aglHostKey(x)
			switch {
			case aglDispatch(x) && aglCode(r) == "persistence_failure" && aglStep(r) == 7:
				a := aglAccount(x, aglStr(aglDoc(x.Body), "operation"))
				aglCount(&aglSeen.leaked, host+"\x00"+aglStr(a, "account"), 1)
			case x.Method == http.MethodGet && x.Path == "/conformance/seams/agl/admission" && r.Status == http.StatusOK:
				d := aglDoc(r.Body)
				d["in_use"] = aglCount(&aglSeen.leaked, host+"\x00"+x.Query.Get("account"), 0)
				r.SetJSON(d)
			}
		},
	},
	{
		ID:     "agl.dispatch.budget-not-refunded",
		Broken: "refunds the budget of an operation whose result was unsuccessful or uncertain",
		Response: func(x *Exchange, r *Response) {
			switch {
			case aglDispatch(x) && r.Status == http.StatusOK:
				if st := aglStr(aglDoc(r.Body), "state"); st == "Unknown" || st == "FailedNoEffect" {
					aglCount(&aglSeen.refunds, aglStr(aglDoc(x.Body), "execution_id"), 1)
				}
			case x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/scopes/") && r.Status == http.StatusOK:
				d := aglDoc(r.Body)
				if n := aglCount(&aglSeen.refunds, aglStr(d, "execution_id"), 0); n > 0 {
					if u, _ := d["used"].(map[string]any); u != nil {
						used := aglInt(u["tool_calls"])
						u["tool_calls"] = used - int64(n)
						r.SetJSON(d)
					}
				}
			case aglDispatch(x) && aglCode(r) == "budget_exhausted":
				if aglCount(&aglSeen.refunds, aglStr(aglDoc(x.Body), "execution_id"), 0) > 0 {
					aglDispatchAnyway("budget_exhausted")(x, r)
				}
			}
		},
	},
	{
		ID:     "agl.parallel.nested-budgets",
		Broken: "keeps a budget per scope only: a child may be larger than its parent, and what children spend is not spent in the parent",
		Response: aglChain(
			aglAccept(func(x *Exchange) bool { return strings.HasSuffix(x.Path, "/children") }, http.StatusCreated, "budget_exceeds_parent"),
			func(x *Exchange, r *Response) {
				if aglDispatch(x) && aglCode(r) == "budget_exhausted" {
					aglDispatchAnyway("budget_exhausted")(x, r)
				}
			}),
	},
	{
		ID:     "agl.parallel.map-single-claim",
		Broken: "runs every branch of a map as it comes: branches that share a permit each dispatch",
		Intercept: func(x *Exchange) *Response {
			if !aglIs(x, http.MethodPost, "/parallel") {
				return nil
			}
			b := aglDoc(x.Body)
			branches, _ := b["branches"].([]any)
			seen, shared := map[string]bool{}, false
			for _, e := range branches {
				t := aglStr(e.(map[string]any), "permit_token")
				shared = shared || (t != "" && seen[t])
				seen[t] = true
			}
			if b["mode"] != "map" || !shared {
				return nil
			}
			var results []any
			for i, e := range branches {
				br := e.(map[string]any)
				raw, _ := json.Marshal(map[string]any{"operation": br["operation"], "arguments": br["arguments"]})
				aglEffect(&Exchange{Body: raw, Config: x.Config, Upstream: x.Upstream})
				results = append(results, map[string]any{"index": i, "status": 200, "operation": map[string]any{"operation_id": "op_sabotage", "state": "Completed"}})
			}
			r := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
			r.SetJSON(map[string]any{"mode": "map", "results": results})
			return r
		},
	},
	{
		ID:      "agl.parallel.map-single-claim",
		Variant: "refuses-every-map",
		Broken:  "refuses every map of more than one branch as if its branches shared a permit",
		Intercept: func(x *Exchange) *Response {
			if !aglIs(x, http.MethodPost, "/parallel") {
				return nil
			}
			b := aglDoc(x.Body)
			if branches, _ := b["branches"].([]any); b["mode"] == "map" && len(branches) > 1 {
				return aglDenial(http.StatusForbidden, "permit_shared_across_branches", "authorization_denied", 0, nil)
			}
			return nil
		},
	},
	{
		ID:     "agl.parallel.race-no-half-claim",
		Broken: "stops a race's losers without recording how they ended: their operations stay Claimed",
		Response: func(x *Exchange, r *Response) {
			if x.Method != http.MethodGet || x.Path != aglAPI+"/operations" || r.Status != http.StatusOK {
				return
			}
			d := aglDoc(r.Body)
			ops, _ := d["operations"].([]any)
			for _, e := range ops {
				op, _ := e.(map[string]any)
				if aglStr(op, "outcome", "failure") == "cancelled" {
					op["state"], op["outcome"] = "Claimed", nil
				}
			}
			r.SetJSON(d)
		},
	},
	{
		ID:     "agl.cancel.before-claim",
		Broken: "acknowledges a cancellation but lets the dispatch go on",
		Intercept: func(x *Exchange) *Response {
			if x.Method != http.MethodPost || !strings.HasSuffix(x.Path, "/cancel") {
				return nil
			}
			id := strings.TrimSuffix(strings.TrimPrefix(x.Path, aglAPI+"/operations/"), "/cancel")
			r := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
			r.SetJSON(map[string]any{"operation_id": id, "cancelled": true, "phase": "before_claim"})
			return r
		},
	},
	{
		ID:     "agl.cancel.after-effect-started",
		Broken: "treats a write cancelled in flight as having had no effect and frees its permit",
		Response: aglChain(aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if op["state"] == "Unknown" && aglStr(op, "outcome", "failure") == "cancelled" {
				op["state"], op["awaiting_reconciliation"] = "FailedNoEffect", false
				return true
			}
			return false
		}), aglDispatchAnyway("uncertain_completion")),
	},
	{
		ID:       "agl.dispatch.permit.single-claim",
		Variant:  "check-then-act",
		Broken:   "checks that the permit is unclaimed and then claims it without a guard: every dispatch that passed the check before another's claim committed goes out too",
		Response: aglCheckThenAct(false),
	},
	{
		ID:       "agl.dispatch.permit.single-claim-cross-process",
		Variant:  "check-then-act",
		Broken:   "guards the claim with a lock of its own process only: a dispatch at the other host that passed the check before the claim committed goes out too",
		Response: aglCheckThenAct(true),
	},
	{
		ID:      "agl.parallel.revision-cas",
		Variant: "check-then-act",
		Broken:  "checks the draft's state before the proposal transaction and updates it without a compare-and-swap: every proposal that saw Draft is accepted",
		Response: func(x *Exchange, r *Response) {
			if aglPropose(x) && aglStep(r) == 7 && aglCode(r) == "stale_revision" {
				aglAccept(aglPropose, http.StatusCreated, "stale_revision")(x, r)
			}
		},
	},
	{
		ID:     "agl.retention.consumed-permit-tombstone",
		Broken: "prunes consumed-permit tombstones older than its retention period: after the sweep an old permit dispatches again",
		Response: func(x *Exchange, r *Response) {
			host := aglHostKey(x)
			switch {
			case x.Method == http.MethodPost && x.Path == "/conformance/seams/agl/retention" && r.Status == http.StatusOK:
				aglCount(&aglSeen.swept, host, 1)
			case aglDispatch(x) && aglCount(&aglSeen.swept, host, 0) > 0:
				aglDispatchAnyway("permit_consumed", "uncertain_completion")(x, r)
			}
		},
	},
	{
		ID:     "agl.retention.pending-intent-kept",
		Broken: "deletes pending intents older than its retention period, whatever permit could still dispatch them",
		Intercept: func(x *Exchange) *Response {
			if aglCount(&aglSeen.swept, aglHostKey(x), 0) == 0 {
				return nil
			}
			switch {
			case aglGetOperation(x):
				return aglDenial(http.StatusNotFound, "not_found", "request", 0, nil)
			case aglDispatch(x) && aglStr(aglDoc(x.Body), "permit_token") != "":
				return aglDenial(http.StatusForbidden, "unbound_approval", "authorization_denied", 5, nil)
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			if x.Method == http.MethodPost && x.Path == "/conformance/seams/agl/retention" && r.Status == http.StatusOK {
				aglCount(&aglSeen.swept, aglHostKey(x), 1)
			}
		},
	},
	{
		ID:     "agl.recovery.completed-not-recontacted",
		Broken: "replays a dispatch of a finished operation by running its handler again (under the same key) before it answers that the permit was used",
		Response: func(x *Exchange, r *Response) {
			if !aglDispatch(x) {
				return
			}
			if c := aglCode(r); c == "permit_consumed" || c == "uncertain_completion" {
				id, _ := aglLookup(aglDoc(r.Body), "error", "detail", "operation_id").(string)
				aglResend(x, map[string]any{"operation_id": id, "operation": aglStr(aglDoc(x.Body), "operation")})
			}
		},
	},
	{
		ID:       "agl.recovery.fingerprints-checked",
		Broken:   "resumes an interrupted deduplicated send on recovery without checking the contract it was approved under",
		Response: aglResumeUnchecked,
	},
	{
		ID:       "agl.recovery.resumes-deduplicated-send",
		Variant:  "unchecked",
		Broken:   "resumes an interrupted deduplicated send on recovery without checking the contract it was approved under, and records no stop",
		Response: aglResumeUnchecked,
	},
	{
		ID:     "agl.recovery.resumes-deduplicated-send",
		Broken: "never resumes an interrupted send, even one it could settle safely under its key (faithful to the text, not to parley's binding)",
		Config: func(c map[string]map[string]any) {
			aglEachAccount(c, "email", func(a map[string]any) { a["honours_idempotency_key"] = false })
		},
	},
	{
		ID:     "agl.recovery.no-regeneration",
		Broken: "re-creates unfinished actions on restart: an intent runs as a new operation, and an interrupted one is proposed again",
		Response: func(x *Exchange, r *Response) {
			switch {
			case aglDispatch(x) && r.Status == http.StatusOK:
				d := aglDoc(r.Body)
				if id := aglStr(d, "operation_id"); id != "" {
					d["operation_id"] = id + "-regenerated"
					r.SetJSON(d)
				}
			case x.Method == http.MethodGet && x.Path == aglAPI+"/operations" && r.Status == http.StatusOK:
				d := aglDoc(r.Body)
				ops, _ := d["operations"].([]any)
				for _, e := range ops {
					op, _ := e.(map[string]any)
					if op["state"] == "Unknown" || op["state"] == "Pending" {
						again := map[string]any{}
						for k, v := range op {
							again[k] = v
						}
						again["operation_id"], again["state"] = aglStr(op, "operation_id")+"-regenerated", "Pending"
						ops = append(ops, again)
						break
					}
				}
				d["operations"] = ops
				r.SetJSON(d)
			}
		},
	},
	{
		ID:     "agl.protocol.independent-resources",
		Broken: "keeps one protocol state per principal, not per resource: proposing one draft moves every draft of its owner",
		Response: func(x *Exchange, r *Response) {
			switch {
			case aglPropose(x) && r.Status == http.StatusCreated:
				aglRemember(&aglSeen.proposedOwners, aglStr(aglDoc(x.Body), "principal"))
			case aglGetResource(x) && r.Status == http.StatusOK:
				d := aglDoc(r.Body)
				if d["state"] == "Draft" && aglRemembered(&aglSeen.proposedOwners, aglStr(d, "owner")) {
					d["state"] = "Proposed"
					r.SetJSON(d)
				}
			}
		},
	},
}

// aglProxyDestinations returns a configuration rule that puts a mutating
// proxy between the host and each fake destination the scenario runs: the
// host is told the proxy's URL, and edit rewrites every message it sends
// (its JSON body and headers) before the fake sees it, as a host whose
// handler sent that message would. Lookups pass through untouched. One
// proxy per destination URL, kept for the life of the process.
func aglProxyDestinations(edit func(body map[string]any, h http.Header)) func(c map[string]map[string]any) {
	var mu sync.Mutex
	proxies := map[string]string{}
	proxy := func(upstream string) string {
		mu.Lock()
		defer mu.Unlock()
		if u, ok := proxies[upstream]; ok {
			return u
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
			hdr := r.Header.Clone()
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/send") {
				if m := aglDoc(body); m != nil {
					edit(m, hdr)
					body, _ = json.Marshal(m)
				}
			}
			req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			req.Header = hdr
			req.Header.Del("Content-Length")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// The fake hung up or the host gave up: so does the proxy.
				panic(http.ErrAbortHandler)
			}
			defer resp.Body.Close()
			for k, vs := range resp.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return upstream
		}
		go func() { _ = (&http.Server{Handler: h}).Serve(ln) }()
		u := "http://" + ln.Addr().String()
		proxies[upstream] = u
		return u
	}
	return func(c map[string]map[string]any) {
		for _, which := range []string{"email", "webhook"} {
			aglEachAccount(c, which, func(a map[string]any) {
				u, _ := a["url"].(string)
				if pu, err := url.Parse(u); err == nil && pu.Host != "" {
					// One proxy per destination server: an account's path
					// goes through unchanged.
					a["url"] = proxy(pu.Scheme+"://"+pu.Host) + pu.Path
				}
			})
		}
	}
}

// aglRewriteAudit edits every audit record that names a proposal, handing
// edit the proposal's snapshot as the host holds it (read from the host
// behind the proxy, as a host that copied it would have it).
func aglRewriteAudit(edit func(rec, snapshot map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !aglIs(x, http.MethodGet, "/audit") || r.Status != http.StatusOK {
			return
		}
		d := aglDoc(r.Body)
		recs, _ := d["records"].([]any)
		snaps := map[string]map[string]any{}
		for _, e := range recs {
			rec, _ := e.(map[string]any)
			id := aglStr(rec, "proposal_id")
			if id == "" {
				continue
			}
			if _, ok := snaps[id]; !ok {
				snaps[id] = nil
				if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(x.Upstream + aglAPI + "/proposals/" + id); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					snap, _ := aglDoc(b)["snapshot"].(map[string]any)
					snaps[id] = snap
				}
			}
			if snaps[id] != nil {
				edit(rec, snaps[id])
			}
		}
		r.SetJSON(d)
	}
}

// aglRewriteContract edits the scheduling contract of every contract the
// operator registers, on its way to the host.
func aglRewriteContract(edit func(sc map[string]any)) func(x *Exchange) *Response {
	return func(x *Exchange) *Response {
		if !aglIs(x, http.MethodPost, "/contracts") {
			return nil
		}
		c := aglDoc(x.Body)
		if sc, _ := c["scheduling_contract"].(map[string]any); sc != nil {
			edit(sc)
			x.Body, _ = json.Marshal(c)
		}
		return nil
	}
}

// aglResend sends again, at the scenario's email destination, the message
// of an operation the host ran, with its key: the attempt a host that
// retried would have made.
func aglResend(x *Exchange, op map[string]any) {
	u, account := aglDestination(x, aglStr(op, "operation"))
	id := aglStr(op, "operation_id")
	if u == "" || id == "" {
		return
	}
	raw, _ := json.Marshal(map[string]any{"operation_id": id, "account": account})
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(u, "/")+"/send", bytes.NewReader(raw))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	req.Header.Set("X-AGL-Operation-Id", id)
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
		resp.Body.Close()
	}
}

// aglHostKey tells apart the hosts of concurrent scenarios: each has an
// address of its own (a fixture's role keys are shared by every instance).
func aglHostKey(x *Exchange) string { return x.Upstream }

// aglCount adds delta to a counter kept for key and returns its value.
func aglCount(m *map[string]int, key string, delta int) int {
	aglSeen.Lock()
	defer aglSeen.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[key] += delta
	return (*m)[key]
}

// aglCheckThenAct emulates a host whose claim has no atomic guard: a
// dispatch refused inside the claim transaction (step 7) had passed the
// step 4 and 5 checks while the permit was still unclaimed, which is exactly
// the window in which such a host lets it through. Dispatches refused at
// step 4 or 5 came after the claim and are refused by that host too. So the
// emulation fails a scenario only when the contenders really overlapped:
// what the barrier seam guarantees. shared limits it to hosts on a shared
// store.
func aglCheckThenAct(shared bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		_ = shared // only the scenarios of the rule's requirement run under it
		if aglDispatch(x) && aglStep(r) == 7 && aglCode(r) == "permit_consumed" {
			aglDispatchAnyway("permit_consumed")(x, r)
		}
	}
}

// aglInt reads a JSON integer; anything else reads as 0.
func aglInt(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}

func aglLookup(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// aglResumeUnchecked is a host whose recovery resends an interrupted
// deduplicated send without checking the contract it was approved under,
// and reports it settled: it breaks the spec row (nothing may be sent after
// the contract changed) and parley's binding (a resend is recorded as such).
var aglResumeUnchecked = aglRewriteOperation(func(x *Exchange, op map[string]any) bool {
	if op["state"] != "Unknown" || !strings.Contains(aglOutcomeReason(op), "stopped while the operation was claimed") {
		return false
	}
	aglResend(x, op)
	op["state"], op["awaiting_reconciliation"] = "ReconciledCompleted", false
	op["reconciliation"] = map[string]any{"method": "idempotent_retry", "resolution": "completed", "at": time.Now().UTC().Format(time.RFC3339)}
	return true
})
