package sabotage

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
)

// AGL rules for receipts, repeats and contract interfaces (spec 4.2, 8,
// 10): features/agl/8_receipts_and_repeats.feature and
// features/agl/10_contract_interfaces.feature.

func init() { aglRules = append(aglRules, aglInterfaceRules...) }

var aglInterfaceRules = []Rule{
	{
		ID:     "agl.durability.receipt-violates-output-type",
		Broken: "reads a well-formed JSON receipt that does not match the contract's output type as a refusal before any effect (no effect)",
		Response: aglRewriteOperation(func(x *Exchange, op map[string]any) bool {
			if op["state"] != "Unknown" || !aglSendMet(x, aglStr(op, "operation"), aglStr(op, "operation_id"), "receipt_after_effect") {
				return false
			}
			op["state"], op["awaiting_reconciliation"] = "FailedNoEffect", false
			if out, _ := op["outcome"].(map[string]any); out != nil {
				out["kind"] = "no_effect"
			}
			return true
		}),
	},
	{
		ID:     "agl.retry.idempotency-contract-honoured",
		Broken: "retries an uncertain write whenever the destination deduplicates, whatever the contract's idempotency contract says",
		// The host is told the contract deduplicates by key, which is what
		// a host that decides from the destination's promise alone acts on.
		Intercept: func(x *Exchange) *Response {
			if !aglIs(x, http.MethodPost, "/contracts") {
				return nil
			}
			c := aglDoc(x.Body)
			sc, _ := c["scheduling_contract"].(map[string]any)
			n, _ := sc["max_attempts"].(json.Number)
			if attempts, _ := n.Int64(); c == nil || aglStr(c, "idempotency_contract", "kind") != "none" || attempts < 2 {
				return nil
			}
			c["idempotency_contract"] = map[string]any{"kind": "destination_key"}
			x.Body, _ = json.Marshal(c)
			return nil
		},
	},
	{
		ID:       "agl.recovery.approval-conditions-changed",
		Broken:   "resumes an interrupted deduplicated send on recovery under whatever deployment policy and destination the recovering host runs",
		Response: aglResumeUnchecked,
	},
	{
		ID:     "agl.retry.reserved-at-admission",
		Broken: "charges every retry to the budget when it is made, so under a spent budget the operation stops after its first attempt",
		Response: aglRewriteOperation(func(_ *Exchange, op map[string]any) bool {
			if aglInt(op["attempt"]) < 2 {
				return false
			}
			op["state"], op["attempt"], op["awaiting_reconciliation"] = "Unknown", 1, true
			op["outcome"] = map[string]any{"kind": "uncertain", "failure": "destination_error", "reason": "no retry: budget_exhausted"}
			return true
		}),
	},
	{
		ID:     "agl.canon.array-order-kept",
		Broken: "sorts the items of arrays (an email's recipients) when it snapshots a proposal",
		Response: func(x *Exchange, r *Response) {
			if !aglPropose(x) || r.Status != http.StatusCreated {
				return
			}
			p := aglDoc(r.Body)
			payload, _ := aglLookup(p, "snapshot", "arguments", "draft", "payload").(map[string]any)
			to, _ := payload["to"].([]any)
			if len(to) < 2 {
				return
			}
			sort.Slice(to, func(i, j int) bool { a, _ := to[i].(string); b, _ := to[j].(string); return a < b })
			r.SetJSON(p)
		},
	},
	{
		ID:     "agl.checker.diagnostics-states",
		Broken: "reports a state diagnostic's required and actual states the wrong way round",
		Response: func(x *Exchange, r *Response) {
			if !aglIs(x, http.MethodPost, "/workflows/check") || r.Status != http.StatusOK {
				return
			}
			m := aglDoc(r.Body)
			list, _ := m["diagnostics"].([]any)
			for _, e := range list {
				if d, _ := e.(map[string]any); d != nil && d["required"] != nil && d["actual"] != nil {
					d["required"], d["actual"] = d["actual"], d["required"]
				}
			}
			r.SetJSON(m)
		},
	},
	{
		ID:     "agl.retry.expired-permit-stops-retry",
		Broken: "retries an uncertain send under a permit that expired after the first attempt",
		Response: aglRewriteOperation(func(x *Exchange, op map[string]any) bool {
			if op["state"] != "Unknown" || !strings.Contains(aglOutcomeReason(op), "no retry: permit_expired") {
				return false
			}
			// The attempt the broken host would have made, with the same key.
			aglResend(x, op)
			op["state"], op["awaiting_reconciliation"], op["attempt"] = "Completed", false, json.Number("2")
			return true
		}),
	},
	{
		ID:     "agl.contract.fingerprint-covers-interface",
		Broken: "leaves the module interface (authority, effects, approval, idempotency) out of the contract fingerprint, so a declaration differing only there passes for the registered contract",
		Response: func(x *Exchange, r *Response) {
			if !aglIs(x, http.MethodPost, "/contracts") || r.Status != http.StatusConflict || aglCode(r) != "contract_conflict" {
				return
			}
			c := aglDoc(x.Body)
			reg := aglGet(x, aglAPI+"/contracts/"+url.PathEscape(aglStr(c, "qualified_name")))
			old, _ := reg["contract"].(map[string]any)
			if old == nil || !reflect.DeepEqual(old["scheduling_contract"], c["scheduling_contract"]) {
				return
			}
			// Only the interface differs: the fingerprint the host computes
			// without it is the registered one, "identical".
			r.Status = http.StatusOK
			r.SetJSON(reg)
		},
	},
	{
		ID:     "agl.contract.legacy-not-protected",
		Broken: "registers a legacy tool as the implementation of a protected operation",
		Intercept: aglPretendRegistered(func(c map[string]any) bool {
			return strings.HasPrefix(aglStr(c, "implementation"), "legacy.")
		}),
	},
	{
		ID:     "agl.contract.field-set-validated",
		Broken: "registers a contract after checking only its implementation and fingerprint, whatever its other fields hold",
		Intercept: aglPretendRegistered(func(c map[string]any) bool {
			return strings.HasPrefix(aglStr(c, "qualified_name"), "mail.defective.")
		}),
	},
}

// aglPretendRegistered answers, for the host, a contract registration that
// match selects with 201, and reads of that contract with it: a host that
// registers what it should have refused.
func aglPretendRegistered(match func(c map[string]any) bool) func(x *Exchange) *Response {
	return func(x *Exchange) *Response {
		switch {
		case aglIs(x, http.MethodPost, "/contracts"):
			c := aglDoc(x.Body)
			if c == nil || !match(c) {
				return nil
			}
			reg := map[string]any{"qualified_name": aglStr(c, "qualified_name"), "contract_version": aglStr(c, "contract_version"),
				"contract_fingerprint": "sha256:" + strings.Repeat("1", 64), "implementation_fingerprint": aglStr(c, "implementation_fingerprint"), "contract": c}
			aglLegacy.Lock()
			aglLegacy.registered[aglStr(c, "qualified_name")] = reg
			aglLegacy.Unlock()
			return aglJSONResponse(http.StatusCreated, reg)
		case x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/contracts/"):
			name, _ := url.PathUnescape(strings.TrimPrefix(x.Path, aglAPI+"/contracts/"))
			aglLegacy.Lock()
			reg := aglLegacy.registered[name]
			aglLegacy.Unlock()
			if reg != nil {
				return aglJSONResponse(http.StatusOK, reg)
			}
		}
		return nil
	}
}

// aglLegacy keeps the contracts aglPretendRegistered pretended to register
// (qualified names are unique per scenario).
var aglLegacy = struct {
	sync.Mutex
	registered map[string]map[string]any
}{registered: map[string]map[string]any{}}

func aglJSONResponse(status int, v any) *Response {
	b, _ := json.Marshal(v)
	return &Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
}

// aglGet reads a JSON object from the host behind the proxy (nil if it
// cannot).
func aglGet(x *Exchange, path string) map[string]any {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(x.Upstream + path)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	return aglDoc(b)
}

// aglSendMet says whether a send of operation opID, at the fake
// destination operation qname writes to, met the fault mode.
func aglSendMet(x *Exchange, qname, opID, mode string) bool {
	u, _ := aglDestination(x, qname)
	if u == "" || opID == "" {
		return false
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(strings.TrimRight(u, "/") + "/requests")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var list struct {
		Requests []struct {
			Path        string `json:"path"`
			OperationID string `json:"operation_id"`
			Fault       string `json:"fault"`
		} `json:"requests"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list) != nil {
		return false
	}
	for _, r := range list.Requests {
		if r.Path == "/send" && r.OperationID == opID && r.Fault == mode {
			return true
		}
	}
	return false
}
