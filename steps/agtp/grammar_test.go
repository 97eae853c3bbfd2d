package agtp_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/schemas"
	agtpsteps "github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// The grammar the AGTP texts give what a client sends and an operator
// configures (agtp-wire-notes.md 1, 3, 6, 7, 9; the path grammar PROPOSE's
// step 2 applies): a method is 3 to 32 upper-case letters, in the method
// catalog or the server's own list; a path is '/'-separated lower-case
// resource segments ({name} in a pattern), never a method's name, never a
// fragment; an Agent-ID is 64 lowercase hex; a scope token is segments of
// [a-z0-9_-]+ or * joined by ':'.
var (
	methodRe   = regexp.MustCompile(`^[A-Z]{3,32}$`)
	segmentRe  = regexp.MustCompile(`^[a-z0-9_.~-]+$`)
	templateRe = regexp.MustCompile(`^\{[a-z0-9_]+\}$`)
	scopeRe    = regexp.MustCompile(`^(\*|[a-z0-9_-]+)(:(\*|[a-z0-9_-]+))*$`)
	agentIDRe  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	tokenCut   = regexp.MustCompile(`[-_.~]+`)
)

// floorMethods are the eighteen floor methods (agtp-wire-notes.md 7);
// catalogVerbs the approved catalog verbs beyond the floor that parley
// knows. A path token equal to any of them names a verb.
var (
	floorMethods = strings.Fields("QUERY DISCOVER INSPECT PROPOSE SUSPEND REVOKE DESCRIBE SUMMARIZE PLAN EXECUTE DELEGATE ESCALATE CONFIRM NOTIFY ACTIVATE DEACTIVATE REINSTATE DEPRECATE")
	catalogVerbs = strings.Fields("BOOK SCHEDULE RESERVE CANCEL ORDER PURCHASE TRANSFER FETCH SEARCH CREATE UPDATE DELETE LIST SUBMIT APPROVE REJECT SEND SUBSCRIBE UNSUBSCRIBE VERIFY VALIDATE TRANSLATE ANALYZE GENERATE MONITOR REPORT RENEW REFUND QUOTE RATE")
)

// grammar checks values against the texts' grammar; declared are the
// server's own methods (the configuration's methods).
type grammar struct{ methods map[string]bool }

func newGrammar(declared []string) grammar {
	g := grammar{methods: map[string]bool{}}
	for _, m := range append(append(append([]string{}, floorMethods...), catalogVerbs...), declared...) {
		g.methods[m] = true
	}
	return g
}

func (g grammar) method(m string) string {
	switch {
	case !methodRe.MatchString(m):
		return fmt.Sprintf("method %q is not 3 to 32 upper-case letters", m)
	case !g.methods[m]:
		return fmt.Sprintf("method %q is neither in the catalog nor declared by the server", m)
	}
	return ""
}

// path checks a path; a pattern may have {name} segments.
func (g grammar) path(p string, pattern bool) string {
	if strings.Contains(p, "#") {
		return fmt.Sprintf("path %q carries a fragment", p)
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("path %q does not start with /", p)
	}
	if p == "/" {
		return ""
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if pattern && templateRe.MatchString(seg) {
			continue
		}
		if !segmentRe.MatchString(seg) {
			return fmt.Sprintf("path %q has segment %q outside the grammar (lower-case resource names%s)", p, seg, map[bool]string{true: " or {name}"}[pattern])
		}
		for _, tok := range tokenCut.Split(seg, -1) {
			if g.methods[strings.ToUpper(tok)] {
				return fmt.Sprintf("path %q names the method %s: paths name resources, the method is the verb", p, strings.ToUpper(tok))
			}
		}
	}
	return ""
}

// target checks a request target: a path and an optional query.
func (g grammar) target(t string) string {
	p, _, _ := strings.Cut(t, "?")
	if strings.Contains(t, "#") {
		return fmt.Sprintf("target %q carries a fragment", t)
	}
	// QUERY /proposals/{proposal_id}: the id is the host's.
	if rest, ok := strings.CutPrefix(p, "/proposals/"); ok && rest != "" && !strings.Contains(rest, "/") {
		p = "/proposals"
	}
	return g.path(p, false)
}

func scopes(where string, v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		if s, _ := x.(string); !scopeRe.MatchString(s) {
			out = append(out, fmt.Sprintf("%s: scope token %v outside the grammar", where, x))
		}
	}
	return out
}

// pair checks "METHOD /path" of the PROPOSE policy.
func (g grammar) pair(where, v string) []string {
	m, p, ok := strings.Cut(v, " ")
	if !ok {
		return []string{fmt.Sprintf("%s: %q is not \"METHOD /path\"", where, v)}
	}
	var out []string
	for _, s := range []string{g.method(m), g.path(p, true)} {
		if s != "" {
			out = append(out, where+": "+s)
		}
	}
	return out
}

// sent checks what the steps sent.
func (g grammar) sent(x agtpsteps.Sent) []string {
	var out []string
	add := func(where, problem string) {
		if problem != "" {
			out = append(out, where+": "+problem)
		}
	}
	where := fmt.Sprintf("%s %s %s", x.Kind, x.Method, x.Target)
	add(where, g.method(x.Method))
	if x.Kind == "recipe" {
		add(where, g.path(x.Target, true))
		if v, _ := x.Params["version"].(string); v == "" {
			add(where, "a recipe version is a non-empty string")
		}
		return out
	}
	add(where, g.target(x.Target))
	if !agentIDRe.MatchString(x.AgentID) {
		add(where, fmt.Sprintf("Agent-ID %q is not 64 lowercase hex", x.AgentID))
	}
	if x.Claim != nil {
		for _, t := range strings.Split(*x.Claim, ",") {
			if t = strings.TrimSpace(t); !scopeRe.MatchString(t) {
				add(where, fmt.Sprintf("Authority-Scope token %q outside the grammar", t))
			}
		}
	}
	if x.Method == "PROPOSE" {
		ep, ok := x.Params["endpoint"].(map[string]any)
		if !ok {
			ep = x.Params // the legacy form
		}
		m, _ := ep["method"].(string)
		p, _ := ep["path"].(string)
		if !x.OnPurpose["method"] {
			add(where+" (proposed method)", g.method(m))
		}
		if !x.OnPurpose["path"] {
			add(where+" (proposed path)", g.path(p, true))
		}
		out = append(out, scopes(where+" (proposed authority_scope)", ep["authority_scope"])...)
	}
	return out
}

var (
	agentStatus = map[string]bool{"active": true, "suspended": true, "retired": true, "deprecated": true}
	verifyPaths = map[string]bool{"dns-anchored": true, "log-anchored": true, "hybrid": true, "org-asserted": true}
)

// section checks a configuration's agtp section: the server's methods, every
// identity document, capability, endpoint, recipe, passthrough and PROPOSE
// policy pair.
func section(raw []byte) []string {
	var sec struct {
		Methods      []string         `json:"methods"`
		Agents       []map[string]any `json:"agents"`
		Capabilities []map[string]any `json:"capabilities"`
		Endpoints    []map[string]any `json:"endpoints"`
		Recipes      []map[string]any `json:"recipes"`
		Passthroughs []map[string]any `json:"passthroughs"`
		Propose      struct {
			Refused []string `json:"refused"`
			Review  []string `json:"review"`
		} `json:"propose"`
	}
	if err := json.Unmarshal(raw, &sec); err != nil {
		return []string{"the section does not decode: " + err.Error()}
	}
	var out []string
	add := func(where, problem string) {
		if problem != "" {
			out = append(out, where+": "+problem)
		}
	}
	if err := schemas.ValidateJSON("agtp/host-config.json", raw); err != nil {
		add("section", err.Error())
	}
	for _, m := range sec.Methods {
		if !methodRe.MatchString(m) {
			add("methods", fmt.Sprintf("%q is not 3 to 32 upper-case letters", m))
		}
	}
	g := newGrammar(sec.Methods)
	for i, a := range sec.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		if id, _ := a["agent_id"].(string); !agentIDRe.MatchString(id) {
			add(where, fmt.Sprintf("agent_id %q is not 64 lowercase hex", id))
		}
		if t, _ := a["trust_tier"].(float64); t < 1 || t > 3 || t != float64(int(t)) {
			add(where, fmt.Sprintf("trust_tier %v is not 1, 2 or 3", a["trust_tier"]))
		}
		if s, _ := a["status"].(string); !agentStatus[s] {
			add(where, fmt.Sprintf("status %q unknown", s))
		}
		if v, _ := a["verification_path"].(string); !verifyPaths[v] {
			add(where, fmt.Sprintf("verification_path %q unknown", v))
		}
		out = append(out, scopes(where, a["scopes"])...)
	}
	caps := map[string]bool{}
	for i, c := range sec.Capabilities {
		name, _ := c["name"].(string)
		if name == "" || caps[name] {
			add(fmt.Sprintf("capabilities[%d]", i), "a capability needs a unique name")
		}
		caps[name] = true
		out = append(out, scopes("capability "+name, c["authority_scope"])...)
	}
	for _, e := range sec.Endpoints {
		m, _ := e["method"].(string)
		p, _ := e["path"].(string)
		where := "endpoint " + m + " " + p
		add(where, g.method(m))
		add(where, g.path(p, false))
		if c, _ := e["capability"].(string); !caps[c] {
			add(where, fmt.Sprintf("capability %q is not in the envelope", c))
		}
	}
	for _, r := range sec.Recipes {
		m, _ := r["method"].(string)
		p, _ := r["path"].(string)
		where := fmt.Sprintf("recipe %v", r["name"])
		add(where, g.method(m))
		add(where, g.path(p, true))
		if v, _ := r["version"].(string); v == "" {
			add(where, "a recipe version is a non-empty string")
		}
	}
	for _, pt := range sec.Passthroughs {
		m, _ := pt["method"].(string)
		p, _ := pt["path"].(string)
		where := "passthrough " + m + " " + p
		add(where, g.method(m))
		add(where, g.path(p, true))
		if c, _ := pt["capability"].(string); !caps[c] {
			add(where, fmt.Sprintf("capability %q is not in the envelope", c))
		}
	}
	for _, v := range sec.Propose.Refused {
		out = append(out, g.pair("propose.refused", v)...)
	}
	for _, v := range sec.Propose.Review {
		out = append(out, g.pair("propose.review", v)...)
	}
	return out
}

// TestTheGrammarCheckRefusesWhatTheTextsForbid shows the check below can
// fail: each value breaks one rule of the grammar.
func TestTheGrammarCheckRefusesWhatTheTextsForbid(t *testing.T) {
	g := newGrammar([]string{"PENCIL"})
	for _, bad := range []agtpsteps.Sent{
		{Kind: "request", Method: "QUOTE", Target: "/quote"},
		{Kind: "request", Method: "FETCH", Target: "/book-room"},
		{Kind: "request", Method: "FETCH", Target: "/Room"},
		{Kind: "request", Method: "FETCH", Target: "/room#x"},
		{Kind: "request", Method: "ZZBOGUS", Target: "/room"},
		{Kind: "request", Method: "fetch", Target: "/room"},
		{Kind: "request", Method: "PROPOSE", Target: "/", Params: map[string]any{"endpoint": map[string]any{"method": "BOOK", "path": "/book/x"}}},
		{Kind: "request", Method: "PROPOSE", Target: "/", Params: map[string]any{"name": "n", "method": "ZZBOGUS", "path": "/x"}},
		{Kind: "request", Method: "PROPOSE", Target: "/", Params: map[string]any{"endpoint": map[string]any{"method": "BOOK", "path": "/x", "authority_scope": []any{"Rooms:Write"}}}},
		{Kind: "recipe", Method: "BOOK", Target: "room/{id}", Params: map[string]any{"version": "1"}},
		{Kind: "recipe", Method: "BOOK", Target: "/room/{id}", Params: map[string]any{}},
	} {
		good := strings.Repeat("a", 64)
		if bad.AgentID == "" && bad.Kind == "request" {
			bad.AgentID = good
		}
		if len(g.sent(bad)) == 0 {
			t.Errorf("the check passes %+v", bad)
		}
	}
	if p := g.sent(agtpsteps.Sent{Kind: "request", Method: "QUOTE", Target: "/tariff"}); len(p) != 1 || !strings.Contains(p[0], "Agent-ID") {
		t.Errorf("a request with no Agent-ID and nothing else wrong must fail for the Agent-ID alone: %v", p)
	}
	withAgent := agtpsteps.Sent{Kind: "request", Method: "PENCIL", Target: "/room/x-1?id=7", AgentID: strings.Repeat("0", 64)}
	if p := g.sent(withAgent); len(p) != 0 {
		t.Errorf("a declared method and a resource path are grammatical: %v", p)
	}
	if len(section([]byte(`{"methods": ["PENCIL"], "endpoints": [{"method": "QUOTE", "path": "/quote", "tier": "B", "capability": "e"}], "capabilities": [{"name": "e", "effect": "echo"}]}`))) == 0 {
		t.Error("the section check passes QUOTE /quote")
	}
}

// TestFixturesObeyTheGrammar runs the AGTP corpus (the body-form runs,
// runsInEachForm) and checks every request the steps send (its method, target,
// Agent-ID, claim, and a proposal's method, path and scopes), every recipe
// they write through the seam, and every configuration section they ask a
// host to run with (methods, identity documents, capabilities, endpoints,
// recipes, passthroughs, PROPOSE policy) against the texts' grammar, except
// what a scenario says it sends malformed on purpose.
func TestFixturesObeyTheGrammar(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	runs := runsInEachForm(t)
	var cfgs []target.Config
	for _, form := range bodyForms {
		run := runs[form]
		if run.err != nil {
			t.Fatal(run.err)
		}
		for _, r := range run.res.Rows {
			if r.Result != verdict.ExecutedPass {
				t.Errorf("%s (%s body form): %s (%s)", r.ID, form, r.Result, r.Detail)
			}
		}
		cfgs = append(cfgs, run.configs...)
	}
	sent.mu.Lock()
	problems, requests, onPurpose := maps.Clone(sent.problems), sent.requests, sent.onPurpose
	sent.mu.Unlock()
	configs := 0
	for _, cfg := range cfgs {
		raw := cfg.Section("agtp")
		if len(raw) == 0 {
			continue
		}
		configs++
		for _, s := range section(raw) {
			problems["configuration "+cfg.Digest()+": "+s] = true
		}
	}
	if requests == 0 || configs == 0 || onPurpose == 0 {
		t.Fatalf("checked %d requests (%d said to be malformed on purpose) and %d configurations: the run did not exercise the check", requests, onPurpose, configs)
	}
	var list []string
	for s := range problems {
		list = append(list, s)
	}
	sort.Strings(list)
	for _, s := range list {
		t.Error(s)
	}
	t.Logf("checked %d requests and seam edits (%d from scenarios sending a malformed value on purpose) and %d configurations", requests, onPurpose, configs)
}

// sendLog gathers what the grammar finds in every request the AGTP steps
// send (agtpsteps.SendHook) while the body-form runs are made.
type sendLog struct {
	mu                  sync.Mutex
	problems            map[string]bool
	requests, onPurpose int
}

// sentGrammar checks the suite's requests against the catalog and the
// methods every configuration declares (PENCIL); a method only some
// configurations declared would be caught by the section check.
var sentGrammar = newGrammar([]string{"PENCIL"})

func (l *sendLog) record(x agtpsteps.Sent) {
	p := sentGrammar.sent(x)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if len(x.OnPurpose) > 0 {
		l.onPurpose++
	}
	for _, s := range p {
		l.problems[s] = true
	}
}
