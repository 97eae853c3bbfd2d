package sabotage

import (
	"net/http"
	"strings"
	"sync"
)

// Rules for the AGL requirements added for issue 24: a host that lets a
// revocation block the reading of a historical receipt, and one whose
// audit trail does not account for its retries.

// agl24Seen is what these rules learn from the traffic they forward:
// operations whose permit was revoked, principals whose grant was
// revoked, and each operation's principal (from reads of the operation).
var agl24Seen struct {
	sync.Mutex
	revokedOps      map[string]bool
	revokedSubjects map[string]bool
	opPrincipal     map[string]string
}

func agl24Learn(x *Exchange, r *Response) {
	if r.Status != http.StatusOK {
		return
	}
	doc := aglDoc(r.Body)
	agl24Seen.Lock()
	defer agl24Seen.Unlock()
	if agl24Seen.revokedOps == nil {
		agl24Seen.revokedOps, agl24Seen.revokedSubjects, agl24Seen.opPrincipal = map[string]bool{}, map[string]bool{}, map[string]string{}
	}
	switch {
	case x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/permits/") && strings.HasSuffix(x.Path, "/revoke"):
		if op := aglStr(doc, "consumed_by_operation"); op != "" {
			agl24Seen.revokedOps[op] = true
		}
	case x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/grants/") && strings.HasSuffix(x.Path, "/revoke"):
		if sub := aglStr(doc, "subject"); sub != "" {
			agl24Seen.revokedSubjects[sub] = true
		}
	case aglGetOperation(x) || aglDispatch(x):
		if op, p := aglStr(doc, "operation_id"), aglStr(doc, "principal"); op != "" && p != "" {
			agl24Seen.opPrincipal[op] = p
		}
	}
}

// agl24Revoked says whether the operation's permit, or its principal's
// grant, was revoked.
func agl24Revoked(op string) bool {
	agl24Seen.Lock()
	defer agl24Seen.Unlock()
	return agl24Seen.revokedOps[op] || agl24Seen.revokedSubjects[agl24Seen.opPrincipal[op]]
}

var agl24Rules = []Rule{
	{
		ID:       "agl.recovery.authority-rechecked",
		Broken:   "resends an interrupted deduplicated send on recovery without looking at its permit or grant: a revocation while it was claimed does not stop the resend",
		Response: aglResumeUnchecked,
	},
	{
		ID:     "agl.dispatch.admission-wait-expires",
		Broken: "when the wait for a slot runs out, dispatches anyway beyond the account's capacity",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && aglStep(r) == 6 {
				aglDispatchAnyway("capacity_unavailable")(x, r)
			}
		},
	},
	{
		ID:      "agl.dispatch.admission-rechecks-authority",
		Variant: "expiry-not-rechecked",
		Broken:  "checks the permit's expiry before it waits for capacity and not again after: a permit that expired during the wait still dispatches",
		Response: func(x *Exchange, r *Response) {
			if aglDispatch(x) && aglStep(r) == 6 {
				aglDispatchAnyway("permit_expired")(x, r)
			}
		},
	},
	{
		ID:     "agl.durability.reconcile-after-revocation",
		Broken: "refuses to reconcile an operation once its permit or its principal's grant is revoked: revocation blocks reading the historical receipt",
		Intercept: func(x *Exchange) *Response {
			if x.Method != http.MethodPost || !strings.HasPrefix(x.Path, aglAPI+"/operations/") || !strings.HasSuffix(x.Path, "/reconcile") {
				return nil
			}
			op := strings.TrimSuffix(strings.TrimPrefix(x.Path, aglAPI+"/operations/"), "/reconcile")
			if !agl24Revoked(op) {
				return nil
			}
			return aglDenial(http.StatusForbidden, "permit_revoked", "approval_expired_or_revoked", 0, nil)
		},
		Response: agl24Learn,
	},
	{
		ID:       "agl.audit.retry-attempts",
		Broken:   "retries without an audit record of the extra attempt: the trail shows the claim and the outcome only",
		Response: aglDropAudit(func(rec map[string]any) bool { return aglStr(rec, "event") == "retry" }),
	},
	{
		ID:      "agl.audit.retry-attempts",
		Variant: "unnumbered",
		Broken:  "records each retry but numbers every record with the first attempt",
		Response: func(x *Exchange, r *Response) {
			if x.Method != http.MethodGet || x.Path != aglAPI+"/audit" || r.Status != http.StatusOK {
				return
			}
			doc := aglDoc(r.Body)
			list, _ := doc["records"].([]any)
			changed := false
			for _, e := range list {
				if m, _ := e.(map[string]any); aglStr(m, "event") == "retry" {
					m["attempt"], changed = 1, true
				}
			}
			if changed {
				r.SetJSON(doc)
			}
		},
	},
}

func init() { aglRules = append(aglRules, agl24Rules...) }

// aglDropAudit leaves out of GET /audit answers the records drop names, as
// a host that never wrote them.
func aglDropAudit(drop func(rec map[string]any) bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if x.Method != http.MethodGet || x.Path != aglAPI+"/audit" || r.Status != http.StatusOK {
			return
		}
		doc := aglDoc(r.Body)
		list, _ := doc["records"].([]any)
		kept := make([]any, 0, len(list))
		for _, e := range list {
			if m, _ := e.(map[string]any); drop(m) {
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) != len(list) {
			doc["records"] = kept
			r.SetJSON(doc)
		}
	}
}
