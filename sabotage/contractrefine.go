package sabotage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

const cr = "contractrefine"

func isPreflightPost(x *Exchange) bool {
	return x.Method == http.MethodPost && x.Path == "/v1/preflight"
}
func isPreflightGet(x *Exchange) bool {
	return x.Method == http.MethodGet && strings.HasPrefix(x.Path, "/v1/preflight/")
}
func isTool(x *Exchange) bool { return x.Method == http.MethodPost && x.Path == "/v1/tool" }
func isWALSeam(x *Exchange) bool {
	return x.Method == http.MethodGet && x.Path == "/conformance/seams/contractrefine/wal"
}
func mode(x *Exchange) string { s, _ := x.Section(cr)["mode"].(string); return s }

// decision rewrites a 200 PreflightDecision from POST (and GET, when get).
func decision(get bool, edit func(d map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if r.Status != http.StatusOK || !(isPreflightPost(x) || (get && isPreflightGet(x))) {
			return
		}
		if d := r.JSON(); d != nil {
			edit(d)
			r.SetJSON(d)
		}
	}
}

// frames rewrites the WAL frames the read-back seam returns: the host as
// recorded, not as the seam reports it, is what the rule breaks.
func frames(edit func(kind string, attrs map[string]any) []map[string]any) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !isWALSeam(x) || r.Status != http.StatusOK {
			return
		}
		var body struct {
			Frames []map[string]any `json:"frames"`
		}
		if json.Unmarshal(r.Body, &body) != nil {
			return
		}
		var out []map[string]any
		for _, f := range body.Frames {
			kind, _ := f["kind"].(string)
			attrs, _ := f["attrs"].(map[string]any)
			for _, a := range edit(kind, attrs) {
				g := map[string]any{}
				for k, v := range f {
					g[k] = v
				}
				g["attrs"] = a
				out = append(out, g)
			}
		}
		if out == nil {
			out = []map[string]any{}
		}
		r.SetJSON(map[string]any{"frames": out})
	}
}

// reversedFrames answers the WAL seam's reads that match with their frames
// in reverse order.
func reversedFrames(match func(x *Exchange) bool) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !isWALSeam(x) || r.Status != http.StatusOK || !match(x) {
			return
		}
		var body struct {
			Frames []json.RawMessage `json:"frames"`
		}
		if json.Unmarshal(r.Body, &body) != nil || body.Frames == nil {
			return
		}
		slices.Reverse(body.Frames)
		r.SetJSON(map[string]any{"frames": body.Frames})
	}
}

// status turns one status into another on matching exchanges.
func status(match func(x *Exchange) bool, from, to int) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if match(x) && r.Status == from {
			r.Status = to
		}
	}
}

// toolKind is the kind a /v1/tool call names.
func toolKind(x *Exchange) string {
	var b struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(x.Body, &b)
	return b.Kind
}

// deliverAnyway makes the delivery tool.deliver would have made: what a
// host that runs a tool before deciding would leave behind.
func deliverAnyway(x *Exchange) {
	tools, _ := x.Section(cr)["tools"].(map[string]any)
	u, _ := tools["deliver_url"].(string)
	var b struct {
		Params json.RawMessage `json:"params"`
	}
	if u == "" || json.Unmarshal(x.Body, &b) != nil {
		return
	}
	var p struct {
		Mailbox string `json:"mailbox"`
	}
	if json.Unmarshal(b.Params, &p) == nil && p.Mailbox != "" {
		u = strings.TrimSuffix(u, "/") + "/" + p.Mailbox
	}
	resp, err := http.Post(u, "application/json", bytes.NewReader(b.Params))
	if err == nil {
		resp.Body.Close()
	}
}

// memory keeps, per host behind the proxy, what a rule saw earlier: a
// sabotaged host that remembers what it should have forgotten.
type memory struct {
	mu sync.Mutex
	m  map[string][]string
}

func (m *memory) add(host, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string][]string{}
	}
	m.m[host] = append(m.m[host], v)
}

func (m *memory) all(host string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.m[host]...)
}

// ladder is the repair ladder a preflight request names.
type ladder struct{ session, planHash string }

func ladderOf(body []byte) ladder {
	var b struct {
		Intent struct {
			PlanHash string `json:"plan_hash"`
		} `json:"intent"`
		Actor struct {
			SessionID string `json:"session_id"`
		} `json:"actor"`
	}
	_ = json.Unmarshal(body, &b)
	return ladder{b.Actor.SessionID, b.Intent.PlanHash}
}

// maxRepairs is the repair budget of the request's agent: its own when the
// configuration tunes it (agents.<id>), else the host-wide one (2 unset, as
// the reference host's default).
func maxRepairs(x *Exchange) int {
	var b struct {
		Actor struct {
			AgentID string `json:"agent_id"`
		} `json:"actor"`
	}
	_ = json.Unmarshal(x.Body, &b)
	agents, _ := x.Section(cr)["agents"].(map[string]any)
	if a, _ := agents[b.Actor.AgentID].(map[string]any); a != nil {
		if n, ok := a["max_repair_attempts"].(float64); ok {
			return int(n)
		}
	}
	if n, ok := x.Section(cr)["max_repair_attempts"].(float64); ok {
		return int(n)
	}
	return 2
}

// generations remembers which host process answered what: a restarted host
// sits behind a new proxy with a new upstream address, so an id answered on
// another upstream was answered before the host restarted.
type generations struct {
	mu sync.Mutex
	m  map[string]string // key -> upstream that first answered it
}

func (g *generations) note(key, upstream string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]string{}
	}
	if _, ok := g.m[key]; !ok {
		g.m[key] = upstream
	}
}

// before reports whether key was first answered by another host process
// than the one behind x.
func (g *generations) before(key string, x *Exchange) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	up, ok := g.m[key]
	return ok && up != x.Upstream
}

// forgetful is a host that keeps its decisions where a restart loses them
// (in memory, or in a buffer it never wrote out): after a restart, a
// decision answered before it is gone from GET, from the WAL, and from the
// bindings /v1/tool consults.
func forgetful(x *Exchange) *Response {
	lost := func(id string) bool { return answeredIDs.before(id, x) }
	switch {
	case isPreflightGet(x) && lost(strings.TrimPrefix(x.Path, "/v1/preflight/")):
		return &Response{Status: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"no autonomy.preflight frame"}`)}
	case isTool(x) && mode(x) == "enforce" && lost(x.Header.Get("X-Autonomy-Preflight-Id")):
		return &Response{Status: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"outcome":"deny","reason":"contract: binding_not_found"}`)}
	}
	return nil
}

func forgetfulFrames(x *Exchange, r *Response) {
	if isPreflightPost(x) && r.Status == http.StatusOK {
		if d := r.JSON(); d != nil {
			if id, _ := d["preflight_id"].(string); id != "" {
				answeredIDs.note(id, x.Upstream)
			}
		}
	}
	frames(func(kind string, a map[string]any) []map[string]any {
		if id, _ := a["preflight_id"].(string); kind == "autonomy.preflight" && answeredIDs.before(id, x) {
			return nil
		}
		return []map[string]any{a}
	})(x, r)
}

var (
	answeredIDs   generations // preflight ids, by the host process that answered them
	ladders       generations // repair ladders, by the host process that first saw them
	ladderRepairs struct {
		sync.Mutex
		bySession  map[string]int
		byPlanHash map[string]int
	}
	decisionsByLadder struct {
		sync.Mutex
		ids  map[string]ladder // preflight id -> its ladder
		last map[ladder][]byte // ladder -> the latest decision answered
	}
	refusedPlanHashes memory // plan hashes of preflight requests answered 400
	presentedBindings memory // preflight ids presented to a disabled host
	planHashIn        = regexp.MustCompile(`"plan_hash"\s*:\s*"([^"]+)"`)
)

func eligibility(d map[string]any) map[string]any {
	e, _ := d["execution_eligibility"].(map[string]any)
	if e == nil {
		e = map[string]any{}
		d["execution_eligibility"] = e
	}
	return e
}

// modeRead makes a host read one mode value as another.
func modeRead(from, to any) func(c map[string]map[string]any) {
	return func(c map[string]map[string]any) {
		if s := c[cr]; s != nil {
			v, set := s["mode"]
			if (from == nil && !set) || (set && v == from) {
				s["mode"] = to
			}
		}
	}
}

var contractRefineRules = []Rule{
	{
		ID:     "contractrefine.preflight.mode.empty-defaults-advisory",
		Broken: "an unset mode resolves to disabled (the pre-advisory default)",
		Config: modeRead(nil, "disabled"),
	},
	{
		ID:      "contractrefine.preflight.mode.empty-defaults-advisory",
		Variant: "enforce",
		Broken:  "an unset mode resolves to enforce, so a failed binding is refused",
		Config:  modeRead(nil, "enforce"),
	},
	{
		ID:     "contractrefine.preflight.mode.well-formed-preserved",
		Broken: "an explicit enforce is read as advisory",
		Config: modeRead("enforce", "advisory"),
	},
	{
		ID:      "contractrefine.preflight.mode.well-formed-preserved",
		Variant: "disabled",
		Broken:  "an explicit disabled is read as the advisory default",
		Config:  modeRead("disabled", "advisory"),
	},
	{
		ID:      "contractrefine.preflight.mode.well-formed-preserved",
		Variant: "advisory",
		Broken:  "an explicit advisory is read as enforce",
		Config:  modeRead("advisory", "enforce"),
	},
	{
		ID:     "contractrefine.preflight.mode.typo-falls-back-to-disabled",
		Broken: "an unrecognized mode opens the surface as advisory",
		Config: func(c map[string]map[string]any) {
			if s := c[cr]; s != nil {
				switch s["mode"] {
				case nil, "", "disabled", "advisory", "enforce":
				default:
					s["mode"] = "advisory"
				}
			}
		},
	},
	{
		ID:     "contractrefine.preflight.mode.typo-startup-warning",
		Broken: "falls back to disabled silently: no warning is logged",
		Logs: func(lines []string) []string {
			var out []string
			for _, l := range lines {
				if !strings.Contains(strings.ToLower(l), "warn") {
					out = append(out, l)
				}
			}
			return out
		},
	},
	{
		ID:       "contractrefine.preflight.post.disabled-503",
		Broken:   "a disabled host answers preflights 404 instead of 503",
		Response: status(func(x *Exchange) bool { return isPreflightPost(x) && mode(x) == "disabled" }, 503, 404),
	},
	{
		ID:     "contractrefine.preflight.post.no-verifier-503",
		Broken: "with no verifier wired, POST fails with 500 instead of failing closed with 503",
		Response: status(func(x *Exchange) bool {
			v, _ := x.Section(cr)["verifier"].(map[string]any)
			return isPreflightPost(x) && v != nil && v["wired"] == false
		}, 503, 500),
	},
	{
		ID:     "contractrefine.preflight.post.outcome-closed-enum",
		Broken: "answers repair_required as an out-of-enum \"repair\"",
		Response: decision(false, func(d map[string]any) {
			if d["outcome"] == "repair_required" {
				d["outcome"] = "repair"
			}
		}),
	},
	{
		ID:      "contractrefine.preflight.post.outcome-closed-enum",
		Variant: "pass",
		Broken:  "answers pass as an out-of-enum \"passed\"",
		Response: decision(false, func(d map[string]any) {
			if d["outcome"] == "pass" {
				d["outcome"] = "passed"
			}
		}),
	},
	{
		ID:      "contractrefine.preflight.post.outcome-closed-enum",
		Variant: "deny",
		Broken:  "answers a deny with status 403 instead of a 200 decision",
		Response: func(x *Exchange, r *Response) {
			if d := r.JSON(); isPreflightPost(x) && r.Status == http.StatusOK && d != nil && d["outcome"] == "deny" {
				r.Status = http.StatusForbidden
			}
		},
	},
	{
		ID:       "contractrefine.preflight.post.decision-shape",
		Broken:   "omits policy_ref from decisions",
		Response: decision(false, func(d map[string]any) { delete(d, "policy_ref") }),
	},
	{
		ID:     "contractrefine.preflight.post.no-headers-required",
		Broken: "refuses a preflight without Content-Type with 415",
		Intercept: func(x *Exchange) *Response {
			if isPreflightPost(x) && x.Header.Get("Content-Type") == "" {
				return &Response{Status: http.StatusUnsupportedMediaType, Header: http.Header{}, Body: []byte(`{"error":"content type required"}`)}
			}
			return nil
		},
	},
	{
		ID:     "contractrefine.preflight.post.session-metadata-missing-deny",
		Broken: "denies a request without session metadata under another reason",
		Response: decision(false, func(d map[string]any) {
			if d["reason"] == "contract: session_metadata_missing" {
				d["reason"] = "contract: plan_shape_invalid"
			}
		}),
	},
	{
		ID:     "contractrefine.preflight.post.repair-hints",
		Broken: "answers repair_required without repair hints",
		Response: decision(false, func(d map[string]any) {
			if d["outcome"] == "repair_required" {
				delete(d, "repair_hints")
			}
		}),
	},
	{
		ID:     "contractrefine.preflight.post.repair-attempts-bounded",
		Broken: "the repair budget never runs out",
		Config: func(c map[string]map[string]any) {
			if s := c[cr]; s != nil {
				if _, set := s["max_repair_attempts"]; set {
					s["max_repair_attempts"] = 1 << 30
				}
				agents, _ := s["agents"].(map[string]any)
				for _, a := range agents {
					if a, _ := a.(map[string]any); a != nil && a["max_repair_attempts"] != nil {
						a["max_repair_attempts"] = 1 << 30
					}
				}
			}
		},
	},
	{
		ID:       "contractrefine.preflight.post.malformed-body-400",
		Broken:   "answers a malformed body 422 instead of 400",
		Response: status(isPreflightPost, 400, 422),
	},
	{
		ID:     "contractrefine.preflight.post.wal-emit-failure-500",
		Broken: "returns the decision even though the WAL emit failed",
		Response: func(x *Exchange, r *Response) {
			if isPreflightPost(x) && r.Status == http.StatusInternalServerError {
				r.Status = http.StatusOK
				r.SetJSON(map[string]any{
					"preflight_id": uuid.NewString(), "audit_id": uuid.NewString(), "outcome": "pass",
					"reason": "contract: passed", "policy_ref": "p", "lock_fingerprint": "l", "contract_results": []any{},
					"execution_eligibility": map[string]any{"allowed": true, "bound_tool_kinds": []any{"tool.echo"}, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
				})
			}
		},
	},
	{
		ID:     "contractrefine.preflight.post.deny-expires-at-empty",
		Broken: "issues an expiry on deny decisions",
		Response: decision(false, func(d map[string]any) {
			if d["outcome"] == "deny" {
				eligibility(d)["expires_at"] = time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)
			}
		}),
	},
	{
		ID:     "contractrefine.preflight.post.pass-eligibility",
		Broken: "a pass is not marked allowed",
		Response: decision(false, func(d map[string]any) {
			if d["outcome"] == "pass" {
				eligibility(d)["allowed"] = false
			}
		}),
	},
	{
		ID:     "contractrefine.preflight.post.preflight-id-uuidv4",
		Broken: "assigns time-ordered UUIDv7 preflight ids",
		// The host's own ids are swapped for UUIDv7s everywhere it shows
		// or reads them (answers, WAL frames, GET paths, the binding
		// header, seam filters), so the host stays consistent and only the
		// id's version is wrong.
		Intercept: v7ids.intercept,
		Response:  v7ids.response,
	},
	{
		ID:     "contractrefine.preflight.post.audit-id-uuidv4",
		Broken: "reuses one audit_id for every decision",
		// The one id stands for every audit_id the host gives a decision,
		// wherever it shows one (answers, GET, WAL frames, the tool's
		// answers and frames that share it) and in the seam's audit_id
		// filter, so the host stays consistent: only the reuse is wrong.
		Intercept: reusedAudit.intercept,
		Response:  reusedAudit.response,
	},
	{
		ID:     "contractrefine.preflight.post.reason-shape",
		Broken: "drops the \"contract: \" prefix from reasons, on the wire and in the WAL",
		// Everywhere the host shows a decision (POST, GET, the frame's
		// reason and its decision_json), so the host stays consistent and
		// only the reason's shape is wrong.
		Response: func(x *Exchange, r *Response) {
			decision(true, func(d map[string]any) {
				if s, ok := d["reason"].(string); ok {
					d["reason"] = strings.TrimPrefix(s, "contract: ")
				}
			})(x, r)
			frames(func(kind string, a map[string]any) []map[string]any {
				if s, ok := a["reason"].(string); ok {
					a["reason"] = strings.TrimPrefix(s, "contract: ")
				}
				if s, ok := a["decision_json"].(string); ok {
					var d map[string]any
					if json.Unmarshal([]byte(s), &d) == nil {
						if rs, ok := d["reason"].(string); ok {
							d["reason"] = strings.TrimPrefix(rs, "contract: ")
							b, _ := json.Marshal(d)
							a["decision_json"] = string(b)
						}
					}
				}
				return []map[string]any{a}
			})(x, r)
		},
	},
	{
		ID:     "contractrefine.preflight.post.live-lock-fingerprint",
		Broken: "reports the fingerprint the verifier was built with, not the live one",
		Response: func(x *Exchange, r *Response) {
			v, _ := x.Section(cr)["verifier"].(map[string]any)
			built, _ := v["lock_fingerprint"].(string)
			if built == "" {
				return
			}
			decision(false, func(d map[string]any) { d["lock_fingerprint"] = built })(x, r)
			frames(func(kind string, a map[string]any) []map[string]any {
				if kind == "autonomy.preflight" {
					a["lock_fingerprint"] = built
				}
				return []map[string]any{a}
			})(x, r)
		},
	},
	{
		ID:     "contractrefine.preflight.get.returns-stored-decision",
		Broken: "GET rebuilds the decision instead of returning it verbatim (contract_results lost)",
		Response: func(x *Exchange, r *Response) {
			if isPreflightGet(x) && r.Status == http.StatusOK {
				if d := r.JSON(); d != nil {
					d["contract_results"] = []any{}
					r.SetJSON(d)
				}
			}
		},
	},
	{
		ID:       "contractrefine.preflight.get.empty-id-400",
		Broken:   "an empty id segment is answered 404",
		Response: status(func(x *Exchange) bool { return isPreflightGet(x) && x.Path == "/v1/preflight/" }, 400, 404),
	},
	{
		ID:     "contractrefine.preflight.get.unknown-id-404",
		Broken: "an unknown id is answered 200 with an empty object",
		Response: func(x *Exchange, r *Response) {
			if isPreflightGet(x) && r.Status == http.StatusNotFound {
				r.Status = http.StatusOK
				r.Body = []byte("{}")
			}
		},
	},
	{
		ID:       "contractrefine.preflight.get.disabled-503",
		Broken:   "a disabled host answers GET 404 instead of 503",
		Response: status(func(x *Exchange) bool { return isPreflightGet(x) && mode(x) == "disabled" }, 503, 404),
	},
	{
		ID:       "contractrefine.preflight.get.emitter-unwired-503",
		Broken:   "with no emitter wired, GET answers 404 instead of 503",
		Response: status(func(x *Exchange) bool { return isPreflightGet(x) && x.Section(cr)["emitter"] == "none" }, 503, 404),
	},
	{
		ID:       "contractrefine.preflight.get.wal-read-error-500",
		Broken:   "a WAL read error is reported as 404, as though the decision never existed",
		Response: status(isPreflightGet, 500, 404),
	},
	{
		ID:     "contractrefine.preflight.wal.one-frame-per-decision",
		Broken: "writes every autonomy.preflight frame twice",
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if kind == "autonomy.preflight" {
				return []map[string]any{a, a}
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:      "contractrefine.preflight.wal.one-frame-per-decision",
		Variant: "refused-request",
		Broken:  "writes an autonomy.preflight frame for a request it refused as malformed",
		Response: func(x *Exchange, r *Response) {
			if isPreflightPost(x) && r.Status == http.StatusBadRequest {
				if m := planHashIn.FindSubmatch(x.Body); m != nil {
					refusedPlanHashes.add(x.Upstream, string(m[1]))
				}
			}
			if isWALSeam(x) && r.Status == http.StatusOK {
				var body struct {
					Frames []map[string]any `json:"frames"`
				}
				if json.Unmarshal(r.Body, &body) == nil && body.Frames != nil {
					for _, ph := range refusedPlanHashes.all(x.Upstream) {
						body.Frames = append(body.Frames, map[string]any{"kind": "autonomy.preflight", "attrs": map[string]any{"preflight_id": uuid.NewString(), "plan_hash": ph, "outcome": "deny"}})
					}
					r.SetJSON(body)
				}
			}
		},
	},
	{
		ID:     "contractrefine.preflight.wal.frame-attributes",
		Broken: "omits policy_ref from autonomy.preflight frames",
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if kind == "autonomy.preflight" {
				delete(a, "policy_ref")
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.preflight.wal.optional-attributes",
		Broken: "never records the optional zone attribute",
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			delete(a, "zone")
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.preflight.wal.decision-json-verbatim",
		Broken: "decision_json records a summary (outcome and reason only), not the decision",
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if s, ok := a["decision_json"].(string); ok {
				var d map[string]any
				if json.Unmarshal([]byte(s), &d) == nil {
					b, _ := json.Marshal(map[string]any{"outcome": d["outcome"], "reason": d["reason"]})
					a["decision_json"] = string(b)
				}
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.preflight.wal.audit-id-joins-tool-decision",
		Broken: "tool decision frames carry a fresh audit_id, not the preflight's",
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if kind == "autonomy.decision" {
				a["audit_id"] = uuid.NewString()
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.tool.disabled-ignores-header",
		Broken: "in disabled mode a call naming a preflight is refused",
		Intercept: func(x *Exchange) *Response {
			if isTool(x) && mode(x) == "disabled" && x.Header.Get("X-Autonomy-Preflight-Id") != "" {
				return &Response{Status: http.StatusForbidden, Header: http.Header{}, Body: []byte(`{"outcome":"deny","reason":"contract: binding_not_found"}`)}
			}
			return nil
		},
	},
	{
		ID:      "contractrefine.tool.disabled-ignores-header",
		Variant: "recorded",
		Broken:  "in disabled mode it still records the binding: the tool's decision frame names the preflight id it was given",
		Response: func(x *Exchange, r *Response) {
			if isTool(x) && mode(x) == "disabled" && x.Header.Get("X-Autonomy-Preflight-Id") != "" {
				presentedBindings.add(x.Upstream, x.Header.Get("X-Autonomy-Preflight-Id"))
			}
			ids := presentedBindings.all(x.Upstream)
			if len(ids) == 0 {
				return
			}
			frames(func(kind string, a map[string]any) []map[string]any {
				if kind == "autonomy.decision" {
					a["preflight_id"] = ids[len(ids)-1]
				}
				return []map[string]any{a}
			})(x, r)
		},
	},
	{
		ID:     "contractrefine.tool.advisory-binding-failure-deny-frame",
		Broken: "in advisory mode a failed binding leaves no deny frame",
		// Only the frames of calls that named a preflight: a call missing a
		// required preflight is another id's.
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if kind == "autonomy.decision" && a["outcome"] == "deny" && a["preflight_id"] != nil {
				return nil
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.tool.advisory-required-preflight-deny-frame",
		Broken: "in advisory mode a call missing a preflight its policy bundle requires leaves no deny frame",
		// Only the binding-stage frames of calls that named no preflight: a
		// failed binding is another id's.
		Response: frames(func(kind string, a map[string]any) []map[string]any {
			if kind == "autonomy.decision" && a["outcome"] == "deny" && a["preflight_id"] == nil && a["stage"] == "binding" {
				return nil
			}
			return []map[string]any{a}
		}),
	},
	{
		ID:     "contractrefine.tool.advisory-continues-to-policy",
		Broken: "in advisory mode a failed binding answers 403, as enforce does",
		// The host still records the failure (its deny frame) and a good
		// binding is answered as ever: only the answer to a failed one is
		// the refusal. Which bindings fail is read from the decisions the
		// host answered (an unknown id, a decision other than a pass, a
		// kind the pass does not bind).
		Response: func(x *Exchange, r *Response) {
			bindings.learn(x, r)
			m := mode(x)
			id := x.Header.Get("X-Autonomy-Preflight-Id")
			if isTool(x) && (m == "advisory" || m == "") && id != "" && r.Status == http.StatusOK && !bindings.binds(id, toolKind(x)) {
				r.Status = http.StatusForbidden
				r.SetJSON(map[string]any{"outcome": "deny", "reason": "contract: binding_not_found"})
			}
		},
	},
	{
		ID:      "contractrefine.tool.advisory-continues-to-policy",
		Variant: "skips-policy",
		Broken:  "in advisory mode a failed binding skips the policy stage: a kind the policy does not allow runs",
		Intercept: func(x *Exchange) *Response {
			m := mode(x)
			if isTool(x) && (m == "advisory" || m == "") && x.Header.Get("X-Autonomy-Preflight-Id") != "" && toolKind(x) == "tool.unlisted" {
				return &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"outcome":"allow"}`)}
			}
			return nil
		},
	},
	{
		ID:     "contractrefine.tool.enforce-mismatch-denied",
		Broken: "in enforce mode a binding failure is only recorded and the tool runs",
		Config: modeRead("enforce", "advisory"),
	},
	{
		ID:      "contractrefine.tool.enforce-mismatch-denied",
		Variant: "runs-then-denies",
		Broken:  "in enforce mode it runs the tool, then answers 403 for the failed binding",
		Response: func(x *Exchange, r *Response) {
			if isTool(x) && mode(x) == "enforce" && r.Status == http.StatusForbidden {
				deliverAnyway(x)
			}
		},
	},
	{
		ID:       "contractrefine.tool.enforce-bound-call-allowed",
		Broken:   "in enforce mode even a correctly bound call is denied",
		Response: status(func(x *Exchange) bool { return isTool(x) && mode(x) == "enforce" }, 200, 403),
	},
	{
		ID:      "contractrefine.tool.enforce-bound-call-allowed",
		Variant: "no-effect",
		Broken:  "in enforce mode it answers a bound tool.deliver 200 without delivering",
		Intercept: func(x *Exchange) *Response {
			if isTool(x) && mode(x) == "enforce" && toolKind(x) == "tool.deliver" && x.Header.Get("X-Autonomy-Preflight-Id") != "" {
				return &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"outcome":"allow","result":{"delivered":true}}`)}
			}
			return nil
		},
	},
	{
		ID:     "contractrefine.tool.enforce-policy-requires-preflight",
		Broken: "in enforce mode ignores the policy bundle's requires_preflight",
		// Enforce only: what advisory does with the bundle is other ids'.
		Config: func(c map[string]map[string]any) {
			if s := c[cr]; s != nil && s["mode"] == "enforce" {
				delete(s, "policy")
			}
		},
	},
	{
		ID:      "contractrefine.tool.advisory-continues-to-policy",
		Variant: "required",
		Broken:  "in advisory mode a call without the preflight its policy bundle requires answers 403, as enforce does",
		// The host still records the call as it would; only the answer is
		// the refusal.
		Response: func(x *Exchange, r *Response) {
			m := mode(x)
			pol, _ := x.Section(cr)["policy"].(map[string]any)
			req, _ := pol["requires_preflight"].([]any)
			if isTool(x) && (m == "advisory" || m == "") && x.Header.Get("X-Autonomy-Preflight-Id") == "" && slices.Contains(req, any(toolKind(x))) && r.Status == http.StatusOK {
				r.Status = http.StatusForbidden
				r.SetJSON(map[string]any{"outcome": "deny", "reason": "contract: preflight_required"})
			}
		},
	},
	{
		ID:     "contractrefine.preflight.post.zone-outside-policy-not-passed",
		Broken: "ignores the configured zone policy (its own default zones apply)",
		Config: func(c map[string]map[string]any) {
			if v, _ := c[cr]["verifier"].(map[string]any); v != nil {
				delete(v, "allowed_zones")
			}
		},
	},
	{
		ID:     "contractrefine.tool.binding-expires",
		Broken: "never expires a binding: it holds the pass for an hour while telling the caller the configured lifetime",
		Config: func(c map[string]map[string]any) {
			if s := c[cr]; s != nil {
				if s["eligibility_ttl"] != nil {
					s["eligibility_ttl"] = "1h"
				}
				agents, _ := s["agents"].(map[string]any)
				for _, a := range agents {
					if a, _ := a.(map[string]any); a != nil && a["eligibility_ttl"] != nil {
						a["eligibility_ttl"] = "1h"
					}
				}
			}
		},
		Response: func(x *Exchange, r *Response) {
			ttl, err := configuredTTL(x)
			if err != nil {
				return
			}
			decision(true, func(d map[string]any) {
				if e := eligibility(d); e["expires_at"] != "" {
					if t, err := time.Parse(time.RFC3339, fmt.Sprint(e["expires_at"])); err == nil {
						e["expires_at"] = t.Add(ttl - time.Hour).UTC().Format(time.RFC3339)
						if id, _ := d["preflight_id"].(string); id != "" && isPreflightPost(x) {
							ttlByID.Lock()
							if ttlByID.m == nil {
								ttlByID.m = map[string]time.Duration{}
							}
							ttlByID.m[id] = ttl
							ttlByID.Unlock()
						}
					}
				}
			})(x, r)
		},
	},
	{
		ID:        "contractrefine.preflight.wal.decision-survives-crash",
		Broken:    "answers a decision before its frame is durable: a restart loses every decision answered before it",
		Intercept: forgetful,
		Response:  forgetfulFrames,
	},
	{
		ID:       "contractrefine.preflight.wal.audit-query-chronological",
		Broken:   "its WAL read answers an agent's autonomy.preflight frames newest first",
		Response: reversedFrames(func(x *Exchange) bool { return x.Query.Get("attr.actor_agent_id") != "" }),
	},
	{
		ID:       "contractrefine.preflight.wal.audit-join-chronological",
		Broken:   "its audit query by audit_id answers the frames newest first: the tool decision before the preflight it bound",
		Response: reversedFrames(func(x *Exchange) bool { return x.Query.Get("attr.audit_id") != "" }),
	},
	{
		// The proxy cannot tell a power cut from a crash: it forgets across
		// any restart. TestAnUnsyncedWALLosesDecisionsOnlyToAPowerCut shows
		// the defect the id is about, with a host that writes its frames and
		// never fsyncs them: it passes the crash scenarios and fails this id.
		ID:        "contractrefine.preflight.wal.decision-survives-power-cut",
		Broken:    "answers a decision before its frame is synced: a power cut loses every decision answered before it",
		Intercept: forgetful,
		Response:  forgetfulFrames,
	},
	{
		ID:        "contractrefine.preflight.wal.decision-survives-restart",
		Broken:    "keeps its WAL in memory: a restart loses every decision answered before it",
		Intercept: forgetful,
		Response:  forgetfulFrames,
	},
	{
		ID:        "contractrefine.tool.binding-survives-restart",
		Broken:    "keeps its bindings in memory: after a restart a pass answered before it binds nothing",
		Intercept: forgetful,
		Response:  forgetfulFrames,
	},
	{
		ID:      "contractrefine.preflight.get.returns-stored-decision",
		Variant: "by-ladder",
		Broken:  "GET looks a decision up by its session and plan hash and returns the latest of them",
		Response: func(x *Exchange, r *Response) {
			m := &decisionsByLadder
			m.Lock()
			defer m.Unlock()
			if m.ids == nil {
				m.ids, m.last = map[string]ladder{}, map[ladder][]byte{}
			}
			if isPreflightPost(x) && r.Status == http.StatusOK {
				if d := r.JSON(); d != nil {
					if id, _ := d["preflight_id"].(string); id != "" {
						l := ladderOf(x.Body)
						m.ids[id] = l
						m.last[l] = append([]byte(nil), r.Body...)
					}
				}
			}
			if isPreflightGet(x) && r.Status == http.StatusOK {
				if l, ok := m.ids[strings.TrimPrefix(x.Path, "/v1/preflight/")]; ok {
					r.Body = append([]byte(nil), m.last[l]...)
				}
			}
		},
	},
	{
		ID:       "contractrefine.preflight.post.repair-attempts-bounded",
		Variant:  "per-session",
		Broken:   "keys the repair budget by session alone: another plan hash in the same session finds it spent",
		Response: sharedBudget(func(l ladder) string { return l.session }, &ladderRepairs.bySession),
	},
	{
		ID:       "contractrefine.preflight.post.repair-attempts-bounded",
		Variant:  "per-plan-hash",
		Broken:   "keys the repair budget by plan hash alone: another session with the same plan hash finds it spent",
		Response: sharedBudget(func(l ladder) string { return l.planHash }, &ladderRepairs.byPlanHash),
	},
	{
		ID:     "contractrefine.preflight.post.repair-budget-survives-restart",
		Broken: "keeps repair budgets in memory only: a restart refills a spent budget",
		Response: func(x *Exchange, r *Response) {
			if !isPreflightPost(x) || r.Status != http.StatusOK {
				return
			}
			l := ladderOf(x.Body)
			key := l.session + "\x00" + l.planHash
			ladders.note(key, x.Upstream)
			if !ladders.before(key, x) {
				return
			}
			decision(false, func(d map[string]any) {
				if d["reason"] == "contract: repair_budget_exhausted" {
					d["outcome"], d["reason"] = "repair_required", "contract: provenance_missing"
				}
			})(x, r)
		},
	},
}

// configuredTTL is the binding lifetime the configuration gives the
// request's agent (agents.<id>.eligibility_ttl), else the host-wide one; a
// GET reads the lifetime its decision was answered with at POST.
func configuredTTL(x *Exchange) (time.Duration, error) {
	if isPreflightGet(x) {
		ttlByID.Lock()
		defer ttlByID.Unlock()
		if d, ok := ttlByID.m[strings.TrimPrefix(x.Path, "/v1/preflight/")]; ok {
			return d, nil
		}
		return 0, fmt.Errorf("unknown")
	}
	var b struct {
		Actor struct {
			AgentID string `json:"agent_id"`
		} `json:"actor"`
	}
	_ = json.Unmarshal(x.Body, &b)
	raw := x.Section(cr)["eligibility_ttl"]
	agents, _ := x.Section(cr)["agents"].(map[string]any)
	if a, _ := agents[b.Actor.AgentID].(map[string]any); a != nil && a["eligibility_ttl"] != nil {
		raw = a["eligibility_ttl"]
	}
	return time.ParseDuration(fmt.Sprint(raw))
}

var ttlByID struct {
	sync.Mutex
	m map[string]time.Duration
}

// sharedBudget is a repair budget keyed by part of the ladder only: once
// the repair_required answers of that part reach the configured budget, a
// further one is turned into the budget-exhausted deny.
func sharedBudget(part func(ladder) string, counts *map[string]int) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !isPreflightPost(x) || r.Status != http.StatusOK {
			return
		}
		d := r.JSON()
		if d == nil || d["outcome"] != "repair_required" {
			return
		}
		ladderRepairs.Lock()
		defer ladderRepairs.Unlock()
		if *counts == nil {
			*counts = map[string]int{}
		}
		k := x.Upstream + "\x00" + part(ladderOf(x.Body))
		(*counts)[k]++
		if (*counts)[k] > maxRepairs(x) {
			d["outcome"], d["reason"] = "deny", "contract: repair_budget_exhausted"
			delete(d, "repair_hints")
			r.SetJSON(d)
		}
	}
}

// v7ids is the preflight-id rule's host: every preflight id it issues is
// a UUIDv7 standing for the reference host's own id, in both directions.
var v7ids = &idSwap{}

type idSwap struct {
	mu   sync.Mutex
	fake idMap // real -> fake
	real idMap // fake -> real
}

// toFake replaces the host's ids by their stand-ins in b, minting a
// stand-in for the preflight_id of a decision POST answered.
func (s *idSwap) toFake(x *Exchange, status int, b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if isPreflightPost(x) && status == http.StatusOK {
		var d map[string]any
		if json.Unmarshal(b, &d) == nil {
			if id, _ := d["preflight_id"].(string); id != "" && !s.fake.has(id) {
				f := uuid.Must(uuid.NewV7()).String()
				s.fake.set(id, f)
				s.real.set(f, id)
			}
		}
	}
	return s.fake.apply(b)
}

// toReal replaces stand-ins by the host's ids in v.
func (s *idSwap) toReal(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.real.applyString(v)
}

func (s *idSwap) response(x *Exchange, r *Response) { r.Body = s.toFake(x, r.Status, r.Body) }

// intercept sends a request that names a stand-in to the host with the
// host's own id instead, and answers with the stand-ins put back.
func (s *idSwap) intercept(x *Exchange) *Response {
	path, query, body := s.toReal(x.Path), s.toReal(x.Query.Encode()), s.toReal(string(x.Body))
	header := x.Header.Clone()
	changed := path != x.Path || query != x.Query.Encode() || body != string(x.Body)
	for k, vs := range header {
		for i, v := range vs {
			if r := s.toReal(v); r != v {
				vs[i], changed = r, true
			}
		}
		header[k] = vs
	}
	if !changed {
		return nil
	}
	r := forward(x, path, query, header, body)
	if r != nil {
		r.Body = s.toFake(x, r.Status, r.Body)
	}
	return r
}

// forward sends the exchange's request to the host with path, query,
// header and body in place of its own, and returns the host's answer
// (nil when the request cannot be built).
func forward(x *Exchange, path, query string, header http.Header, body string) *Response {
	u := x.Upstream + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(x.Method, u, strings.NewReader(body))
	if err != nil {
		return nil
	}
	header.Del("Content-Length")
	req.Header = header
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return &Response{Status: http.StatusBadGateway, Header: http.Header{}, Body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	h := resp.Header.Clone()
	h.Del("Content-Length")
	return &Response{Status: resp.StatusCode, Header: h, Body: buf.Bytes()}
}

// reusedAudit is the audit-id rule's host: every audit_id it gives a
// decision reads as the one id reusedAuditID.
var reusedAudit = &auditReuse{}

const reusedAuditID = "3f1c2a9e-8b7d-4c6e-9a5f-0d1e2f3a4b5c"

type auditReuse struct {
	mu   sync.Mutex
	real idMap // the audit ids the host gave its decisions -> the reused one
}

// response learns the audit_id of a decision POST answered and shows every
// learnt id as the reused one.
func (a *auditReuse) response(x *Exchange, r *Response) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if isPreflightPost(x) && r.Status == http.StatusOK {
		if d := r.JSON(); d != nil {
			if id, _ := d["audit_id"].(string); id != "" {
				a.real.set(id, reusedAuditID)
			}
		}
	}
	r.Body = a.real.apply(r.Body)
}

// intercept reads the WAL for the reused id as a host that stored it
// would: the seam is asked without the audit_id filter, and the frames
// whose audit_id reads as the reused one are what it answers (the suite
// filters what the seam returns itself).
func (a *auditReuse) intercept(x *Exchange) *Response {
	if !isWALSeam(x) || x.Query.Get("attr.audit_id") != reusedAuditID {
		return nil
	}
	q := url.Values{}
	for k, v := range x.Query {
		if k != "attr.audit_id" {
			q[k] = v
		}
	}
	r := forward(x, x.Path, q.Encode(), x.Header.Clone(), string(x.Body))
	if r != nil {
		a.response(x, r)
	}
	return r
}

// bindings are the decisions the host answered, for the advisory rule to
// tell a failed binding from a good one as the host would.
var bindings = &decisionBook{m: map[string]booked{}}

type booked struct {
	pass  bool
	kinds []any
}

type decisionBook struct {
	mu sync.Mutex
	m  map[string]booked
}

func (b *decisionBook) learn(x *Exchange, r *Response) {
	if !isPreflightPost(x) || r.Status != http.StatusOK {
		return
	}
	d := r.JSON()
	id, _ := d["preflight_id"].(string)
	if id == "" {
		return
	}
	kinds, _ := eligibility(d)["bound_tool_kinds"].([]any)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[id] = booked{pass: d["outcome"] == "pass", kinds: kinds}
}

// binds reports whether the answered decision id binds a call of kind
// (expiry aside: a binding that expired is answered as the host answers).
func (b *decisionBook) binds(id, kind string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[id]
	return ok && d.pass && slices.Contains(d.kinds, any(kind))
}
