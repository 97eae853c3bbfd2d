package sabotage

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Rules for the RCNS behaviour issue 12 added scenarios for: the gate's
// composition-impossible and synthesis-error, registered pairs never going
// through RCNS, opaque recipe versions, who may revoke, and the scenarios
// new rows gave older requirements (every way a contract comes to exist,
// every role, every 464).

// grants reports whether the configuration's identity document for agent
// grants a scope covering token (exact token or a trailing "*").
func grants(x *AGTPExchange, agent, token string) bool {
	agents, _ := x.Config["agtp"]["agents"].([]any)
	for _, a := range agents {
		m, _ := a.(map[string]any)
		if m["agent_id"] != agent {
			continue
		}
		scopes, _ := m["scopes"].([]any)
		for _, s := range scopes {
			g, _ := s.(string)
			if g == token || (strings.HasSuffix(g, ":*") && strings.HasPrefix(token, strings.TrimSuffix(g, "*"))) {
				return true
			}
		}
	}
	return false
}

// keepAttempt carries the RCNS-Attempt-Id of the answer a rule replaced.
func keepAttempt(r *agtp.Response, id string) {
	if id != "" {
		r.Header.Set("RCNS-Attempt-Id", id)
	}
}

// versionSegments splits a version into comparable segments: a leading v
// dropped, cut at '.', '-', ':', 'T' and 'Z'.
var versionCut = regexp.MustCompile(`[.\-:TZ ]+`)

// versionAtMost orders versions as a host that reads them as numbers,
// semver or dates would: segment by segment, numerically where both are
// numbers, missing segments as zero.
func versionAtMost(a, b string) bool {
	as := versionCut.Split(strings.TrimPrefix(a, "v"), -1)
	bs := versionCut.Split(strings.TrimPrefix(b, "v"), -1)
	for i := 0; i < max(len(as), len(bs)); i++ {
		x, y := "0", "0"
		if i < len(as) && as[i] != "" {
			x = as[i]
		}
		if i < len(bs) && bs[i] != "" {
			y = bs[i]
		}
		xn, xerr := strconv.ParseFloat(x, 64)
		yn, yerr := strconv.ParseFloat(y, 64)
		switch {
		case xerr == nil && yerr == nil && xn != yn:
			return xn < yn
		case (xerr != nil || yerr != nil) && x != y:
			return x < y
		}
	}
	return true
}

// normalizeVersion is what a host that does not keep versions opaque
// makes of one: a number becomes a JSON number, a leading v is dropped, a
// timestamp is cut to its date, spaces become dashes.
func normalizeVersion(v string) any {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	switch {
	case strings.HasPrefix(v, "v"):
		return strings.TrimPrefix(v, "v")
	case strings.Contains(v, "T"):
		d, _, _ := strings.Cut(v, "T")
		return d
	}
	return strings.ReplaceAll(v, " ", "-")
}

var agtpMoreRules = []Rule{
	// An open gate with nothing to compose, or a failing composition.
	{
		ID:     "agtp.rcns.gate.composition-impossible",
		Broken: "an open gate with nothing to compose the pair answers 464 synthesis-error",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isGate(x) && r.Status == 464 && agtpReason(r) == "composition-impossible" {
				id := r.Header.Get("RCNS-Attempt-Id")
				refuseAs(r, 464, "synthesis-error")
				keepAttempt(r, id)
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.composition-impossible",
		Variant: "unsignaled",
		Broken:  "an open gate with nothing to compose the pair answers the plain unregistered-pair 404",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isGate(x) && r.Status == 464 && agtpReason(r) == "composition-impossible" {
				refuseAs(r, 404, "not-found")
			}
		},
	},
	// A failed composition may be 464 synthesis-error or
	// composition-impossible (docs/interpretations.md); a host that says
	// anything else about it is broken.
	{
		ID:     "agtp.rcns.gate.synthesis-error",
		Broken: "a recipe whose composition fails is answered 464 rcns-disabled, as though the operator had RCNS off",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isGate(x) && r.Status == 464 && agtpReason(r) == "synthesis-error" {
				id := r.Header.Get("RCNS-Attempt-Id")
				refuseAs(r, 464, "rcns-disabled")
				keepAttempt(r, id)
			}
		},
	},
	{
		ID:      "agtp.rcns.gate.synthesis-error",
		Variant: "internal-error",
		Broken:  "a recipe whose composition fails is a 500 internal error",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isGate(x) && r.Status == 464 && agtpReason(r) == "synthesis-error" {
				refuseAs(r, 500, "internal-error")
			}
		},
	},
	// Registered pairs never go through RCNS.
	{
		ID:     "agtp.rcns.gate.registered-not-synthesized",
		Broken: "runs the gate for every opted-in request, registered pairs too: disabled it answers 464 rcns-disabled, confirm-first previews a contract, optimistic serves the endpoint under a synthesized contract",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isGate(x) || !registered(x) || r.Status >= 300 {
				return
			}
			enabled, _ := configuredKnob(x, "enabled")
			mode, _ := configuredKnob(x, "mode")
			attempt := "att_" + uuid.NewString()
			switch {
			case enabled != true:
				refuseAs(r, 464, "rcns-disabled")
			case mode == "optimistic":
				sid := "syn_" + uuid.NewString()
				r.Header.Set("Contract-Synthesized", sid)
				editAttribution(r, func(p map[string]any) {
					p["synthesis_id"], p["contract_hash"], p["negotiation_origin"] = sid, fakeHash(sid), "rcns-gate"
				})
			default:
				*r = *agtpOK(map[string]any{"status": 461, "synthesis_id": "syn_" + uuid.NewString(), "method": x.Request.Method,
					"path": x.Request.Path, "endpoint": map[string]any{}, "contract_hash": fakeHash(x.Request.Path)})
				r.Status = 461
			}
			r.Header.Set("RCNS-Attempt-Id", attempt)
		},
	},
	// Opaque recipe versions.
	{
		ID:     "agtp.rcns.recipe.version-opaque",
		Broken: "does not keep recipe versions opaque: presents a numeric version as a number and strips, cuts or rewrites others (v1.10.0 as 1.10.0, a timestamp as its date)",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			doc := agtpJSON(r)
			if doc == nil {
				return
			}
			changed := false
			objectsIn(doc, func(m map[string]any) {
				if v, ok := m["recipe_version"].(string); ok {
					m["recipe_version"] = normalizeVersion(v)
					changed = true
				}
			})
			if changed {
				setAGTPJSON(r, doc)
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.grandfather-reports",
		Variant: "ordered",
		Broken:  "orders recipe versions (as numbers, semver or dates) instead of comparing them for equality: a current version not above the captured one (9 after 10, 1 after 1.0) is reported unchanged",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isFloor(x, "REVOKE", "stale-contracts") || r.Status != 200 {
				return
			}
			editSweep(r, func(e map[string]any) {
				cur, ok1 := e["current_version"].(string)
				capt, ok2 := e["captured_version"].(string)
				if ok1 && ok2 && e["disposition"] == "grandfathered" && versionAtMost(cur, capt) {
					e["disposition"] = "unchanged"
				}
			})
		},
	},
	{
		ID:      "agtp.rcns.sweep.unchanged-kept",
		Variant: "content-compared",
		Broken:  "compares a contract's captured composition with the recipe's current one instead of the version: an edit under the same version string is drift, and invalidate evicts it",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 461 {
				if sid, _ := agtpJSON(r)["synthesis_id"].(string); sid != "" {
					if ep, ok := agtpJSON(r)["endpoint"].(map[string]any); ok {
						b, _ := json.Marshal(ep["composed_of"])
						x.Memory.Store("composed:"+sid, string(b))
					}
				}
			}
			if !isFloor(x, "REVOKE", "stale-contracts") || r.Status != 200 || x.Params()["mode"] != "invalidate" {
				return
			}
			editSweep(r, func(e map[string]any) {
				sid, _ := e["synthesis_id"].(string)
				name, _ := e["recipe_name"].(string)
				v, ok := x.Memory.Load("composed:" + sid)
				cur := currentRecipe(x, name)
				if !ok || cur == nil || e["disposition"] != "unchanged" {
					return
				}
				b, _ := json.Marshal(cur["composed_of"])
				if string(b) != v.(string) {
					revokeAs(x, sid)
					e["disposition"] = "evicted"
				}
			})
		},
	},
	// Who may revoke a contract.
	{
		ID:     "agtp.rcns.release.revoke-authorized",
		Broken: "any agent may REVOKE target=contract any contract",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid, _ := x.Params()["synthesis_id"].(string); isFloor(x, "REVOKE", "contract") && sid != "" {
				if o := owner(x, sid); o != "" {
					x.Request.Header.Set("Agent-ID", o)
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:      "agtp.rcns.release.revoke-authorized",
		Variant: "operator-only",
		Broken:  "only an inspect:all holder may REVOKE target=contract: the originator revoking its own contract is refused 403",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid, _ := x.Params()["synthesis_id"].(string); isFloor(x, "REVOKE", "contract") && sid != "" && owner(x, sid) == x.Request.Header.Get("Agent-ID") {
				return agtp.ErrorResponse(403, "not-operator", "sabotaged: only the operator revokes contracts")
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:      "agtp.rcns.release.revoke-authorized",
		Variant: "originator-only",
		Broken:  "only the originator may REVOKE target=contract: an inspect:all holder is refused 403",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid, _ := x.Params()["synthesis_id"].(string); isFloor(x, "REVOKE", "contract") && sid != "" {
				if o := owner(x, sid); o != "" && o != x.Request.Header.Get("Agent-ID") {
					return agtp.ErrorResponse(403, "not-originator", "sabotaged: only the originator revokes")
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:      "agtp.rcns.release.suspend-originator-only",
		Variant: "operator-may",
		Broken:  "an inspect:all holder may SUSPEND another agent's contract",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			me := x.Request.Header.Get("Agent-ID")
			if sid, _ := x.Params()["synthesis_id"].(string); x.Request.Method == "SUSPEND" && sid != "" && grants(x, me, "inspect:all") {
				if o := owner(x, sid); o != "" {
					x.Request.Header.Set("Agent-ID", o)
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	// The sweep's refusal status is parley's binding; the spec id accepts
	// any refusal.
	{
		ID:     "agtp.rcns.sweep.inspect-all-refusal-status",
		Broken: "refuses a sweep without inspect:all with a bare 403 forbidden, naming no scope",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "REVOKE", "stale-contracts") && (r.Status == 262 || r.Status == 455) {
				refuseAs(r, 403, "forbidden")
			}
		},
	},
	{
		ID:      "agtp.rcns.sweep.inspect-all-refusal-status",
		Variant: "no-obtainability",
		Broken:  "ignores the obtainability rule for the sweep: a granted but unclaimed inspect:all is 455 scope-exceeded",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "REVOKE", "stale-contracts") && r.Status == 262 {
				refuseAs(r, 455, "scope-exceeded")
			}
		},
	},
	// Contract scoping for every way a contract comes to exist.
	{
		ID:      "agtp.rcns.contract.not-yours",
		Variant: "proposed-unbound",
		Broken:  "a PROPOSE contract is not bound to its proposer: anyone presenting its synthesis_id is served under it",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid := presents(x); isAction(x) && sid != "" {
				if v, ok := x.Memory.Load("proposer:" + sid); ok {
					x.Request.Header.Set("Agent-ID", v.(string))
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 263 {
				if res, _ := result(r); asString(res["synthesis_id"]) != "" {
					x.Memory.LoadOrStore("proposer:"+asString(res["synthesis_id"]), x.Request.Header.Get("Agent-ID"))
				}
			}
		},
	},
	{
		ID:      "agtp.rcns.contract.unknown-404",
		Variant: "ignored",
		Broken:  "ignores a Contract-Synthesized it never issued and serves the request as though nothing were presented (the resolver or the gate answers)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if sid := presents(x); isAction(x) && sid != "" && owner(x, sid) == "" {
				x.Request.Header.Del("Contract-Synthesized")
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:      "agtp.inventory.inspect-rcns-attempt",
		Variant: "gate-only",
		Broken:  "keeps attempt records for gate evaluations only: the RCNS-Attempt-Id of a refused presentation is 404 to INSPECT target=rcns-attempt",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if presents(x) != "" && r.Status == 464 {
				if id := r.Header.Get("RCNS-Attempt-Id"); id != "" {
					x.Memory.Store("presentation-attempt:"+id, true)
				}
			}
			if isFloor(x, "INSPECT", "rcns-attempt") {
				if _, ok := x.Memory.Load("presentation-attempt:" + asString(x.Params()["attempt_id"])); ok {
					refuseAs(r, 404, "attempt-not-found")
				}
			}
		},
	},
}
