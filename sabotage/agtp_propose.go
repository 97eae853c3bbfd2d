package sabotage

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// --- helpers for the PROPOSE and inventory rules ----------------------------

func isPropose(x *AGTPExchange) bool { return x.Request.Method == "PROPOSE" }

// proposed is the proposal's endpoint definition: parameters.endpoint in
// the wrapped form, the parameters themselves in the legacy form.
func proposed(x *AGTPExchange) map[string]any {
	p := x.Params()
	if ep, ok := p["endpoint"].(map[string]any); ok {
		return ep
	}
	return p
}

// editProposal rewrites the proposal's endpoint definition in place.
func editProposal(x *AGTPExchange, edit func(ep map[string]any)) {
	var body map[string]any
	_ = json.Unmarshal(x.Request.Body, &body)
	if body == nil {
		return
	}
	p, ok := body["parameters"].(map[string]any)
	if !ok {
		p = body
	}
	if ep, ok := p["endpoint"].(map[string]any); ok {
		edit(ep)
	} else {
		edit(p)
	}
	x.Request.Body, _ = json.Marshal(body)
}

// resend sends the (rewritten) request to the host on a connection of its
// own.
func resend(x *AGTPExchange) *agtp.Response {
	req, err := agtp.NewRequest(x.Request.Method, x.Request.Target, x.Request.Body)
	if err != nil {
		return nil
	}
	req.Header = x.Request.Header.Clone()
	req.Header.Del("Idempotency-Key")
	r, err := x.Upstream(req)
	if err != nil {
		return nil
	}
	return r
}

// result is the response envelope's result object (or the body), with a
// function that writes the edited document back.
func result(r *agtp.Response) (map[string]any, func()) {
	doc := agtpJSON(r)
	if doc == nil {
		return nil, func() {}
	}
	res, ok := doc["result"].(map[string]any)
	if !ok {
		res = doc
	}
	return res, func() { setAGTPJSON(r, doc) }
}

// proposeRefused reads [policies.propose] refused from the configuration
// the scenario asked for.
func proposeRefused(x *AGTPExchange, method, path string) bool {
	p, _ := x.Config["agtp"]["propose"].(map[string]any)
	pairs, _ := p["refused"].([]any)
	for _, v := range pairs {
		s, _ := v.(string)
		m, pat, _ := strings.Cut(s, " ")
		if m == method && patternMatches(pat, path) {
			return true
		}
	}
	return false
}

func patternMatches(pattern, path string) bool {
	ps, qs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if !(strings.HasPrefix(ps[i], "{") && qs[i] != "") && ps[i] != qs[i] {
			return false
		}
	}
	return true
}

var fullSemantic = map[string]any{"intent": "sabotage", "actor": "sabotage", "outcome": "sabotage"}

func semanticIncomplete(ep map[string]any) bool {
	s, ok := ep["semantic"].(map[string]any)
	if !ok {
		return true
	}
	i, _ := s["intent"].(string)
	return i == ""
}

// --- one rule per PROPOSE and inventory requirement --------------------------

var agtpProposeRules = []Rule{
	// PROPOSE request body shape.
	{
		ID:     "agtp.propose.body.wrapped-form",
		Broken: "only the legacy body form is understood: a wrapped proposal is 400",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if p := x.Params(); isPropose(x) && p["endpoint"] != nil && p["name"] == nil {
				return agtp.ErrorResponse(400, "malformed-proposal", "sabotaged: parameters.name is required")
			}
			return nil
		},
	},
	{
		ID:     "agtp.propose.body.legacy-form",
		Broken: "only the wrapped body form is understood: a legacy proposal is 400",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if p := x.Params(); isPropose(x) && p["endpoint"] == nil && p["name"] != nil {
				return agtp.ErrorResponse(400, "malformed-proposal", "sabotaged: parameters.endpoint is required")
			}
			return nil
		},
	},
	{
		ID:     "agtp.propose.body.ambiguous-400",
		Broken: "a body with both endpoint and name is read as the wrapped form (name ignored)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if p := x.Params(); isPropose(x) && p["endpoint"] != nil && p["name"] != nil {
				x.SetParam("name", nil)
			}
			return nil
		},
	},
	// Server-side synthesis evaluation.
	{
		ID:     "agtp.propose.eval.method-459",
		Broken: "a proposed method outside the catalog is a generic 400",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 459 {
				refuseAs(r, 400, "malformed-proposal")
			}
		},
	},
	{
		ID:      "agtp.propose.eval.method-459",
		Variant: "custom-ignored",
		Broken:  "ignores policies.methods: a custom method the operator declared is 459 as though outside the catalog",
		Config: func(c map[string]map[string]any) {
			editSection(c, func(sec map[string]any) { delete(sec, "methods") })
		},
	},
	{
		ID:     "agtp.propose.eval.path-460",
		Broken: "a proposed path outside the grammar is a generic 400",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 460 {
				refuseAs(r, 400, "malformed-proposal")
			}
		},
	},
	{
		ID:     "agtp.propose.eval.semantic-400",
		Broken: "the semantic block is not checked (modelled by completing it before the host sees it)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isPropose(x) {
				editProposal(x, func(ep map[string]any) {
					if semanticIncomplete(ep) {
						ep["semantic"] = fullSemantic
					}
				})
			}
			return nil
		},
	},
	{
		ID:     "agtp.propose.eval.schema-400",
		Broken: "input and output schemas are not checked (modelled by dropping them before the host sees them)",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isPropose(x) {
				editProposal(x, func(ep map[string]any) {
					delete(ep, "input_schema")
					delete(ep, "output_schema")
				})
			}
			return nil
		},
	},
	{
		ID:     "agtp.propose.eval.authority-262",
		Broken: "ignores the obtainability rule on PROPOSE: a granted but unclaimed scope is 455 scope-exceeded",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 262 && agtpReason(r) == "scope-required" {
				refuseAs(r, 455, "scope-exceeded")
			}
		},
	},
	{
		ID:     "agtp.propose.eval.authority-455",
		Broken: "ignores the obtainability rule on PROPOSE: an ungranted scope is 262 scope-required",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 455 && agtpReason(r) == "scope-exceeded" {
				refuseAs(r, 262, "scope-required")
			}
		},
	},
	{
		ID:     "agtp.propose.eval.composition-impossible-463",
		Broken: "a proposal nothing can compose is refused 463 policy-refused",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isPropose(x) && r.Status == 463 && agtpReason(r) == "composition-impossible" {
				refuseAs(r, 463, "policy-refused")
			}
		},
	},
	{
		ID:     "agtp.propose.eval.policy-refused-463",
		Broken: "the PROPOSE policy's refused pairs are ignored",
		Config: func(c map[string]map[string]any) {
			editSection(c, func(sec map[string]any) {
				if p, ok := sec["propose"].(map[string]any); ok {
					delete(p, "refused")
				}
			})
		},
	},
	{
		ID:     "agtp.propose.eval.first-failure-answers",
		Broken: "evaluates in another order: a proposal failing two checks gets the later check's answer",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || r.Status < 400 {
				return
			}
			ep := proposed(x)
			m, _ := ep["method"].(string)
			p, _ := ep["path"].(string)
			switch {
			case r.Status == 463 && agtpReason(r) == "composition-impossible":
				if proposeRefused(x, m, p) {
					refuseAs(r, 463, "policy-refused")
				}
				return
			case r.Status == 459:
				editProposal(x, func(ep map[string]any) { ep["method"] = "BOOK" })
			case r.Status == 460:
				editProposal(x, func(ep map[string]any) { ep["path"] = "/room/sabotage-" + uuid.NewString()[:8] })
			case r.Status == 400 && semanticIncomplete(ep):
				editProposal(x, func(ep map[string]any) { ep["semantic"] = fullSemantic })
			case r.Status == 400:
				editProposal(x, func(ep map[string]any) { delete(ep, "input_schema"); delete(ep, "output_schema") })
			case r.Status == 262 || r.Status == 455:
				editProposal(x, func(ep map[string]any) { delete(ep, "authority_scope") })
			default:
				return
			}
			if later := resend(x); later != nil && later.Status >= 400 {
				*r = *later
			}
		},
	},
	// Synthesis-composed endpoints.
	{
		ID:     "agtp.propose.composition.authority-preserved",
		Broken: "authority is checked against the proposal's declared scopes only: a composed step's scope is not required, so the synthesis is approved",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || (r.Status != 262 && r.Status != 455) {
				return
			}
			ep := proposed(x)
			e, _ := agtpJSON(r)["error"].(map[string]any)
			scope, _ := e["scope"].(string)
			if declared, _ := ep["authority_scope"].([]any); scope == "" || containsAny(declared, scope) {
				return
			}
			*r = *agtpOK(map[string]any{"status": 263, "method": ep["method"], "path": ep["path"], "synthesis_id": "syn_" + uuid.NewString(),
				"endpoint": ep, "recipe_lineage": map[string]any{"recipe_name": "room-booking", "recipe_version": "1"}})
			r.Status = 263
		},
	},
	// The 263 body.
	{
		ID:     "agtp.propose.approved.pair-matches",
		Broken: "the 263 names the recipe's path pattern, not the proposed path",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || r.Status != 263 {
				return
			}
			res, save := result(r)
			if p, ok := res["path"].(string); ok {
				if i := strings.LastIndex(p, "/"); i >= 0 {
					res["path"] = p[:i] + "/{id}"
				}
				save()
			}
		},
	},
	{
		ID:     "agtp.propose.approved.body",
		Broken: "the 263 omits the endpoint definition and the recipe lineage",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || r.Status != 263 {
				return
			}
			res, save := result(r)
			delete(res, "endpoint")
			delete(res, "recipe_lineage")
			save()
		},
	},
	{
		ID:     "agtp.propose.attribution.origin-propose",
		Broken: "actions under a PROPOSE-spawned contract say negotiation_origin rcns-gate",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			editAttribution(r, func(p map[string]any) {
				if p["negotiation_origin"] == "propose" {
					p["negotiation_origin"] = "rcns-gate"
				}
			})
		},
	},
	// Recipe versioning.
	{
		ID:     "agtp.propose.recipe.new-version-new-contract",
		Broken: "a repeated PROPOSE for a pair hands back the agent's first contract and its lineage",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || r.Status != 263 {
				return
			}
			ep := proposed(x)
			key := "first263:" + x.Request.Header.Get("Agent-ID") + " " + asString(ep["method"]) + " " + asString(ep["path"])
			res, save := result(r)
			if v, ok := x.Memory.Load(key); ok {
				first := v.(map[string]any)
				res["synthesis_id"], res["recipe_lineage"] = first["synthesis_id"], first["recipe_lineage"]
				save()
				return
			}
			x.Memory.Store(key, map[string]any{"synthesis_id": res["synthesis_id"], "recipe_lineage": res["recipe_lineage"]})
		},
	},
	// Session-scoped vs persistent synthesis.
	{
		ID:     "agtp.propose.session.removed-at-end",
		Broken: "a session-scoped synthesis keeps serving its proposer after the session ended (answers from its last success)",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			key := "propose-served:" + x.Request.Header.Get("Agent-ID") + " " + x.Request.Method + " " + x.Request.Path
			if isPropose(x) && r.Status == 263 {
				res, _ := result(r)
				x.Memory.Store("propose-sid:"+x.Request.Header.Get("Agent-ID")+" "+asString(res["method"])+" "+asString(res["path"]), res["synthesis_id"])
				return
			}
			if !isAction(x) {
				return
			}
			if v, ok := x.Memory.Load("propose-sid:" + x.Request.Header.Get("Agent-ID") + " " + x.Request.Method + " " + x.Request.Path); ok && r.Status < 300 && r.Header.Get("Contract-Synthesized") == v {
				c := *r
				c.Header = r.Header.Clone()
				x.Memory.Store(key, &c)
				return
			}
			if v, ok := x.Memory.Load(key); ok && r.Status >= 400 {
				c := *v.(*agtp.Response)
				c.Header = c.Header.Clone()
				*r = c
			}
		},
	},
	{
		ID:     "agtp.propose.persistent.honoured-in-manifest",
		Broken: "a honoured persistent synthesis never appears in the manifest",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method != "DISCOVER" || x.Request.Path != "/" || r.Status != 200 {
				return
			}
			res, save := result(r)
			eps, _ := res["endpoints"].([]any)
			kept := []any{}
			for _, e := range eps {
				if m, ok := e.(map[string]any); ok && (m["synthesis_id"] != nil || m["negotiation_origin"] == "propose") {
					continue
				}
				kept = append(kept, e)
			}
			res["endpoints"] = kept
			save()
		},
	},
	{
		ID:     "agtp.propose.persistent.refusal-independent",
		Broken: "refusing persistence refuses the whole proposal (463 policy-refused)",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isPropose(x) || r.Status != 263 || x.Params()["persistent"] != true {
				return
			}
			if res, _ := result(r); res["persistent"] != true {
				refuseAs(r, 463, "policy-refused")
			}
		},
	},
	// 261 Negotiation In Progress.
	{
		ID:     "agtp.propose.async.in-progress-261",
		Broken: "a 261 names no proposal_id, so there is nothing to poll",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if r.Status == 261 {
				res, save := result(r)
				delete(res, "proposal_id")
				delete(res, "poll")
				save()
			}
		},
	},
	{
		ID:     "agtp.propose.async.poll-terminal",
		Broken: "QUERY /proposals/{proposal_id} answers 261 forever, decided or not",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method != "QUERY" || !strings.HasPrefix(x.Request.Path, "/proposals/") || r.Status == 261 {
				return
			}
			id := strings.TrimPrefix(x.Request.Path, "/proposals/")
			*r = *agtpOK(map[string]any{"status": 261, "proposal_id": id, "state": "pending"})
			r.Status = 261
		},
	},
	// Inventory.
	{
		ID:     "agtp.inventory.patterns",
		Broken: "DISCOVER /patterns omits the recipe versions",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method == "DISCOVER" && x.Request.Path == "/patterns" {
				doc := agtpJSON(r)
				objectsIn(doc, func(m map[string]any) { delete(m, "recipe_version") })
				setAGTPJSON(r, doc)
			}
		},
	},
	{
		ID:     "agtp.inventory.contracts-own",
		Broken: "DISCOVER /contracts lists every agent's contracts to anyone",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			rememberOwner(x, r)
			if x.Request.Method != "DISCOVER" || x.Request.Path != "/contracts" || r.Status != 200 {
				return
			}
			res, save := result(r)
			list, _ := res["contracts"].([]any)
			listed := map[string]bool{}
			for _, c := range list {
				if m, ok := c.(map[string]any); ok {
					listed[asString(m["synthesis_id"])] = true
				}
			}
			x.Memory.Range(func(k, v any) bool {
				if sid, ok := strings.CutPrefix(k.(string), "owner:"); ok && !listed[sid] {
					list = append(list, map[string]any{"synthesis_id": sid, "agent_id": v})
				}
				return true
			})
			res["contracts"] = list
			save()
		},
	},
	{
		ID:     "agtp.inventory.contracts-inspect-all",
		Broken: "inspect:all is ignored: DISCOVER /contracts lists only the caller's own contracts",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method != "DISCOVER" || x.Request.Path != "/contracts" || r.Status != 200 {
				return
			}
			me := x.Request.Header.Get("Agent-ID")
			res, save := result(r)
			list, _ := res["contracts"].([]any)
			kept := []any{}
			for _, c := range list {
				if m, ok := c.(map[string]any); ok && m["agent_id"] == me {
					kept = append(kept, c)
				}
			}
			res["contracts"] = kept
			save()
		},
	},
	{
		ID:     "agtp.inventory.inspect-contract-fields",
		Broken: "INSPECT target=contract omits the recipe lineage and the expiry",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "INSPECT", "contract") && r.Status == 200 {
				res, save := result(r)
				delete(res, "recipe_lineage")
				delete(res, "expires_at")
				save()
			}
		},
	},
	{
		ID:     "agtp.inventory.inspect-contract-not-yours",
		Broken: "INSPECT target=contract shows any agent's contract to anyone",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if isFloor(x, "INSPECT", "contract") {
				if o := owner(x, asString(x.Params()["synthesis_id"])); o != "" {
					x.Request.Header.Set("Agent-ID", o)
				}
			}
			return nil
		},
		AGTP: rememberOwner,
	},
	{
		ID:     "agtp.inventory.inspect-contract-not-found",
		Broken: "INSPECT target=contract of an unknown synthesis_id is 464 contract-not-yours",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "INSPECT", "contract") && r.Status == 404 {
				refuseAs(r, 464, "contract-not-yours")
			}
		},
	},
	{
		ID:     "agtp.inventory.inspect-rcns-attempt",
		Broken: "gate evaluations are not kept: INSPECT target=rcns-attempt is 404",
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isFloor(x, "INSPECT", "rcns-attempt") {
				refuseAs(r, 404, "attempt-not-found")
			}
		},
	},
}

func asString(v any) string { s, _ := v.(string); return s }

func containsAny(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
