package sabotage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Rules for the AGTP witnesses added for issue 20: each breaks its rule only
// on the path the new scenario takes, so that the rest of the host behaves.

var agtpWitnessRules = []Rule{
	{
		ID:     "agtp.rcns.contract.expiry-decided-on-request",
		Broken: "enforces expiry only in its expiry pass: a contract past its expires_at that no pass has released yet is still served when presented",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid := presents(x); sid != "" && isAction(x) {
				x.Memory.Store(witnessKey(x), contractState(x, sid))
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			sid := presents(x)
			if sid == "" || !isAction(x) {
				return
			}
			before, _ := x.Memory.LoadAndDelete(witnessKey(x))
			if r.Status >= 200 && r.Status < 300 {
				x.Memory.Store("served:"+sid, cloneAGTP(r))
				return
			}
			if state, _ := before.(string); r.Status == 464 && agtpReason(r) == "contract-revoked" && (state == "active" || state == "pending") {
				if v, ok := x.Memory.Load("served:" + sid); ok {
					*r = *cloneAGTP(v.(*agtp.Response))
				}
			}
		},
	},
	{
		ID:      "agtp.rcns.rate.contract-invocations-exempt",
		Variant: "budget-consumed",
		Broken:  "serves contract invocations but counts each against the agent's gate budget, so its next gate evaluation is refused 429 early",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if !isGate(x) {
				return nil
			}
			if budgetOf(x).used() >= gateCeiling(x) {
				r := agtp.ErrorResponse(429, "rate-limited", "sabotaged")
				m := agtpJSON(r)
				m["scope"] = "rcns"
				setAGTPJSON(r, m)
				return r
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if (isGate(x) && r.Status != 429) || (presents(x) != "" && isAction(x) && r.Status >= 200 && r.Status < 300) {
				budgetOf(x).spend()
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.report-lists-every-contract",
		Variant: "first-per-recipe",
		Broken:  "lists in its sweep report only the first contract of each recipe and disposition, though it sweeps them all",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "REVOKE", "stale-contracts") && r.Status == 200 {
				seen := map[string]bool{}
				filterSweep(r, func(e map[string]any) bool {
					k := fmt.Sprint(e["recipe_name"], "\x00", e["disposition"])
					if seen[k] {
						return false
					}
					seen[k] = true
					return true
				})
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.report-lists-every-contract",
		Variant: "drift-only",
		Broken:  "lists in its sweep report only the drifted contracts, leaving out those it examined and found unchanged",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "REVOKE", "stale-contracts") && r.Status == 200 {
				filterSweep(r, func(e map[string]any) bool { return e["disposition"] != "unchanged" })
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.edit-harmless-until-sweep",
		Variant: "sweep-on-edit",
		Broken:  "under on_policy_change = invalidate, sweeps as soon as a recipe is edited: drifted contracts are evicted with no operator sweep",
		Response: func(x *Exchange, r *Response) {
			if x.Method != http.MethodPut || !strings.HasPrefix(x.Path, "/conformance/seams/agtp/recipes/") || r.Status != 200 {
				return
			}
			if k, _ := x.Section("agtp")["rcns"].(map[string]any); k["on_policy_change"] != "invalidate" {
				return
			}
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Post(x.Upstream+"/conformance/seams/agtp/sweep", "application/json",
				bytes.NewReader([]byte(`{"mode":"invalidate","actor":"recipe-edit"}`)))
			if err == nil {
				resp.Body.Close()
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.edit-harmless-until-sweep",
		Variant: "evict-on-presentation",
		Broken:  "under on_policy_change = invalidate, evicts a contract whose recipe was edited when it is next presented (answering 404), with no operator sweep",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			sid := presents(x)
			if sid == "" || !isAction(x) {
				return nil
			}
			if k, _ := x.Config["agtp"]["rcns"].(map[string]any); k["on_policy_change"] != "invalidate" {
				return nil
			}
			v, ok := x.Memory.Load("lineage:" + sid)
			if !ok {
				return nil
			}
			l := v.(map[string]any)
			name, _ := l["recipe_name"].(string)
			cur := currentRecipe(x, name)
			if name == "" || (cur != nil && fmt.Sprint(cur["version"]) == fmt.Sprint(l["recipe_version"])) {
				return nil
			}
			return agtp.ErrorResponse(404, "contract-not-found", "sabotaged: evicted on presentation after a recipe edit")
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			rememberLineage(x, r)
		},
	},
}

// witnessKey names one exchange in the proxy's shared memory.
func witnessKey(x *AGTPExchange) string { return fmt.Sprintf("exchange:%p", x) }

// cloneAGTP copies a response, so a remembered one is never edited in place.
func cloneAGTP(r *agtp.Response) *agtp.Response {
	h := agtp.Header{}
	for k, vs := range r.Header {
		h[k] = append([]string(nil), vs...)
	}
	return &agtp.Response{Status: r.Status, Header: h, Body: append([]byte(nil), r.Body...)}
}

// contractState asks the host, as the presenting agent, what state its
// contract is in (INSPECT target=contract): what its store says, which an
// expiry pass changes and the passage of time alone does not.
func contractState(x *AGTPExchange, sid string) string {
	body, _ := json.Marshal(map[string]any{"method": "INSPECT", "parameters": map[string]any{"target": "contract", "synthesis_id": sid}})
	req, err := agtp.NewRequest("INSPECT", "/", body)
	if err != nil {
		return ""
	}
	req.Header.Set("Agent-ID", x.Request.Header.Get("Agent-ID"))
	req.Header.Set("Content-Type", agtp.MediaType)
	r, err := x.Upstream(req)
	if err != nil || r.Status != 200 {
		return ""
	}
	state := ""
	objectsIn(agtpJSON(r), func(m map[string]any) {
		if m["synthesis_id"] == sid {
			if s, ok := m["state"].(string); ok {
				state = s
			}
		}
	})
	return state
}

// gateBudget is what a broken host counts against an agent's gate ceiling:
// the times of the spends within the last minute.
type gateBudget struct {
	mu    sync.Mutex
	times []time.Time
}

func budgetOf(x *AGTPExchange) *gateBudget {
	v, _ := x.Memory.LoadOrStore("budget:"+x.Request.Header.Get("Agent-ID"), &gateBudget{})
	return v.(*gateBudget)
}

func (b *gateBudget) used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range b.times {
		if time.Since(t) < time.Minute {
			n++
		}
	}
	return n
}

func (b *gateBudget) spend() {
	b.mu.Lock()
	b.times = append(b.times, time.Now())
	b.mu.Unlock()
}

// gateCeiling is the scenario's rate_limit_per_minute, 10 when unset.
func gateCeiling(x *AGTPExchange) int {
	k, _ := x.Config["agtp"]["rcns"].(map[string]any)
	if f, ok := k["rate_limit_per_minute"].(float64); ok && f > 0 {
		return int(f)
	}
	return 10
}

// filterSweep keeps, in every list of a sweep report, the entries keep
// accepts.
func filterSweep(r *agtp.Response, keep func(e map[string]any) bool) {
	dropListed(r, func(m map[string]any) bool {
		return m["synthesis_id"] != nil && m["disposition"] != nil && !keep(m)
	})
}

// rememberLineage notes the recipe lineage of every contract an answer
// names: a 461 preview, a 263, a success served under a contract.
func rememberLineage(x *AGTPExchange, r *agtp.Response) {
	doc := agtpJSON(r)
	if doc == nil || (r.Status != 461 && r.Status != 263 && r.Header.Get("Contract-Synthesized") == "") {
		return
	}
	sid := r.Header.Get("Contract-Synthesized")
	if sid == "" {
		objectsIn(doc, func(m map[string]any) {
			if s, ok := m["synthesis_id"].(string); ok && sid == "" {
				sid = s
			}
		})
	}
	if sid == "" {
		return
	}
	objectsIn(doc, func(m map[string]any) {
		if l, ok := m["recipe_lineage"].(map[string]any); ok && l["recipe_name"] != nil {
			x.Memory.LoadOrStore("lineage:"+sid, l)
		}
	})
}
