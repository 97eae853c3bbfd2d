package contractrefine

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"lukechampine.com/blake3"
)

// Mode is the resolved runtime.contract_refine.mode.
type Mode string

// The three positions of the mode ladder.
const (
	ModeDisabled Mode = "disabled"
	ModeAdvisory Mode = "advisory"
	ModeEnforce  Mode = "enforce"
)

// ResolveMode applies the spec's resolution rules to a raw configured value.
// ok is false when raw was non-empty and unrecognized: the result is then
// disabled, so that a typo never opens the HTTP surface.
func ResolveMode(raw string) (mode Mode, ok bool) {
	switch raw {
	case "":
		return ModeAdvisory, true
	case string(ModeDisabled), string(ModeAdvisory), string(ModeEnforce):
		return Mode(raw), true
	default:
		return ModeDisabled, false
	}
}

// Config is the host's configuration. Its zero value gives the spec defaults.
// Slices distinguish absent (nil: the default) from explicitly empty ([]).
type Config struct {
	// Mode is the raw runtime.contract_refine.mode; see ResolveMode.
	Mode string `json:"mode,omitempty"`
	// Verifier describes the wired ContractVerifier.
	Verifier VerifierConfig `json:"verifier"`
	// Emitter is "" or "wal" (the fsync'd WAL) or "none" (no telemetry emitter).
	Emitter string `json:"emitter,omitempty"`
	// PolicyRef names the active policy bundle; default "refhost-policy/1.0.0".
	PolicyRef string `json:"policy_ref,omitempty"`
	// LockFingerprint is the server's live lock fingerprint, stamped on every
	// decision; default "blake3:" + hex(blake3(PolicyRef)).
	LockFingerprint string `json:"lock_fingerprint,omitempty"`
	// MaxRepairAttempts bounds repair_required outcomes per (session, plan
	// hash); nil means 2, and 0 allows no repair at all.
	MaxRepairAttempts *int `json:"max_repair_attempts,omitempty"`
	// EligibilityTTL is a Go duration: how long a pass binding stays valid.
	// Default "5m".
	EligibilityTTL string `json:"eligibility_ttl,omitempty"`
	// Policy is the policy bundle consulted by /v1/tool.
	Policy PolicyConfig `json:"policy"`
	// Tools configures the tools that act outside the host.
	Tools ToolsConfig `json:"tools"`
	// Faults is a seam-only knob for fault injection; operators leave it unset.
	Faults FaultConfig `json:"faults"`
	// Agents tunes the host per actor.agent_id: what a request naming one
	// of these agents gets instead of the host-wide value. An operator
	// gives a batch agent a shorter binding or a smaller repair budget.
	Agents map[string]AgentConfig `json:"agents,omitempty"`
}

// AgentConfig overrides host-wide settings for the requests of one agent
// (actor.agent_id). Unset members take the host-wide value.
type AgentConfig struct {
	// MaxRepairAttempts bounds the repair_required outcomes of a (session,
	// plan hash) pair whose requests name the agent.
	MaxRepairAttempts *int `json:"max_repair_attempts,omitempty"`
	// EligibilityTTL is how long the agent's passes bind (a Go duration).
	EligibilityTTL string `json:"eligibility_ttl,omitempty"`
	// Faults injects faults into the agent's decisions only: wal_emit
	// fails the append of its autonomy.preflight frames, wal_read fails
	// every read of them. Seam-only, like the host-wide faults.
	Faults FaultConfig `json:"faults"`
}

// agentSettings is AgentConfig after defaults and validation.
type agentSettings struct {
	maxRepairAttempts int
	ttl               time.Duration
	walFail           bool
	walReadFail       bool
}

// VerifierConfig configures the built-in ContractVerifier.
type VerifierConfig struct {
	// Wired is nil or true for a wired verifier; false leaves none wired.
	Wired *bool `json:"wired,omitempty"`
	// LockFingerprint is the value the verifier is constructed with. The host
	// never lets it reach a decision: the live fingerprint overrides it.
	LockFingerprint   string   `json:"lock_fingerprint,omitempty"`
	AllowedZones      []string `json:"allowed_zones"`
	WriteCapabilities []string `json:"write_capabilities"`
}

// PolicyConfig is the policy bundle applied at the /v1/tool policy stage.
type PolicyConfig struct {
	// AllowedTools defaults to ["tool.echo","tool.write"].
	AllowedTools []string `json:"allowed_tools"`
	// RequiresPreflight lists tool kinds that must present a preflight binding.
	RequiresPreflight []string `json:"requires_preflight"`
}

// ToolsConfig configures tools whose effect is outside the host.
type ToolsConfig struct {
	// DeliverURL is where tool.deliver posts the params of each call it
	// runs. Without it tool.deliver is not offered.
	DeliverURL string `json:"deliver_url,omitempty"`
}

// FaultConfig injects faults. Only the conformance suite should set it.
type FaultConfig struct {
	// WALEmit "fail" makes every WAL append fail (the 500 path).
	WALEmit string `json:"wal_emit,omitempty"`
	// WALRead "fail" makes every read of a stored decision fail (GET's 500 path).
	WALRead string `json:"wal_read,omitempty"`
}

// Defaults applied when the corresponding field is unset.
const (
	DefaultPolicyRef         = "refhost-policy/1.0.0"
	DefaultMaxRepairAttempts = 2
	DefaultEligibilityTTL    = 5 * time.Minute
)

var (
	defaultAllowedZones      = []string{"default", "lab", "edge"}
	defaultWriteCapabilities = []string{"tool.write", "tool.deliver"}
	defaultAllowedTools      = []string{"tool.echo", "tool.write"}
)

// Fingerprint returns the "blake3:<hex>" fingerprint of s.
func Fingerprint(s string) string {
	sum := blake3.Sum256([]byte(s))
	return "blake3:" + hex.EncodeToString(sum[:])
}

// settings is Config after defaults and validation.
type settings struct {
	mode              Mode
	verifierWired     bool
	verifier          verifier
	emitterWired      bool
	policyRef         string
	lockFingerprint   string
	maxRepairAttempts int
	ttl               time.Duration
	allowedTools      map[string]bool
	requiresPreflight map[string]bool
	deliverURL        string
	walFail           bool
	walReadFail       bool
	agents            map[string]agentSettings
}

// forAgent is what applies to a request naming agent (actor.agent_id).
func (s settings) forAgent(agent string) agentSettings {
	if a, ok := s.agents[agent]; ok && agent != "" {
		return a
	}
	return agentSettings{maxRepairAttempts: s.maxRepairAttempts, ttl: s.ttl, walFail: s.walFail, walReadFail: s.walReadFail}
}

// readFailAgents are the agents whose stored decisions cannot be read.
func (s settings) readFailAgents() map[string]bool {
	out := map[string]bool{}
	for id, a := range s.agents {
		if a.walReadFail && !s.walReadFail {
			out[id] = true
		}
	}
	return out
}

func resolve(cfg Config, log *slog.Logger) (settings, error) {
	var s settings
	mode, ok := ResolveMode(cfg.Mode)
	if !ok {
		// The bad value goes into both message and attrs unaltered so an
		// operator grepping logs for what they typed finds it.
		log.Warn("unrecognized runtime.contract_refine.mode \""+cfg.Mode+"\"; falling back to disabled",
			slog.String("mode", cfg.Mode), slog.String("resolved", string(ModeDisabled)))
	}
	s.mode = mode

	s.verifierWired = cfg.Verifier.Wired == nil || *cfg.Verifier.Wired
	s.verifier = verifier{
		lockFingerprint:   orDefault(cfg.Verifier.LockFingerprint, Fingerprint("verifier-default")),
		allowedZones:      toSet(orDefaultSlice(cfg.Verifier.AllowedZones, defaultAllowedZones)),
		writeCapabilities: toSet(orDefaultSlice(cfg.Verifier.WriteCapabilities, defaultWriteCapabilities)),
	}

	switch cfg.Emitter {
	case "", "wal":
		s.emitterWired = true
	case "none":
	default:
		return s, fmt.Errorf("contractrefine: emitter %q: want \"wal\" or \"none\"", cfg.Emitter)
	}

	s.policyRef = orDefault(cfg.PolicyRef, DefaultPolicyRef)
	s.verifier.policyRef = s.policyRef
	s.lockFingerprint = orDefault(cfg.LockFingerprint, Fingerprint(s.policyRef))

	s.maxRepairAttempts = DefaultMaxRepairAttempts
	if cfg.MaxRepairAttempts != nil {
		if *cfg.MaxRepairAttempts < 0 {
			return s, fmt.Errorf("contractrefine: max_repair_attempts %d is negative", *cfg.MaxRepairAttempts)
		}
		s.maxRepairAttempts = *cfg.MaxRepairAttempts
	}

	s.ttl = DefaultEligibilityTTL
	if cfg.EligibilityTTL != "" {
		d, err := time.ParseDuration(cfg.EligibilityTTL)
		if err != nil {
			return s, fmt.Errorf("contractrefine: eligibility_ttl: %w", err)
		}
		if d <= 0 {
			return s, fmt.Errorf("contractrefine: eligibility_ttl %s must be positive", d)
		}
		s.ttl = d
	}

	if cfg.Tools.DeliverURL != "" {
		u, err := url.Parse(cfg.Tools.DeliverURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, fmt.Errorf("contractrefine: tools.deliver_url %q is not an http(s) URL", cfg.Tools.DeliverURL)
		}
		s.deliverURL = cfg.Tools.DeliverURL
	}
	defTools := defaultAllowedTools
	if s.deliverURL != "" {
		defTools = append(append([]string(nil), defTools...), "tool.deliver")
	}
	tools := orDefaultSlice(cfg.Policy.AllowedTools, defTools)
	for _, t := range tools {
		// Allowing a tool the host cannot run would turn a policy allow
		// into a runtime failure; refuse the bundle up front instead.
		if _, ok := executors[t]; !ok || (t == "tool.deliver" && s.deliverURL == "") {
			return s, fmt.Errorf("contractrefine: policy.allowed_tools names %q, which this host does not implement (tool.deliver needs tools.deliver_url)", t)
		}
	}
	s.allowedTools = toSet(tools)
	s.requiresPreflight = toSet(cfg.Policy.RequiresPreflight)

	var err error
	if s.walFail, s.walReadFail, err = resolveFaults("faults", cfg.Faults); err != nil {
		return s, err
	}
	for id, a := range cfg.Agents {
		if id == "" {
			return s, fmt.Errorf("contractrefine: agents: an agent id is empty")
		}
		as := s.forAgent("")
		if a.MaxRepairAttempts != nil {
			if *a.MaxRepairAttempts < 0 {
				return s, fmt.Errorf("contractrefine: agents.%s.max_repair_attempts %d is negative", id, *a.MaxRepairAttempts)
			}
			as.maxRepairAttempts = *a.MaxRepairAttempts
		}
		if a.EligibilityTTL != "" {
			d, err := time.ParseDuration(a.EligibilityTTL)
			if err != nil {
				return s, fmt.Errorf("contractrefine: agents.%s.eligibility_ttl: %w", id, err)
			}
			if d <= 0 {
				return s, fmt.Errorf("contractrefine: agents.%s.eligibility_ttl %s must be positive", id, d)
			}
			as.ttl = d
		}
		emit, read, err := resolveFaults("agents."+id+".faults", a.Faults)
		if err != nil {
			return s, err
		}
		as.walFail, as.walReadFail = as.walFail || emit, as.walReadFail || read
		if s.agents == nil {
			s.agents = map[string]agentSettings{}
		}
		s.agents[id] = as
	}
	return s, nil
}

func resolveFaults(where string, f FaultConfig) (emit, read bool, err error) {
	switch f.WALEmit {
	case "":
	case "fail":
		emit = true
	default:
		return false, false, fmt.Errorf("contractrefine: %s.wal_emit %q: want \"fail\" or unset", where, f.WALEmit)
	}
	switch f.WALRead {
	case "":
	case "fail":
		read = true
	default:
		return false, false, fmt.Errorf("contractrefine: %s.wal_read %q: want \"fail\" or unset", where, f.WALRead)
	}
	return emit, read, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefaultSlice(v, def []string) []string {
	if v == nil {
		return def
	}
	return v
}

func toSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}
