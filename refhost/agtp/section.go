package agtp

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Section is the AGTP section of parley's host configuration document
// (schemas/agtp/host-config.json, docs/hosts/agtp.md): what the RCNS text
// talks about, in its terms, and no host's implementation vocabulary. The
// reference host translates it into its own Config (ParseSection); another
// host's adapter translates it into that host's format.
type Section struct {
	ServerID string `json:"server_id,omitempty"`
	// Methods are custom methods the server declares beyond the approved
	// method catalog (the text's policies.methods).
	Methods []string `json:"methods,omitempty"`
	// RCNS holds the knobs of the spec's RCNS configuration table that the
	// scenario sets; a knob left out takes the server's default.
	RCNS SectionRCNS `json:"rcns"`
	// Propose is the operator's PROPOSE policy (evaluation step 7 and
	// persistence).
	Propose SectionPropose `json:"propose"`
	// Agents are the identity documents the server resolves Agent-IDs to.
	Agents []SectionAgent `json:"agents,omitempty"`
	// Capabilities are the capability envelope: the registered primitives
	// synthesis composes from, each with the authority it needs and what it
	// does.
	Capabilities []SectionCapability `json:"capabilities,omitempty"`
	// Endpoints are the registered Tier A and Tier B (method, path) pairs.
	Endpoints []SectionEndpoint `json:"endpoints,omitempty"`
	// Recipes compose capabilities into synthesizable endpoints.
	Recipes []SectionRecipe `json:"recipes,omitempty"`
	// Passthroughs synthesize straight onto one capability, without a
	// recipe (so without lineage).
	Passthroughs []SectionPassthrough `json:"passthroughs,omitempty"`
	// TLS is the certificate and key to serve TLS 1.3 with; without it the
	// server speaks plaintext to loopback peers only.
	TLS *SectionTLS `json:"tls,omitempty"`
	// PlaintextListener asks a server that serves TLS for a second AGTP
	// listener beside it, speaking plaintext on loopback to loopback peers
	// only (the ready line's agtp_plaintext). Without tls it means nothing
	// (the one listener is plaintext already) and is refused.
	PlaintextListener bool `json:"plaintext_listener,omitempty"`
}

// SectionRCNS are the spec's RCNS knobs; a zero value is a knob left unset.
type SectionRCNS struct {
	Enabled            *bool  `json:"enabled,omitempty"`
	Mode               string `json:"mode,omitempty"`
	MinTrustTier       int    `json:"min_trust_tier,omitempty"`
	RateLimitPerMinute int    `json:"rate_limit_per_minute,omitempty"`
	ContractTTLSeconds int    `json:"contract_ttl_seconds,omitempty"`
	OnPolicyChange     string `json:"on_policy_change,omitempty"`
}

// SectionPropose is the PROPOSE policy: pairs are "METHOD /path" where a
// {x} segment matches any one segment.
type SectionPropose struct {
	AllowPersistent bool     `json:"allow_persistent,omitempty"`
	Refused         []string `json:"refused,omitempty"`
	Review          []string `json:"review,omitempty"`
}

// SectionAgent is an identity document (agtp-wire-notes.md 9).
type SectionAgent struct {
	AgentID          string   `json:"agent_id"`
	Name             string   `json:"name,omitempty"`
	Principal        string   `json:"principal,omitempty"`
	Status           string   `json:"status,omitempty"`
	TrustTier        int      `json:"trust_tier,omitempty"`
	VerificationPath string   `json:"verification_path,omitempty"`
	Methods          []string `json:"methods,omitempty"`
	Scopes           []string `json:"scopes,omitempty"`
}

// SectionCapability is one registered primitive: what a request that
// invokes it does, over which records, and the scopes it needs.
type SectionCapability struct {
	Name string `json:"name"`
	// Effect is one of store, fetch, list, count, echo.
	Effect string `json:"effect"`
	// Records names the records it stores, fetches or lists (the counter
	// it counts); default: the capability's name.
	Records string `json:"records,omitempty"`
	// Key is the request parameter naming one record (default "id").
	Key            string   `json:"key,omitempty"`
	AuthorityScope []string `json:"authority_scope,omitempty"`
}

// SectionEndpoint is a registered Tier A or B endpoint served by one
// capability.
type SectionEndpoint struct {
	Method        string `json:"method"`
	Path          string `json:"path"`
	Tier          string `json:"tier"`
	Capability    string `json:"capability"`
	SuccessStatus int    `json:"success_status,omitempty"`
}

// SectionRecipe composes capabilities, in order, for the pairs its method
// and path pattern match; its version is opaque.
type SectionRecipe struct {
	Name          string   `json:"name"`
	Version       string   `json:"version"`
	Method        string   `json:"method"`
	Path          string   `json:"path"`
	ComposedOf    []string `json:"composed_of"`
	SuccessStatus int      `json:"success_status,omitempty"`
}

// SectionPassthrough synthesizes the pairs it matches onto one capability.
type SectionPassthrough struct {
	Method        string `json:"method"`
	Path          string `json:"path"`
	Capability    string `json:"capability"`
	SuccessStatus int    `json:"success_status,omitempty"`
}

// SectionTLS is PEM material.
type SectionTLS struct {
	CertPEM string `json:"cert_pem"`
	KeyPEM  string `json:"key_pem"`
}

// effectKinds maps a capability's effect to the reference host's primitive
// kind.
var effectKinds = map[string]string{
	"store": "record.put",
	"fetch": "record.get",
	"list":  "record.list",
	"count": "counter.incr",
	"echo":  "echo",
}

// Effects lists the capability effects a section may name.
func Effects() []string {
	out := make([]string, 0, len(effectKinds))
	for e := range effectKinds {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// ParseSection reads the configuration document's AGTP section (unknown
// members are an error) and translates it into the reference host's Config
// and TLS configuration (nil for plaintext).
func ParseSection(raw []byte) (Config, *tls.Config, error) {
	c, l, err := ParseListeners(raw)
	return c, l.TLS, err
}

// Listeners says how the server is reached: TLS 1.3 with this
// configuration (nil: plaintext, to loopback peers only), and, for a
// server that serves TLS, whether a second listener speaks plaintext on
// loopback beside it.
type Listeners struct {
	TLS       *tls.Config
	Plaintext bool
}

// ParseListeners is ParseSection that also says which listeners the
// section asks for.
func ParseListeners(raw []byte) (Config, Listeners, error) {
	var s Section
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Config{}, Listeners{}, fmt.Errorf("agtp section: %w", err)
	}
	c, err := s.Config()
	if err != nil {
		return Config{}, Listeners{}, err
	}
	var l Listeners
	if s.TLS != nil {
		if s.TLS.CertPEM == "" || s.TLS.KeyPEM == "" {
			return Config{}, Listeners{}, errors.New("agtp section: tls needs cert_pem and key_pem")
		}
		cert, err := tls.X509KeyPair([]byte(s.TLS.CertPEM), []byte(s.TLS.KeyPEM))
		if err != nil {
			return Config{}, Listeners{}, fmt.Errorf("agtp section: tls: %w", err)
		}
		l.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{"agtp"}}
	}
	if s.PlaintextListener {
		if l.TLS == nil {
			return Config{}, Listeners{}, errors.New("agtp section: plaintext_listener asks for a plaintext listener beside the TLS one, and the section has no tls (its one listener is plaintext already)")
		}
		l.Plaintext = true
	}
	return c, l, nil
}

// Config translates the section into the reference host's configuration
// and validates it.
func (s Section) Config() (Config, error) {
	c := Config{ServerID: s.ServerID}
	c.Policies.Methods = append([]string(nil), s.Methods...)
	r := s.RCNS
	if r.Enabled != nil {
		c.Policies.RCNS.Enabled = *r.Enabled
	}
	c.Policies.RCNS.Mode = r.Mode
	c.Policies.RCNS.MinTrustTier = r.MinTrustTier
	c.Policies.RCNS.RateLimitPerMinute = r.RateLimitPerMinute
	c.Policies.RCNS.ContractTTLSeconds = r.ContractTTLSeconds
	c.Policies.RCNS.OnPolicyChange = r.OnPolicyChange
	c.Policies.Propose = Propose{AllowPersistent: s.Propose.AllowPersistent,
		Refused: append([]string(nil), s.Propose.Refused...), Review: append([]string(nil), s.Propose.Review...)}
	for _, a := range s.Agents {
		c.Agents = append(c.Agents, Agent{AgentID: a.AgentID, Name: a.Name, Principal: a.Principal, Status: a.Status,
			TrustTier: a.TrustTier, VerificationPath: a.VerificationPath, Methods: append([]string(nil), a.Methods...), Scopes: append([]string(nil), a.Scopes...)})
	}
	for i, p := range s.Capabilities {
		kind, ok := effectKinds[p.Effect]
		if !ok {
			return Config{}, fmt.Errorf("agtp section: capabilities[%d] (%s): effect %q is not one of %s", i, p.Name, p.Effect, strings.Join(Effects(), ", "))
		}
		c.Primitives = append(c.Primitives, Primitive{Name: p.Name, Kind: kind, Collection: p.Records, KeyParam: p.Key, Scopes: p.AuthorityScope})
	}
	for _, e := range s.Endpoints {
		c.Endpoints = append(c.Endpoints, Endpoint{Method: e.Method, Path: e.Path, Tier: e.Tier, Primitive: e.Capability, SuccessStatus: e.SuccessStatus})
	}
	for _, rc := range s.Recipes {
		c.Policies.Recipes = append(c.Policies.Recipes, Recipe{Name: rc.Name, Version: rc.Version, Method: rc.Method, Path: rc.Path,
			Steps: append([]string(nil), rc.ComposedOf...), SuccessStatus: rc.SuccessStatus})
	}
	for _, p := range s.Passthroughs {
		c.Policies.Passthroughs = append(c.Policies.Passthroughs, Passthrough{Method: p.Method, Path: p.Path, Primitive: p.Capability, SuccessStatus: p.SuccessStatus})
	}
	if _, err := c.normalized(); err != nil {
		return Config{}, err
	}
	return c, nil
}
