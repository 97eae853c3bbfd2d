// Package agtp is parley's reference AGTP/1.0 host with the Runtime Contract
// Negotiation Substrate (RCNS): agent identity documents from configuration,
// Tier A/B endpoints bound to registered primitives, versioned recipes that
// compose primitives into Tier C contracts behind the four-lock gate, and
// contracts kept in SQLite so that they survive a restart.
package agtp

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Config is the host's configuration. The zero value is a host with no
// agents and RCNS at the spec's defaults (off, confirm-first, min tier 1,
// 10 gate evaluations a minute, grandfather). A zero numeric knob means its
// default.
type Config struct {
	ServerID   string      `toml:"server_id" json:"server_id,omitempty"`
	Policies   Policies    `toml:"policies" json:"policies"`
	Agents     []Agent     `toml:"agents" json:"agents,omitempty"`
	Primitives []Primitive `toml:"primitives" json:"primitives,omitempty"`
	Endpoints  []Endpoint  `toml:"endpoints" json:"endpoints,omitempty"`
}

// Policies is the operator policy block.
type Policies struct {
	// Methods are custom methods accepted beyond the built-in catalog.
	Methods      []string      `toml:"methods" json:"methods,omitempty"`
	RCNS         RCNS          `toml:"rcns" json:"rcns"`
	Recipes      []Recipe      `toml:"recipes" json:"recipes,omitempty"`
	Passthroughs []Passthrough `toml:"passthroughs" json:"passthroughs,omitempty"`
	// Propose is the operator's policy for explicit PROPOSE negotiation.
	Propose Propose `toml:"propose" json:"propose"`
	// IdempotencyTTLSeconds is how long a cached response is replayed
	// (default 86400).
	IdempotencyTTLSeconds int `toml:"idempotency_ttl_seconds" json:"idempotency_ttl_seconds,omitempty"`
	// TombstoneSeconds is how long a released, revoked or expired contract
	// keeps answering 464 contract-revoked before it is forgotten (default
	// 86400).
	TombstoneSeconds int `toml:"tombstone_seconds" json:"tombstone_seconds,omitempty"`
}

// RCNS holds the knobs of the spec's RCNS configuration table.
type RCNS struct {
	Enabled            bool   `toml:"enabled" json:"enabled"`
	Mode               string `toml:"mode" json:"mode,omitempty"`                                   // confirm-first (default) | optimistic
	MinTrustTier       int    `toml:"min_trust_tier" json:"min_trust_tier,omitempty"`               // 1..3, default 1
	RateLimitPerMinute int    `toml:"rate_limit_per_minute" json:"rate_limit_per_minute,omitempty"` // default 10
	ContractTTLSeconds int    `toml:"contract_ttl_seconds" json:"contract_ttl_seconds,omitempty"`   // default 3600
	OnPolicyChange     string `toml:"on_policy_change" json:"on_policy_change,omitempty"`           // grandfather (default) | invalidate
}

// Propose is the PROPOSE policy: the last evaluation step (policy
// acceptance) and what happens to persistence requests. Pairs are written
// "METHOD /path" where a {x} segment of the path matches any one segment of
// the proposed path.
type Propose struct {
	// AllowPersistent honours persistent: true (the endpoint joins the
	// regular catalog); otherwise the request is refused and the synthesis
	// stays session-scoped.
	AllowPersistent bool `toml:"allow_persistent" json:"allow_persistent,omitempty"`
	// Refused pairs are answered 463 policy-refused.
	Refused []string `toml:"refused" json:"refused,omitempty"`
	// Review pairs pass every automatic check and then wait for an operator
	// decision (CONFIRM target_id=<proposal_id>): PROPOSE answers 261 and
	// the agent polls QUERY /proposals/{proposal_id}.
	Review []string `toml:"review" json:"review,omitempty"`
	// ReviewTimeoutSeconds refuses (463 policy-refused) a proposal left
	// undecided this long (default 86400).
	ReviewTimeoutSeconds int `toml:"review_timeout_seconds" json:"review_timeout_seconds,omitempty"`
}

// pairRule is a parsed "METHOD /path" policy entry.
type pairRule struct{ method, path string }

func parsePairRules(field string, catalog map[string]bool, in []string) ([]pairRule, error) {
	var out []pairRule
	for _, s := range in {
		m, p, ok := strings.Cut(strings.TrimSpace(s), " ")
		p = strings.TrimSpace(p)
		if !ok || !catalog[m] || !pathRe.MatchString(p) {
			return nil, fmt.Errorf("agtp config: policies.propose.%s entry %q is not \"METHOD /path\" with a catalog method", field, s)
		}
		out = append(out, pairRule{m, p})
	}
	return out, nil
}

func matchRules(rules []pairRule, method, path string) bool {
	for _, r := range rules {
		if r.method == method && pathMatches(r.path, path) {
			return true
		}
	}
	return false
}

// Agent is an identity document the host resolves an Agent-ID to.
type Agent struct {
	AgentID          string   `toml:"agent_id" json:"agent_id"`
	Name             string   `toml:"name" json:"name,omitempty"`
	Principal        string   `toml:"principal" json:"principal,omitempty"`
	Status           string   `toml:"status" json:"status,omitempty"`         // active (default), suspended, retired, deprecated
	TrustTier        int      `toml:"trust_tier" json:"trust_tier,omitempty"` // 1 most trusted .. 3; 0 means 2
	VerificationPath string   `toml:"verification_path" json:"verification_path,omitempty"`
	Methods          []string `toml:"methods" json:"methods,omitempty"` // empty: any catalog method
	Scopes           []string `toml:"scopes" json:"scopes,omitempty"`
}

// Primitive is a registered building block: a built-in kind bound to a
// collection, with the authority it requires.
type Primitive struct {
	Name       string   `toml:"name" json:"name"`
	Kind       string   `toml:"kind" json:"kind"` // echo, record.put, record.get, record.list, record.delete, counter.incr, counter.get
	Collection string   `toml:"collection" json:"collection,omitempty"`
	KeyParam   string   `toml:"key_param" json:"key_param,omitempty"` // default "id"
	Scopes     []string `toml:"scopes" json:"scopes,omitempty"`
}

// Endpoint is a Tier A or Tier B (method, path) bound to one primitive.
type Endpoint struct {
	Method        string `toml:"method" json:"method"`
	Path          string `toml:"path" json:"path"`
	Tier          string `toml:"tier" json:"tier,omitempty"` // A or B (default B)
	Primitive     string `toml:"primitive" json:"primitive"`
	Description   string `toml:"description" json:"description,omitempty"`
	SuccessStatus int    `toml:"success_status" json:"success_status,omitempty"`
}

// Recipe composes primitives into a synthesizable endpoint for the (method,
// path) pairs it matches. Path segments written {name} match any segment.
type Recipe struct {
	Name          string   `toml:"name" json:"name"`
	Version       string   `toml:"version" json:"version"`
	Method        string   `toml:"method" json:"method"`
	Path          string   `toml:"path" json:"path"`
	Steps         []string `toml:"steps" json:"steps"`
	Description   string   `toml:"description" json:"description,omitempty"`
	SuccessStatus int      `toml:"success_status" json:"success_status,omitempty"`
}

// Passthrough synthesizes a contract straight onto one primitive, without a
// recipe (so without lineage; the stale sweep skips these).
type Passthrough struct {
	Method        string `toml:"method" json:"method"`
	Path          string `toml:"path" json:"path"`
	Primitive     string `toml:"primitive" json:"primitive"`
	SuccessStatus int    `toml:"success_status" json:"success_status,omitempty"`
}

const (
	ModeConfirmFirst = "confirm-first"
	ModeOptimistic   = "optimistic"
	SweepGrandfather = "grandfather"
	SweepInvalidate  = "invalidate"
)

// ParseTOML decodes the TOML form of the configuration. Unknown keys are an
// error so that a misspelt knob never silently falls back to its default.
func ParseTOML(b []byte) (Config, error) {
	var c Config
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("agtp config: %w", err)
	}
	if _, err := c.normalized(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var (
	agentIDRe   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	scopeRe     = regexp.MustCompile(`^(\*|[a-z0-9_-]+)(:(\*|[a-z0-9_-]+))*$`)
	methodRe    = regexp.MustCompile(`^[A-Z]{3,32}$`)
	pathRe      = regexp.MustCompile(`^(/([a-z0-9_.~-]+|\{[a-z0-9_]+\}))+$|^/$`)
	primKinds   = map[string]bool{"echo": true, "record.put": true, "record.get": true, "record.list": true, "record.delete": true, "counter.incr": true, "counter.get": true}
	agentStatus = map[string]bool{"active": true, "suspended": true, "retired": true, "deprecated": true}
)

// normalized validates c and returns a copy with every default applied.
func (c Config) normalized() (Config, error) {
	n := c
	if n.ServerID == "" {
		n.ServerID = "parley-refhost"
	}
	r := &n.Policies.RCNS
	if r.Mode == "" {
		r.Mode = ModeConfirmFirst
	}
	if r.Mode != ModeConfirmFirst && r.Mode != ModeOptimistic {
		return c, fmt.Errorf("agtp config: policies.rcns.mode %q is not confirm-first or optimistic", r.Mode)
	}
	if r.MinTrustTier == 0 {
		r.MinTrustTier = 1
	}
	if r.MinTrustTier < 1 || r.MinTrustTier > 3 {
		return c, fmt.Errorf("agtp config: policies.rcns.min_trust_tier %d is not 1, 2 or 3", r.MinTrustTier)
	}
	if r.RateLimitPerMinute == 0 {
		r.RateLimitPerMinute = 10
	}
	if r.RateLimitPerMinute < 0 {
		return c, fmt.Errorf("agtp config: policies.rcns.rate_limit_per_minute must be positive")
	}
	if r.ContractTTLSeconds == 0 {
		r.ContractTTLSeconds = 3600
	}
	if r.ContractTTLSeconds < 0 {
		return c, fmt.Errorf("agtp config: policies.rcns.contract_ttl_seconds must be positive")
	}
	if r.OnPolicyChange == "" {
		r.OnPolicyChange = SweepGrandfather
	}
	if r.OnPolicyChange != SweepGrandfather && r.OnPolicyChange != SweepInvalidate {
		return c, fmt.Errorf("agtp config: policies.rcns.on_policy_change %q is not grandfather or invalidate", r.OnPolicyChange)
	}
	if n.Policies.IdempotencyTTLSeconds <= 0 {
		n.Policies.IdempotencyTTLSeconds = 86400
	}
	if n.Policies.TombstoneSeconds <= 0 {
		n.Policies.TombstoneSeconds = 86400
	}
	if n.Policies.Propose.ReviewTimeoutSeconds <= 0 {
		n.Policies.Propose.ReviewTimeoutSeconds = 86400
	}
	for _, m := range n.Policies.Methods {
		if !methodRe.MatchString(m) {
			return c, fmt.Errorf("agtp config: policies.methods entry %q is not 3-32 upper-case letters", m)
		}
	}
	catalog := n.catalog()
	if _, err := parsePairRules("refused", catalog, n.Policies.Propose.Refused); err != nil {
		return c, err
	}
	if _, err := parsePairRules("review", catalog, n.Policies.Propose.Review); err != nil {
		return c, err
	}

	n.Agents = append([]Agent(nil), c.Agents...)
	seen := map[string]bool{}
	for i := range n.Agents {
		a := &n.Agents[i]
		if !agentIDRe.MatchString(a.AgentID) {
			return c, fmt.Errorf("agtp config: agents[%d].agent_id must be 64 lowercase hex characters", i)
		}
		if seen[a.AgentID] {
			return c, fmt.Errorf("agtp config: agent %s declared twice", a.AgentID)
		}
		seen[a.AgentID] = true
		if a.Status == "" {
			a.Status = "active"
		}
		if !agentStatus[a.Status] {
			return c, fmt.Errorf("agtp config: agent %s status %q unknown", a.AgentID, a.Status)
		}
		if a.TrustTier == 0 {
			a.TrustTier = 2 // the wire notes' fallback when nothing states a tier
		}
		if a.TrustTier < 1 || a.TrustTier > 3 {
			return c, fmt.Errorf("agtp config: agent %s trust_tier %d is not 1, 2 or 3", a.AgentID, a.TrustTier)
		}
		if err := checkScopes(a.Scopes); err != nil {
			return c, fmt.Errorf("agtp config: agent %s: %w", a.AgentID, err)
		}
		for _, m := range a.Methods {
			if !catalog[m] {
				return c, fmt.Errorf("agtp config: agent %s method %q is not in the catalog or policies.methods", a.AgentID, m)
			}
		}
	}
	prims := map[string]bool{}
	n.Primitives = append([]Primitive(nil), c.Primitives...)
	for i := range n.Primitives {
		p := &n.Primitives[i]
		if p.Name == "" || prims[p.Name] {
			return c, fmt.Errorf("agtp config: primitives[%d] needs a unique name", i)
		}
		prims[p.Name] = true
		if !primKinds[p.Kind] {
			return c, fmt.Errorf("agtp config: primitive %s kind %q unknown", p.Name, p.Kind)
		}
		if p.Collection == "" {
			p.Collection = p.Name
		}
		if p.KeyParam == "" {
			p.KeyParam = "id"
		}
		if err := checkScopes(p.Scopes); err != nil {
			return c, fmt.Errorf("agtp config: primitive %s: %w", p.Name, err)
		}
	}
	pair := map[string]bool{}
	n.Endpoints = append([]Endpoint(nil), c.Endpoints...)
	for i := range n.Endpoints {
		e := &n.Endpoints[i]
		if err := checkPair(catalog, e.Method, e.Path); err != nil {
			return c, fmt.Errorf("agtp config: endpoints[%d]: %w", i, err)
		}
		if strings.Contains(e.Path, "{") {
			return c, fmt.Errorf("agtp config: endpoints[%d]: endpoint paths are literal", i)
		}
		if pair[e.Method+" "+e.Path] {
			return c, fmt.Errorf("agtp config: endpoint %s %s declared twice", e.Method, e.Path)
		}
		pair[e.Method+" "+e.Path] = true
		if e.Tier == "" {
			e.Tier = "B"
		}
		if e.Tier != "A" && e.Tier != "B" {
			return c, fmt.Errorf("agtp config: endpoint %s %s tier %q is not A or B", e.Method, e.Path, e.Tier)
		}
		if !prims[e.Primitive] {
			return c, fmt.Errorf("agtp config: endpoint %s %s names unknown primitive %q", e.Method, e.Path, e.Primitive)
		}
		if e.SuccessStatus == 0 {
			e.SuccessStatus = 200
		}
	}
	names := map[string]bool{}
	n.Policies.Recipes = append([]Recipe(nil), c.Policies.Recipes...)
	for i := range n.Policies.Recipes {
		rc := &n.Policies.Recipes[i]
		if err := validateRecipe(catalog, rc); err != nil {
			return c, fmt.Errorf("agtp config: policies.recipes[%d]: %w", i, err)
		}
		if names[rc.Name] {
			return c, fmt.Errorf("agtp config: recipe %q declared twice", rc.Name)
		}
		names[rc.Name] = true
		// A step naming a primitive that is not registered is allowed: an
		// operator may keep a recipe whose primitive was withdrawn. Its
		// syntheses fail (464 synthesis-error at the gate, 463
		// composition-impossible for PROPOSE); Open warns about it.
	}
	n.Policies.Passthroughs = append([]Passthrough(nil), c.Policies.Passthroughs...)
	for i := range n.Policies.Passthroughs {
		p := &n.Policies.Passthroughs[i]
		if err := checkPair(catalog, p.Method, p.Path); err != nil {
			return c, fmt.Errorf("agtp config: policies.passthroughs[%d]: %w", i, err)
		}
		if !prims[p.Primitive] {
			return c, fmt.Errorf("agtp config: passthrough %s %s names unknown primitive %q", p.Method, p.Path, p.Primitive)
		}
		if p.SuccessStatus == 0 {
			p.SuccessStatus = 200
		}
	}
	return n, nil
}

func validateRecipe(catalog map[string]bool, rc *Recipe) error {
	if rc.Name == "" || rc.Version == "" {
		return fmt.Errorf("a recipe needs a name and a version")
	}
	if err := checkPair(catalog, rc.Method, rc.Path); err != nil {
		return err
	}
	if len(rc.Steps) == 0 {
		return fmt.Errorf("recipe %s has no steps", rc.Name)
	}
	if rc.SuccessStatus == 0 {
		rc.SuccessStatus = 200
	}
	if rc.SuccessStatus < 200 || rc.SuccessStatus > 299 {
		return fmt.Errorf("recipe %s success_status must be 2xx", rc.Name)
	}
	return nil
}

func checkPair(catalog map[string]bool, method, path string) error {
	if !catalog[method] {
		return fmt.Errorf("method %q is not in the catalog or policies.methods", method)
	}
	if floorMethods[method] {
		return fmt.Errorf("method %s is a floor method served by the host itself", method)
	}
	if !pathRe.MatchString(path) {
		return fmt.Errorf("path %q is not /segment[/segment...] of lowercase segments or {name}", path)
	}
	return nil
}

func checkScopes(s []string) error {
	for _, t := range s {
		if !scopeRe.MatchString(t) {
			return fmt.Errorf("scope token %q is not segments of [a-z0-9_-]+ or * joined by ':'", t)
		}
	}
	return nil
}

// floorMethods are the eighteen methods every AGTP server serves itself.
var floorMethods = setOf("QUERY", "DISCOVER", "INSPECT", "PROPOSE", "SUSPEND", "REVOKE", "DESCRIBE",
	"SUMMARIZE", "PLAN", "EXECUTE", "DELEGATE", "ESCALATE", "CONFIRM", "NOTIFY", "ACTIVATE",
	"DEACTIVATE", "REINSTATE", "DEPRECATE")

// catalogVerbs is the host's built-in subset of the approved method catalog
// beyond the floor; operators add more with policies.methods.
var catalogVerbs = setOf("BOOK", "SCHEDULE", "RESERVE", "CANCEL", "ORDER", "PURCHASE", "TRANSFER",
	"FETCH", "SEARCH", "CREATE", "UPDATE", "DELETE", "LIST", "SUBMIT", "APPROVE", "REJECT", "SEND",
	"SUBSCRIBE", "UNSUBSCRIBE", "VERIFY", "VALIDATE", "TRANSLATE", "ANALYZE", "GENERATE", "MONITOR",
	"REPORT", "RENEW", "REFUND", "QUOTE", "RATE")

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}

func (c Config) catalog() map[string]bool {
	m := map[string]bool{}
	for k := range floorMethods {
		m[k] = true
	}
	for k := range catalogVerbs {
		m[k] = true
	}
	for _, k := range c.Policies.Methods {
		m[k] = true
	}
	return m
}
