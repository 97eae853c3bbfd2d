package sabotage

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Hosts broken for the ContractRefine decisions model
// (contractrefine.model.decisions).

// preflightKey reads a preflight request's session and plan hash, and
// whether its plan lacks provenance (the repairable reference request).
func preflightKey(x *Exchange) (key string, repairable, ok bool) {
	if x.Method != http.MethodPost || x.Path != "/v1/preflight" {
		return "", false, false
	}
	var req struct {
		Intent struct {
			PlanHash string `json:"plan_hash"`
		} `json:"intent"`
		Actor struct {
			SessionID string `json:"session_id"`
		} `json:"actor"`
		Plan []map[string]any `json:"plan"`
	}
	if json.Unmarshal(x.Body, &req) != nil || req.Actor.SessionID == "" || req.Intent.PlanHash == "" || len(req.Plan) == 0 {
		return "", false, false
	}
	_, prov := req.Plan[0]["provenance"]
	return req.Actor.SessionID + "|" + req.Intent.PlanHash, !prov, true
}

// budgetResetByPass is a host that resets a session's repair budgets
// whenever it decides a pass in that session: a repairable request after a
// pass in the same session is answered repair_required again although its
// budget was spent (as many times again as it had been before the pass).
// Sessions that never see a pass are left alone, whatever their budget.
func budgetResetByPass() Rule {
	var mu sync.Mutex
	count := map[string]int{}     // repair_required answers per key, as the host gave them
	refill := map[string]int{}    // repairs the reset granted again, per key
	forged := map[string][]byte{} // preflight id -> the decision as this host answered it
	return Rule{
		Response: func(x *Exchange, r *Response) {
			mu.Lock()
			defer mu.Unlock()
			if x.Method == http.MethodGet && strings.HasPrefix(x.Path, "/v1/preflight/") {
				if b, ok := forged[strings.TrimPrefix(x.Path, "/v1/preflight/")]; ok && r.Status == http.StatusOK {
					r.Body = append([]byte(nil), b...)
				}
				return
			}
			key, repairable, ok := preflightKey(x)
			if !ok || r.Status != http.StatusOK {
				return
			}
			d := r.JSON()
			if d == nil {
				return
			}
			switch outcome, _ := d["outcome"].(string); {
			case outcome == "pass":
				session, _, _ := strings.Cut(key, "|")
				for k, n := range count {
					if strings.HasPrefix(k, session+"|") {
						refill[k] = n
					}
				}
			case outcome == "repair_required":
				count[key]++
			case repairable && refill[key] > 0:
				refill[key]--
				d["outcome"], d["reason"] = "repair_required", "contract: provenance_missing"
				d["repair_hints"] = []any{map[string]any{"path": "plan[0].provenance.text.source", "op": "set", "value": "operator"}}
				d["execution_eligibility"] = map[string]any{"allowed": false, "bound_tool_kinds": []any{}, "expires_at": ""}
				r.SetJSON(d)
				if id, _ := d["preflight_id"].(string); id != "" {
					forged[id] = append([]byte(nil), r.Body...)
				}
			}
		},
	}
}

// readsBySession is a host that files decisions by session and plan hash:
// reading any decision returns the latest one of its session and plan hash.
func readsBySession() Rule {
	var mu sync.Mutex
	keyOf := map[string]string{}  // preflight id -> key
	latest := map[string][]byte{} // key -> the latest decision's body
	return Rule{
		Response: func(x *Exchange, r *Response) {
			mu.Lock()
			defer mu.Unlock()
			if x.Method == http.MethodGet && strings.HasPrefix(x.Path, "/v1/preflight/") {
				if k, ok := keyOf[strings.TrimPrefix(x.Path, "/v1/preflight/")]; ok && r.Status == http.StatusOK {
					r.Body = append([]byte(nil), latest[k]...)
				}
				return
			}
			key, _, ok := preflightKey(x)
			if !ok || r.Status != http.StatusOK {
				return
			}
			if d := r.JSON(); d != nil {
				if id, _ := d["preflight_id"].(string); id != "" {
					keyOf[id], latest[key] = key, append([]byte(nil), r.Body...)
				}
			}
		},
	}
}

// sessionOf reads a preflight request's actor.session_id ("" when absent).
func sessionOf(x *Exchange) string {
	var req struct {
		Actor struct {
			SessionID string `json:"session_id"`
		} `json:"actor"`
	}
	_ = json.Unmarshal(x.Body, &req)
	return req.Actor.SessionID
}

// repairFrameKept is a host that, when a plan is repaired (a pass for a
// session and plan hash whose last decision was repair_required), writes
// the pass's autonomy.preflight frame from the ladder's record of the
// repair: its outcome, reason, repair_hints_count and expires_at are the
// repair's, while its decision_json, GET and the binding are the pass's.
// A pass that repairs nothing (a first request, or one after a deny) is
// written right.
func repairFrameKept() Rule {
	var mu sync.Mutex
	lastRepair := map[string]map[string]any{} // key -> the last repair_required decision
	stale := map[string]map[string]any{}      // pass preflight id -> the repair it was written from
	return Rule{
		Response: func(x *Exchange, r *Response) {
			mu.Lock()
			defer mu.Unlock()
			if isWALSeam(x) {
				frames(func(kind string, a map[string]any) []map[string]any {
					id, _ := a["preflight_id"].(string)
					if old, ok := stale[id]; ok && kind == "autonomy.preflight" {
						hints, _ := old["repair_hints"].([]any)
						a["outcome"], a["reason"], a["repair_hints_count"] = old["outcome"], old["reason"], len(hints)
						if el, ok := old["execution_eligibility"].(map[string]any); ok {
							a["expires_at"] = el["expires_at"]
						}
					}
					return []map[string]any{a}
				})(x, r)
				return
			}
			key, _, ok := preflightKey(x)
			if !ok || r.Status != http.StatusOK {
				return
			}
			d := r.JSON()
			if d == nil {
				return
			}
			switch d["outcome"] {
			case "repair_required":
				lastRepair[key] = d
			case "pass":
				if old, ok := lastRepair[key]; ok {
					if id, _ := d["preflight_id"].(string); id != "" {
						stale[id] = old
					}
				}
				delete(lastRepair, key)
			default:
				delete(lastRepair, key)
			}
		},
	}
}

// denyAfterPassLost is a host that loses the autonomy.preflight frame of a
// deny decided in a session that already had a pass (its emit is skipped
// for a session it believes cleared): POST still answers the deny, but the
// WAL never holds it, so GET answers 404 and the seam shows no frame.
// Denials in sessions without a pass are written right.
func denyAfterPassLost() Rule {
	var mu sync.Mutex
	passed := map[string]bool{} // sessions with a pass
	lost := map[string]bool{}   // preflight ids whose frame was lost
	return Rule{
		Response: func(x *Exchange, r *Response) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case isWALSeam(x):
				frames(func(kind string, a map[string]any) []map[string]any {
					if id, _ := a["preflight_id"].(string); kind == "autonomy.preflight" && lost[id] {
						return nil
					}
					return []map[string]any{a}
				})(x, r)
			case isPreflightGet(x):
				if lost[strings.TrimPrefix(x.Path, "/v1/preflight/")] && r.Status == http.StatusOK {
					r.Status = http.StatusNotFound
					r.SetJSON(map[string]any{"error": "no autonomy.preflight frame matches the id"})
				}
			case isPreflightPost(x) && r.Status == http.StatusOK:
				session := sessionOf(x)
				d := r.JSON()
				if d == nil || session == "" {
					return
				}
				switch d["outcome"] {
				case "pass":
					passed[session] = true
				case "deny":
					if id, _ := d["preflight_id"].(string); id != "" && passed[session] {
						lost[id] = true
					}
				}
			}
		},
	}
}

// disabledChecksEcho is a disabled host that ignores the binding header
// for tool.deliver, as it must, but still checks it for tool.echo: an
// echo call whose header names a preflight is refused 403 (disabled issues
// none, so no header binds). Calls without the header are left alone.
func disabledChecksEcho() Rule {
	return Rule{
		Intercept: func(x *Exchange) *Response {
			if !isTool(x) || mode(x) != "disabled" || x.Header.Get("X-Autonomy-Preflight-Id") == "" {
				return nil
			}
			var call struct {
				Kind string `json:"kind"`
			}
			if json.Unmarshal(x.Body, &call) != nil || call.Kind != "tool.echo" {
				return nil
			}
			return &Response{Status: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"preflight binding failed"}`)}
		},
	}
}

func init() {
	const id = "contractrefine.model.decisions"
	contractRefineRules = append(contractRefineRules,
		withID(budgetResetByPass(), id, "budget-reset-by-pass",
			"resets a session's repair budgets when it decides a pass in that session, so a spent budget answers repair_required again"),
		withID(readsBySession(), id, "reads-by-session",
			"files decisions by session and plan hash: reading any decision returns the latest of its session and plan hash"),
		withID(repairFrameKept(), id, "repair-frame-kept",
			"writes the frame of a pass that repairs a plan from the ladder's record of the repair: the frame says repair_required while POST, GET and decision_json say pass"),
		withID(denyAfterPassLost(), id, "deny-after-pass-lost",
			"loses the WAL frame of a deny decided in a session that already had a pass: POST answers it, but GET answers 404 and the seam shows no frame"),
		withID(disabledChecksEcho(), id, "disabled-checks-echo",
			"in disabled mode ignores the binding header for tool.deliver but refuses a tool.echo call whose header names a preflight (403)"),
	)
}
