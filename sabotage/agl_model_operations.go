package sabotage

import (
	"net/http"
	"strings"
	"sync"
)

// Hosts broken for the operations model (agl.model.operations): each breaks
// a rule of permits and operations only in an order of operations no
// hand-written scenario makes, so every hand-written agl-core scenario
// passes against it and the model's sequences do not
// (sabotage/proofs/model_test.go).

func init() {
	const id = "agl.model.operations"
	aglRules = append(aglRules,
		withID(permitFreedByNoEffect(), id, "no-effect-frees-permit",
			"takes a human reconciliation as no effect to undo the claim: the permit of an Unknown operation a human recorded as without effect dispatches again (a second send under one approval)"),
		withID(denialRefundsBudget(), id, "denial-refunds-budget",
			"gives a tool call back to the execution's budget whenever a dispatch is refused for presenting a permit already claimed, so a budget that was spent dispatches once more"),
	)
}

// aglPermitToken is the permit token a dispatch presents.
func aglPermitToken(x *Exchange) string { return aglStr(aglDoc(x.Body), "permit_token") }

// aglOperationPath is the operation id of /operations/{id}/suffix, or "".
func aglOperationPath(x *Exchange, suffix string) string {
	p, ok := strings.CutPrefix(x.Path, aglAPI+"/operations/")
	if !ok {
		return ""
	}
	op, ok := strings.CutSuffix(p, suffix)
	if !ok || strings.Contains(op, "/") {
		return ""
	}
	return op
}

// permitFreedByNoEffect is an AGL host that, once a human records an
// Unknown operation as having had no effect, releases the permit that
// operation consumed: a later dispatch presenting it is claimed again and
// sent. It is emulated: the proxy notes which operation each permit token
// was claimed for and which operations were reconciled as no effect, and
// turns the host's consumed-permit refusal of such a token into a
// completed dispatch, performing its send at the scenario's destination.
func permitFreedByNoEffect() Rule {
	var mu sync.Mutex
	claimedFor := map[string]string{} // permit token → operation id
	freed := map[string]bool{}        // operations reconciled as no effect
	return Rule{
		Response: func(x *Exchange, r *Response) {
			switch {
			case aglDispatch(x):
				tok := aglPermitToken(x)
				if tok == "" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if r.Status == http.StatusOK {
					if op := aglStr(aglDoc(r.Body), "operation_id"); op != "" && claimedFor[tok] == "" {
						claimedFor[tok] = op
					}
					return
				}
				op := claimedFor[tok]
				switch aglCode(r) {
				case "permit_consumed", "invalid_protocol_state", "uncertain_completion":
				default:
					return
				}
				if op == "" || !freed[op] {
					return
				}
				aglEffect(x)
				r.Status = http.StatusOK
				r.SetJSON(map[string]any{"operation_id": op, "state": "Completed"})
			case x.Method == http.MethodPost && aglOperationPath(x, "/reconcile") != "":
				if r.Status != http.StatusOK || aglStr(aglDoc(r.Body), "state") != "ReconciledNoEffect" {
					return
				}
				mu.Lock()
				freed[aglOperationPath(x, "/reconcile")] = true
				mu.Unlock()
			}
		},
	}
}

// denialRefundsBudget is an AGL host that refunds one tool call to the
// execution's budget each time it refuses a dispatch presenting a permit
// already claimed (as if the refusal undid the charge of that claim): once
// the budget is spent, a dispatch that follows such a refusal is admitted
// and sent, and the budget reads that many calls fewer. It is emulated: the
// proxy counts the refunds per execution and turns as many budget_exhausted
// refusals of that execution into completed dispatches (performing the send
// at the scenario's destination), and takes the refunds not yet spent off
// the execution's budget reads.
func denialRefundsBudget() Rule {
	var mu sync.Mutex
	refunds := map[string]int{}      // execution → tool calls refunded and not yet spent
	scopeExec := map[string]string{} // root scope id → execution
	return Rule{
		Response: func(x *Exchange, r *Response) {
			switch {
			case aglDispatch(x):
				exec := aglStr(aglDoc(x.Body), "execution_id")
				mu.Lock()
				defer mu.Unlock()
				switch aglCode(r) {
				case "permit_consumed", "uncertain_completion":
					refunds[exec]++
				case "budget_exhausted":
					if refunds[exec] == 0 {
						return
					}
					refunds[exec]--
					aglEffect(x)
					r.Status = http.StatusOK
					r.SetJSON(map[string]any{"operation_id": "op_sabotage_refunded", "state": "Completed"})
				}
			case aglIs(x, http.MethodPost, "/scopes") && r.Status == http.StatusCreated:
				if id := aglStr(aglDoc(r.Body), "scope_id"); id != "" {
					mu.Lock()
					scopeExec[id] = aglStr(aglDoc(x.Body), "execution_id")
					mu.Unlock()
				}
			case x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/scopes/") && r.Status == http.StatusOK:
				mu.Lock()
				n := refunds[scopeExec[strings.TrimPrefix(x.Path, aglAPI+"/scopes/")]]
				mu.Unlock()
				doc := aglDoc(r.Body)
				used, _ := doc["used"].(map[string]any)
				if n == 0 || used == nil {
					return
				}
				used["tool_calls"] = max(aglInt(used["tool_calls"])-int64(n), 0)
				r.SetJSON(doc)
			}
		},
	}
}
