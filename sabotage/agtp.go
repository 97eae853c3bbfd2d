package sabotage

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// --- helpers for AGTP rules --------------------------------------------------

var agtpFloor = map[string]bool{"QUERY": true, "DISCOVER": true, "INSPECT": true, "PROPOSE": true, "SUSPEND": true,
	"REVOKE": true, "DESCRIBE": true, "SUMMARIZE": true, "PLAN": true, "EXECUTE": true, "DELEGATE": true,
	"ESCALATE": true, "CONFIRM": true, "NOTIFY": true, "ACTIVATE": true, "DEACTIVATE": true, "REINSTATE": true,
	"DEPRECATE": true}

// isAction is a request for a non-floor method (an endpoint or a contract).
func isAction(x *AGTPExchange) bool { return !agtpFloor[x.Request.Method] }

func presents(x *AGTPExchange) string { return x.Request.Header.Get("Contract-Synthesized") }

// isGate is a request that reaches the gate: an opted-in action that
// presents no contract.
func isGate(x *AGTPExchange) bool {
	return isAction(x) && presents(x) == "" && x.Request.Header.Get("Allow-RCNS") == "true"
}

// isPlain is an action with neither opt-in nor contract: only the resolver
// (or the standard refusal) answers it.
func isPlain(x *AGTPExchange) bool {
	return isAction(x) && presents(x) == "" && x.Request.Header.Get("Allow-RCNS") != "true"
}

func isFloor(x *AGTPExchange, method, targetParam string) bool {
	return x.Request.Method == method && (targetParam == "" || x.Params()["target"] == targetParam)
}

func agtpJSON(r *agtp.Response) map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

func setAGTPJSON(r *agtp.Response, v any) { r.Body, _ = json.Marshal(v) }

func agtpReason(r *agtp.Response) string {
	m := agtpJSON(r)
	if e, ok := m["error"].(map[string]any); ok {
		if s, ok := e["reason"].(string); ok {
			return s
		}
	}
	s, _ := m["reason"].(string)
	return s
}

// refuseAs replaces r with a plain refusal.
func refuseAs(r *agtp.Response, status int, reason string) {
	n := agtp.ErrorResponse(status, reason, "sabotaged")
	for _, h := range []string{"Server-ID", "Response-ID", "Task-ID", "Request-ID", "Agent-ID"} {
		if v := r.Header.Get(h); v != "" {
			n.Header.Set(h, v)
		}
	}
	*r = *n
}

func agtpOK(body map[string]any) *agtp.Response {
	b, _ := json.Marshal(body)
	h := agtp.Header{}
	h.Set("Content-Type", agtp.MediaType)
	return &agtp.Response{Status: 200, Header: h, Body: b}
}

// editAttribution rewrites the Attribution-Record JWS payload.
func editAttribution(r *agtp.Response, edit func(p map[string]any)) {
	jws := r.Header.Get("Attribution-Record")
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return
	}
	var p map[string]any
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return
	}
	edit(p)
	b, _ := json.Marshal(p)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	r.Header.Set("Attribution-Record", strings.Join(parts, "."))
}

// objectsIn walks a decoded JSON value.
func objectsIn(v any, f func(m map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		f(t)
		for _, c := range t {
			objectsIn(c, f)
		}
	case []any:
		for _, c := range t {
			objectsIn(c, f)
		}
	}
}

// editSection rewrites the configuration's agtp section (the spec-level
// document of schemas/agtp/host-config.json, as JSON decodes it: numbers are
// float64).
func editSection(c map[string]map[string]any, edit func(sec map[string]any)) {
	if sec := c["agtp"]; sec != nil {
		edit(sec)
	}
}

// rcnsKnobs is the section's rcns object, created when absent.
func rcnsKnobs(sec map[string]any) map[string]any {
	r, _ := sec["rcns"].(map[string]any)
	if r == nil {
		r = map[string]any{}
		sec["rcns"] = r
	}
	return r
}

// sidOwners remembers which Agent-ID each contract was issued to, from the
// 461 previews and the successes that name a contract.
func rememberOwner(x *AGTPExchange, r *agtp.Response) {
	agent := x.Request.Header.Get("Agent-ID")
	if r.Status == 461 {
		if sid, _ := agtpJSON(r)["synthesis_id"].(string); sid != "" {
			x.Memory.LoadOrStore("owner:"+sid, agent)
			if l, ok := agtpJSON(r)["recipe_lineage"].(map[string]any); ok {
				x.Memory.Store("lineage:"+sid, l)
			}
		}
	}
	if r.Status >= 200 && r.Status < 300 {
		if sid := r.Header.Get("Contract-Synthesized"); sid != "" {
			x.Memory.LoadOrStore("owner:"+sid, agent)
			x.Memory.Store("pair:"+x.Request.Method+" "+x.Request.Path, sid)
		}
	}
}

func owner(x *AGTPExchange, sid string) string {
	v, _ := x.Memory.Load("owner:" + sid)
	s, _ := v.(string)
	return s
}

// seamRecipes reads the host's current recipe policy through its seam.
func seamRecipes(x *AGTPExchange) []map[string]any {
	if x.HTTP == "" {
		return nil
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(x.HTTP + "/conformance/seams/agtp/recipes")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Recipes []map[string]any `json:"recipes"`
	}
	_ = json.Unmarshal(b, &body)
	return body.Recipes
}

func currentRecipe(x *AGTPExchange, name string) map[string]any {
	for _, r := range seamRecipes(x) {
		if r["name"] == name {
			return r
		}
	}
	return nil
}

// revokeAs has the host revoke a contract on behalf of the request's agent.
func revokeAs(x *AGTPExchange, sid string) {
	body, _ := json.Marshal(map[string]any{"method": "REVOKE", "parameters": map[string]any{"target": "contract", "synthesis_id": sid, "reason": "sabotage"}})
	req, err := agtp.NewRequest("REVOKE", "/", body)
	if err != nil {
		return
	}
	req.Header.Set("Agent-ID", x.Request.Header.Get("Agent-ID"))
	_, _ = x.Upstream(req)
}

// editSweep rewrites the entries of a stale-contract sweep report.
func editSweep(r *agtp.Response, edit func(e map[string]any)) {
	doc := agtpJSON(r)
	if doc == nil {
		return
	}
	objectsIn(doc, func(m map[string]any) {
		if _, ok := m["synthesis_id"]; ok {
			if _, ok := m["disposition"]; ok {
				edit(m)
			}
		}
	})
	setAGTPJSON(r, doc)
}

// editEvents rewrites (or, returning false, drops) the rcns_release events
// of an INSPECT target=lifecycle answer.
func editEvents(r *agtp.Response, keep func(ev, payload map[string]any) bool) {
	dropListed(r, func(m map[string]any) bool {
		if m["type"] != "rcns_release" {
			return false
		}
		p, _ := m["payload"].(map[string]any)
		if p == nil {
			p = m
		}
		return !keep(m, p)
	})
}

// dropListed removes, from every list anywhere in an answer's JSON body, the
// objects drop picks; the rest of the document is kept as it was.
func dropListed(r *agtp.Response, drop func(m map[string]any) bool) {
	doc := agtpJSON(r)
	if doc == nil {
		return
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				t[k] = walk(c)
			}
			return t
		case []any:
			out := []any{}
			for _, c := range t {
				if m, ok := c.(map[string]any); ok && drop(m) {
					continue
				}
				out = append(out, walk(c))
			}
			return out
		}
		return v
	}
	setAGTPJSON(r, walk(doc))
}

func fakeHash(seed string) string {
	s := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(s[:])
}

// --- one rule per agtp requirement ---------------------------------------------

var agtpRules = append(append(append(append([]Rule{}, agtpRCNSRules...), agtpProposeRules...), agtpMoreRules...), agtpWitnessRules...)

var agtpRCNSRules = []Rule{
	// The four-lock gate.
	{
		ID:     "agtp.rcns.gate.server-policy-disabled",
		Broken: "a disabled server hides its posture: 464 rcns-disabled becomes a plain 404",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 464 && agtpReason(r) == "rcns-disabled" {
				refuseAs(r, 404, "not-found")
			}
		},
	},
	{
		ID:     "agtp.rcns.gate.opt-in-unsignaled",
		Broken: "any Allow-RCNS value, or none, opens lock 2",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isPlain(x) {
				x.Request.Header.Set("Allow-RCNS", "true")
			}
			return nil
		},
	},
	{
		ID:     "agtp.rcns.gate.scope-required",
		Broken: "ignores the obtainability rule at the gate: a granted but unclaimed rcns:negotiate is 455 scope-exceeded",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isAction(x) && r.Status == 262 && agtpReason(r) == "scope-required" {
				refuseAs(r, 455, "scope-exceeded")
			}
		},
	},
	{
		ID:     "agtp.rcns.gate.scope-exceeded",
		Broken: "ignores the obtainability rule at the gate: an ungranted rcns:negotiate is 262 scope-required",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isAction(x) && r.Status == 455 && agtpReason(r) == "scope-exceeded" {
				refuseAs(r, 262, "scope-required")
			}
		},
	},
	{
		ID:     "agtp.rcns.gate.trust-tier-insufficient",
		Broken: "a configured min_trust_tier is read as 3, so every tier passes lock 4",
		Config: overrideKnob("min_trust_tier", 3),
	},
	{
		ID:      "agtp.rcns.gate.trust-tier-insufficient",
		Variant: "boundary",
		Broken:  "lock 4 is off by one: an agent exactly at min_trust_tier is refused trust-tier-insufficient (a configured minimum m of 2 or 3 is read as m-1)",
		Config: func(c map[string]map[string]any) {
			editSection(c, func(sec map[string]any) {
				if m, ok := rcnsKnobs(sec)["min_trust_tier"].(float64); ok && m >= 2 {
					rcnsKnobs(sec)["min_trust_tier"] = m - 1
				}
			})
		},
	},
	{
		ID:      "agtp.rcns.gate.trust-tier-insufficient",
		Variant: "inverted",
		Broken:  "reads the trust scale upside down (3 most trusted): lock 4 refuses agents more trusted than min_trust_tier and admits less trusted ones (modelled by mirroring every tier and the configured minimum)",
		Config: func(c map[string]map[string]any) {
			editSection(c, func(sec map[string]any) {
				k := rcnsKnobs(sec)
				if m, ok := k["min_trust_tier"].(float64); ok {
					k["min_trust_tier"] = 4 - m
				} else {
					k["min_trust_tier"] = 3 // the mirror of the default 1
				}
				agents, _ := sec["agents"].([]any)
				for _, a := range agents {
					if m, ok := a.(map[string]any); ok {
						if t, ok := m["trust_tier"].(float64); ok {
							m["trust_tier"] = 4 - t
						}
					}
				}
			})
		},
	},
	{
		ID:     "agtp.rcns.gate.closed-lock-no-synthesis",
		Broken: "a closed lock still synthesizes: the refusal names a fresh synthesis_id",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isAction(x) && presents(x) == "" && isRefusal(r) {
				if m := agtpJSON(r); m != nil {
					m["synthesis_id"] = "syn_" + uuid.NewString()
					setAGTPJSON(r, m)
				}
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.closed-lock-no-synthesis",
		Variant: "synthesizes-anyway",
		Broken:  "a closed caller lock (opt-in absent or rcns:negotiate unclaimed) only shapes the answer: behind the refusal the host synthesizes the contract and binds it to the caller",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if callerLockClosed(x, r) {
				_, _ = synthesizeBehind(x)
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.closed-lock-no-synthesis",
		Variant: "runs-anyway",
		Broken:  "a closed caller lock (opt-in absent or rcns:negotiate unclaimed) only shapes the answer: behind the refusal the host synthesizes, runs the action and releases the contract",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !callerLockClosed(x, r) {
				return
			}
			if sid, _ := synthesizeBehind(x); sid != "" {
				body, _ := json.Marshal(map[string]any{"method": "SUSPEND", "parameters": map[string]any{"synthesis_id": sid, "reason": "sabotage"}})
				if req, err := agtp.NewRequest("SUSPEND", "/", body); err == nil {
					req.Header.Set("Agent-ID", x.Request.Header.Get("Agent-ID"))
					_, _ = x.Upstream(req)
				}
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.presented-contract-skips-gate",
		Variant: "opt-in-required",
		Broken:  "the originator's invocations under an accepted contract are put through lock 2: once a contract has served its originator, the originator presenting it again without Allow-RCNS: true is refused as an unregistered pair (404)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid := presents(x); isAction(x) && sid != "" && x.Request.Header.Get("Allow-RCNS") != "true" {
				if v, served := x.Memory.Load("served:" + sid); served && v == x.Request.Header.Get("Agent-ID") {
					return agtp.ErrorResponse(404, "not-found", "sabotaged: no endpoint is registered for this method and path")
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if sid := presents(x); isAction(x) && sid != "" && r.Status < 300 {
				x.Memory.LoadOrStore("served:"+sid, x.Request.Header.Get("Agent-ID"))
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.presented-contract-skips-gate",
		Variant: "side-synthesis",
		Broken:  "a presentation is served under the presented contract but also runs a gate evaluation that synthesizes a second contract for the caller's pair, which resolves once the presented one is released (modelled by synthesizing it when the caller next asks for the pair plainly after that release)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if !isPlain(x) {
				return nil
			}
			v, ok := x.Memory.Load("shadow:" + x.Request.Header.Get("Agent-ID") + " " + x.Request.Method + " " + x.Request.Path)
			if !ok {
				return nil
			}
			if _, released := x.Memory.Load("released:" + v.(string)); !released {
				return nil
			}
			_, r := synthesizeBehind(x)
			return r
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if sid := presents(x); isAction(x) && sid != "" && r.Status < 300 {
				x.Memory.LoadOrStore("shadow:"+x.Request.Header.Get("Agent-ID")+" "+x.Request.Method+" "+x.Request.Path, sid)
			}
			if sid, _ := x.Params()["synthesis_id"].(string); x.Request.Method == "SUSPEND" && sid != "" && r.Status < 300 {
				x.Memory.Store("released:"+sid, true)
			}
		},
	},
	{
		ID:     "agtp.rcns.gate.presented-contract-skips-gate",
		Broken: "an opted-in request presenting a contract runs the gate again and gets a new 461 preview",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isAction(x) && presents(x) != "" && x.Request.Header.Get("Allow-RCNS") == "true" && r.Status < 300 {
				*r = *agtpOK(map[string]any{"status": 461, "synthesis_id": "syn_" + uuid.NewString(), "method": x.Request.Method,
					"path": x.Request.Path, "endpoint": map[string]any{}, "contract_hash": fakeHash(x.Request.Path)})
				r.Status = 461
			}
		},
	},
	{
		ID:     "agtp.rcns.gate.attempt-id-on-464",
		Broken: "464 answers carry no RCNS-Attempt-Id",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 464 {
				r.Header.Del("RCNS-Attempt-Id")
			}
		},
	},
	// Delivery modes.
	{
		ID:     "agtp.rcns.delivery.confirm-first-body",
		Broken: "the 461 preview omits recipe_lineage and contract_hash",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 461 {
				if m := agtpJSON(r); m != nil {
					delete(m, "recipe_lineage")
					delete(m, "contract_hash")
					setAGTPJSON(r, m)
				}
			}
		},
	},
	{
		ID:     "agtp.rcns.delivery.confirm-first-no-execution",
		Broken: "confirm-first executes the action while previewing it (the 461 is sent after the action ran)",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isGate(x) || r.Status != 461 {
				return
			}
			sid, _ := agtpJSON(r)["synthesis_id"].(string)
			if sid == "" {
				return
			}
			req, err := agtp.NewRequest(x.Request.Method, x.Request.Target, x.Request.Body)
			if err != nil {
				return
			}
			req.Header = x.Request.Header.Clone()
			req.Header.Del("Allow-RCNS")
			req.Header.Del("Idempotency-Key")
			req.Header.Set("Contract-Synthesized", sid)
			_, _ = x.Upstream(req)
		},
	},
	{
		ID:     "agtp.rcns.delivery.accept-by-reissue",
		Broken: "re-issuing with a previewed synthesis_id is refused 404 instead of accepting it",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if sid := presents(x); sid != "" && isAction(x) && r.Status < 300 {
				if _, previewed := x.Memory.Load("lineage:" + sid); previewed {
					refuseAs(r, 404, "contract-not-found")
					r.Header.Del("Contract-Synthesized")
				}
			}
			rememberOwner(x, r)
		},
	},
	{
		ID:     "agtp.rcns.delivery.bound-at-issue",
		Broken: "a preview binds at acceptance, not at issue: whoever accepts it first gets it",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			sid := presents(x)
			if sid == "" || !isAction(x) {
				return nil
			}
			if _, accepted := x.Memory.Load("accepted:" + sid); !accepted {
				if o := owner(x, sid); o != "" {
					x.Request.Header.Set("Agent-ID", o)
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			rememberOwner(x, r)
			if sid := presents(x); sid != "" && r.Status < 300 {
				x.Memory.Store("accepted:"+sid, true)
			}
		},
	},
	{
		ID:     "agtp.rcns.delivery.optimistic-header",
		Broken: "an optimistic synthesis answers without Contract-Synthesized",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isGate(x) && r.Status < 300 {
				r.Header.Del("Contract-Synthesized")
			}
		},
	},
	// Tier C resolution and contract scoping.
	{
		ID:     "agtp.rcns.contract.resolver-serves-active",
		Broken: "has no Tier C resolver: a pair served only by an active contract is 404 unless presented (Tier A/B endpoints and persisted syntheses are still served)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isPlain(x) && !registered(x) {
				if _, persisted := x.Memory.Load("persisted:" + x.Request.Method + " " + x.Request.Path); !persisted {
					return agtp.ErrorResponse(404, "not-found", "sabotaged: no resolver")
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method == "PROPOSE" && r.Status == 263 {
				if res, _ := result(r); res["persistent"] == true {
					x.Memory.Store("persisted:"+asString(res["method"])+" "+asString(res["path"]), true)
				}
			}
		},
	},
	{
		ID:     "agtp.rcns.contract.resolver-scoped-by-agent",
		Broken: "the resolver is not scoped by Agent-ID: any agent's request for the pair runs under the contract",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isPlain(x) {
				if v, ok := x.Memory.Load("pair:" + x.Request.Method + " " + x.Request.Path); ok {
					if o := owner(x, v.(string)); o != "" {
						x.Request.Header.Set("Agent-ID", o)
					}
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:     "agtp.rcns.contract.inactive-not-resolved",
		Broken: "the resolver keeps serving released, revoked and expired contracts (answers from its last success)",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			key := "served:" + x.Request.Header.Get("Agent-ID") + " " + x.Request.Method + " " + x.Request.Path
			if r.Status < 300 && r.Header.Get("Contract-Synthesized") != "" {
				c := *r
				c.Header = r.Header.Clone()
				x.Memory.Store(key, &c)
				return
			}
			if isPlain(x) {
				if v, ok := x.Memory.Load(key); ok {
					c := *v.(*agtp.Response)
					c.Header = c.Header.Clone()
					*r = c
				}
			}
		},
	},
	{
		ID:     "agtp.rcns.contract.not-yours",
		Broken: "another agent's contract is answered 404, as though unknown",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if presents(x) != "" && r.Status == 464 && agtpReason(r) == "contract-not-yours" {
				refuseAs(r, 404, "contract-not-found")
			}
		},
	},
	{
		ID:     "agtp.rcns.contract.unknown-404",
		Broken: "an unknown synthesis_id is answered 464 contract-revoked",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if presents(x) != "" && r.Status == 404 {
				refuseAs(r, 464, "contract-revoked")
			}
		},
	},
	{
		ID:     "agtp.rcns.contract.expired-or-revoked-464",
		Broken: "an expired or revoked contract is answered 404, as though it never existed",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if presents(x) != "" && r.Status == 464 && agtpReason(r) == "contract-revoked" {
				refuseAs(r, 404, "contract-not-found")
			}
		},
	},
	// Release paths.
	{
		ID:     "agtp.rcns.release.caller-suspend",
		Broken: "the originator's SUSPEND synthesis_id is acknowledged but the contract is never evicted",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid, _ := x.Params()["synthesis_id"].(string); x.Request.Method == "SUSPEND" && sid != "" && owner(x, sid) == x.Request.Header.Get("Agent-ID") {
				return agtpOK(map[string]any{"status": 200, "result": map[string]any{"synthesis_id": sid, "released": true}})
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:     "agtp.rcns.release.caller-suspend-event",
		Broken: "a caller release records no rcns_release event in the lifecycle stream",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "INSPECT", "lifecycle") {
				editEvents(r, func(ev, p map[string]any) bool { return p["reason"] == "policy-change-invalidation" })
			}
		},
	},
	{
		ID:     "agtp.rcns.release.suspend-originator-only",
		Broken: "any agent may SUSPEND another agent's contract",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid, _ := x.Params()["synthesis_id"].(string); x.Request.Method == "SUSPEND" && sid != "" {
				if o := owner(x, sid); o != "" {
					x.Request.Header.Set("Agent-ID", o)
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:     "agtp.rcns.release.operator-revoke",
		Broken: "REVOKE target=contract is acknowledged but the contract keeps serving",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "REVOKE", "contract") {
				return agtpOK(map[string]any{"status": 200, "result": map[string]any{"revoked": true}})
			}
			return nil
		},
	},
	{
		ID:     "agtp.rcns.release.ttl",
		Broken: "the configured contract_ttl_seconds is ignored (contracts live a day)",
		Config: overrideKnob("contract_ttl_seconds", 86400),
	},
	// Stale contract sweep.
	{
		ID:     "agtp.rcns.sweep.grandfather-reports",
		Broken: "grandfather mode evicts drifted contracts as invalidate does",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "REVOKE", "stale-contracts") && x.Params()["mode"] == "grandfather" {
				x.SetParam("mode", "invalidate")
			}
			return nil
		},
	},
	{
		ID:     "agtp.rcns.sweep.unchanged-kept",
		Broken: "invalidate evicts every contract, drifted or not",
		AGTP:   evictToo("unchanged"),
	},
	{
		ID:     "agtp.rcns.sweep.invalidate-evicts-404",
		Broken: "invalidate reports drifted contracts evicted but leaves them serving",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "REVOKE", "stale-contracts") && x.Params()["mode"] == "invalidate" {
				x.SetParam("mode", "grandfather")
				x.Memory.Store("asked-invalidate:"+x.Request.Header.Get("Request-ID"), true)
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if _, asked := x.Memory.Load("asked-invalidate:" + x.Request.Header.Get("Request-ID")); asked && isFloor(x, "REVOKE", "stale-contracts") {
				editSweep(r, func(e map[string]any) {
					if e["disposition"] == "grandfathered" {
						e["disposition"] = "evicted"
					}
				})
			}
		},
	},
	{
		ID:     "agtp.rcns.sweep.invalidation-event",
		Broken: "an invalidation's rcns_release event does not carry the operator's actor",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "INSPECT", "lifecycle") {
				editEvents(r, func(ev, p map[string]any) bool {
					if p["reason"] == "policy-change-invalidation" {
						delete(p, "actor")
						delete(ev, "actor")
					}
					return true
				})
			}
		},
	},
	{
		ID:     "agtp.rcns.sweep.passthrough-skipped",
		Broken: "invalidate evicts passthrough contracts too",
		AGTP:   evictToo("skipped"),
	},
	{
		ID:     "agtp.rcns.sweep.removed-recipe-null",
		Broken: "a contract whose recipe was removed is reported with its captured version as current",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "REVOKE", "stale-contracts") {
				editSweep(r, func(e map[string]any) {
					if v, ok := e["current_version"]; ok && v == nil {
						e["current_version"] = e["captured_version"]
					}
				})
			}
		},
	},
	{
		ID:     "agtp.rcns.sweep.requires-inspect-all",
		Broken: "does not check inspect:all before a sweep: a sweep refused for the scope is run anyway (modelled by re-sending it as an operator the host knows)",
		Config: func(c map[string]map[string]any) {
			editSection(c, func(sec map[string]any) {
				agents, _ := sec["agents"].([]any)
				sec["agents"] = append(agents, map[string]any{"agent_id": sabotageOperator, "name": "sabotage-operator",
					"principal": "sabotage@example.test", "trust_tier": 1, "verification_path": "dns-anchored", "scopes": []any{"inspect:all"}})
			})
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isFloor(x, "REVOKE", "stale-contracts") || (r.Status != 455 && r.Status != 262) {
				return
			}
			req, err := agtp.NewRequest(x.Request.Method, x.Request.Target, x.Request.Body)
			if err != nil {
				return
			}
			req.Header = x.Request.Header.Clone()
			req.Header.Set("Agent-ID", sabotageOperator)
			req.Header.Del("Authority-Scope")
			if swept, err := x.Upstream(req); err == nil {
				*r = *swept
			}
		},
	},
	{
		ID:     "agtp.rcns.sweep.default-mode",
		Broken: "a sweep without a mode always invalidates, whatever on_policy_change says",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "REVOKE", "stale-contracts") && x.Params()["mode"] == nil {
				x.SetParam("mode", "invalidate")
			}
			return nil
		},
	},
	{
		ID:      "agtp.rcns.sweep.default-mode",
		Variant: "always-grandfather",
		Broken:  "a sweep without a mode always grandfathers: on_policy_change = invalidate is ignored",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "REVOKE", "stale-contracts") && x.Params()["mode"] == nil {
				x.SetParam("mode", "grandfather")
			}
			return nil
		},
	},
	// Recipe versioning.
	{
		ID:     "agtp.rcns.recipe.version-captured",
		Broken: "INSPECT target=contract reports the recipe's current version, not the captured one",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isFloor(x, "INSPECT", "contract") || r.Status != 200 {
				return
			}
			doc := agtpJSON(r)
			objectsIn(doc, func(m map[string]any) {
				if name, ok := m["recipe_name"].(string); ok {
					if cur := currentRecipe(x, name); cur != nil {
						m["recipe_version"] = cur["version"]
					}
				}
			})
			setAGTPJSON(r, doc)
		},
	},
	{
		ID:     "agtp.rcns.recipe.executes-captured-version",
		Broken: "a contract runs its recipe as currently edited: an old contract answers with the edited recipe's status",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			rememberOwner(x, r)
			sid := presents(x)
			if sid == "" || r.Status >= 300 {
				return
			}
			v, ok := x.Memory.Load("lineage:" + sid)
			if !ok {
				return
			}
			l := v.(map[string]any)
			name, _ := l["recipe_name"].(string)
			if cur := currentRecipe(x, name); cur != nil && cur["version"] != l["recipe_version"] {
				if s, ok := cur["success_status"].(float64); ok && s >= 200 && s < 300 {
					r.Status = int(s)
				}
			}
		},
	},
	// Rate limiting.
	{
		ID:     "agtp.rcns.rate.gate-429-scope-rcns",
		Broken: "the RCNS 429 does not say scope rcns",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 429 {
				if m := agtpJSON(r); m != nil {
					delete(m, "scope")
					if e, ok := m["error"].(map[string]any); ok {
						delete(e, "scope")
					}
					setAGTPJSON(r, m)
				}
			}
		},
	},
	{
		ID:     "agtp.rcns.rate.per-agent",
		Broken: "the gate rate limit is global: once any agent is limited, every agent is",
		// The limit is shared by the agents of one suite connection (one
		// scenario's): the outline's rows share a fixture host, and a limit
		// one row reached must not decide the other row's setup.
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if _, limited := x.Memory.Load("limited:" + x.Conn); limited && isGate(x) {
				r := agtp.ErrorResponse(429, "rate-limited", "sabotaged: global limit")
				m := agtpJSON(r)
				m["scope"] = "rcns"
				setAGTPJSON(r, m)
				return r
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 429 {
				x.Memory.Store("limited:"+x.Conn, true)
			}
		},
	},
	{
		ID:     "agtp.rcns.rate.default-ten",
		Broken: "an unset rate_limit_per_minute means 30 a minute",
		Config: defaultKnob("rate_limit_per_minute", 30),
	},
	{
		ID:     "agtp.rcns.rate.contract-invocations-exempt",
		Broken: "contract invocations count against the RCNS limit: a limited agent's presentations are 429 too",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if _, limited := x.Memory.Load("limited:" + x.Request.Header.Get("Agent-ID")); limited && presents(x) != "" {
				r := agtp.ErrorResponse(429, "rate-limited", "sabotaged")
				m := agtpJSON(r)
				m["scope"] = "rcns"
				setAGTPJSON(r, m)
				return r
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 429 {
				x.Memory.Store("limited:"+x.Request.Header.Get("Agent-ID"), true)
			}
		},
	},
	// Idempotency.
	{
		ID:     "agtp.rcns.idempotency.same-agent-replay",
		Broken: "Idempotency-Key is ignored: a replay is executed again",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			x.Request.Header.Del("Idempotency-Key")
			return nil
		},
	},
	{
		ID:     "agtp.rcns.idempotency.cross-agent-independent",
		Broken: "the idempotency cache is keyed by the key alone: another agent's replay gets the first agent's response",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if k := x.Request.Header.Get("Idempotency-Key"); k != "" {
				if v, ok := x.Memory.Load("idem:" + k); ok {
					c := *v.(*agtp.Response)
					c.Header = c.Header.Clone()
					c.Body = bytes.Clone(c.Body)
					return &c
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if k := x.Request.Header.Get("Idempotency-Key"); k != "" {
				c := *r
				c.Header = r.Header.Clone()
				c.Body = bytes.Clone(r.Body)
				x.Memory.LoadOrStore("idem:"+k, &c)
			}
		},
	},
	// Attribution-Record.
	{
		ID:     "agtp.rcns.attribution.fields-under-contract",
		Broken: "Attribution-Records of actions under a contract lack the extension fields",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			editAttribution(r, func(p map[string]any) {
				delete(p, "contract_hash")
				delete(p, "negotiation_origin")
			})
		},
	},
	{
		ID:     "agtp.rcns.attribution.hash-format-stable",
		Broken: "contract_hash changes with every invocation",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			editAttribution(r, func(p map[string]any) {
				if _, ok := p["contract_hash"]; ok {
					p["contract_hash"] = fakeHash(uuid.NewString())
				}
			})
		},
	},
	{
		ID:     "agtp.rcns.attribution.absent-tier-ab",
		Broken: "Tier A/B Attribution-Records carry contract extension fields",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			editAttribution(r, func(p map[string]any) {
				if _, ok := p["synthesis_id"]; !ok {
					p["synthesis_id"] = ""
					p["contract_hash"] = fakeHash("tier-ab")
					p["negotiation_origin"] = "pre-registered"
				}
			})
		},
	},
	// Configuration defaults.
	{
		ID:     "agtp.rcns.config.default-disabled",
		Broken: "RCNS is on unless the operator turns it off",
		Config: defaultKnob("enabled", true),
	},
	{
		ID:     "agtp.rcns.config.default-confirm-first",
		Broken: "an unset mode delivers optimistically",
		Config: defaultKnob("mode", "optimistic"),
	},
	{
		ID:     "agtp.rcns.config.default-min-tier-1",
		Broken: "an unset min_trust_tier admits tier 2",
		Config: defaultKnob("min_trust_tier", 2),
	},
	{
		ID:      "agtp.rcns.config.default-min-tier-1",
		Variant: "zero",
		Broken:  "an unset min_trust_tier is read as 0 (a zero value), so lock 4 refuses every tier trust-tier-insufficient, tier 1 included",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if _, set := configuredKnob(x, "min_trust_tier"); set || !isGate(x) {
				return nil
			}
			r := agtp.ErrorResponse(464, "trust-tier-insufficient", "sabotaged: trust tier is less trusted than this server's minimum 0")
			r.Header.Set("RCNS-Attempt-Id", "att_"+uuid.NewString())
			return r
		},
	},
}

// sabotageOperator is the Agent-ID of the inspect:all holder a rule adds to
// the host's identity documents.
var sabotageOperator = fakeHash("sabotage-operator")

// registered is a request for a pair the configuration lists as a Tier A/B
// endpoint.
func registered(x *AGTPExchange) bool {
	eps, _ := x.Config["agtp"]["endpoints"].([]any)
	for _, e := range eps {
		if m, ok := e.(map[string]any); ok && m["method"] == x.Request.Method && m["path"] == x.Request.Path {
			return true
		}
	}
	return false
}

// isRefusal is an answer that issues nothing: any status from 300 up but a
// 461 preview, and 262 Authorization Required.
func isRefusal(r *agtp.Response) bool {
	return r.Status == 262 || (r.Status >= 300 && r.Status != 461)
}

// callerLockClosed is a refusal of an action whose caller kept lock 2 or 3
// closed: no Allow-RCNS: true, or an Authority-Scope claim.
func callerLockClosed(x *AGTPExchange, r *agtp.Response) bool {
	if !isAction(x) || presents(x) != "" || !isRefusal(r) {
		return false
	}
	return x.Request.Header.Get("Allow-RCNS") != "true" || x.Request.Header.Get("Authority-Scope") != ""
}

// synthesizeBehind has the host synthesize and accept a contract for the
// request's pair as though the caller's locks were open, and returns its
// synthesis_id ("" when the host issued none) and the answer that served
// the action under it (nil when none did).
func synthesizeBehind(x *AGTPExchange) (string, *agtp.Response) {
	req, err := agtp.NewRequest(x.Request.Method, x.Request.Target, x.Request.Body)
	if err != nil {
		return "", nil
	}
	req.Header = x.Request.Header.Clone()
	req.Header.Del("Authority-Scope")
	req.Header.Del("Idempotency-Key")
	req.Header.Set("Allow-RCNS", "true")
	r, err := x.Upstream(req)
	if err != nil {
		return "", nil
	}
	if r.Status >= 200 && r.Status < 300 {
		return r.Header.Get("Contract-Synthesized"), r
	}
	sid, _ := agtpJSON(r)["synthesis_id"].(string)
	if r.Status != 461 || sid == "" {
		return "", nil
	}
	acc, err := agtp.NewRequest(x.Request.Method, x.Request.Target, x.Request.Body)
	if err != nil {
		return "", nil
	}
	acc.Header = x.Request.Header.Clone()
	acc.Header.Del("Authority-Scope")
	acc.Header.Del("Idempotency-Key")
	acc.Header.Del("Allow-RCNS")
	acc.Header.Set("Contract-Synthesized", sid)
	served, err := x.Upstream(acc)
	if err != nil {
		return "", nil
	}
	return sid, served
}

// configuredKnob reads a [policies.rcns] knob from the configuration the
// scenario asked for.
func configuredKnob(x *AGTPExchange, name string) (any, bool) {
	k, _ := x.Config["agtp"]["rcns"].(map[string]any)
	v, ok := k[name]
	return v, ok
}

// evictToo makes an invalidating sweep also evict, and report evicted, the
// contracts it would have left with the given disposition.
func evictToo(disposition string) func(x *AGTPExchange, r *agtp.Response) {
	return func(x *AGTPExchange, r *agtp.Response) {
		if !isFloor(x, "REVOKE", "stale-contracts") || r.Status != 200 || x.Params()["mode"] != "invalidate" {
			return
		}
		editSweep(r, func(e map[string]any) {
			if e["disposition"] == disposition {
				revokeAs(x, e["synthesis_id"].(string))
				e["disposition"] = "evicted"
			}
		})
	}
}

// overrideKnob makes the host read a [policies.rcns] knob the scenario set as
// v instead.
func overrideKnob(name string, v any) func(map[string]map[string]any) {
	return func(c map[string]map[string]any) {
		editSection(c, func(sec map[string]any) {
			if k := rcnsKnobs(sec); k[name] != nil {
				k[name] = v
			}
		})
	}
}

// defaultKnob gives a [policies.rcns] knob the scenario left unset the wrong
// default v.
func defaultKnob(name string, v any) func(map[string]map[string]any) {
	return func(c map[string]map[string]any) {
		editSection(c, func(sec map[string]any) {
			if k := rcnsKnobs(sec); k[name] == nil {
				k[name] = v
			}
		})
	}
}
