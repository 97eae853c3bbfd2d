package openwop

import (
	"errors"
	"fmt"
	"time"
)

// Config is the operator's description of one OpenWOP host. The zero value
// is a usable host: default version ranges, limits and timeouts, and no
// tenants (so every inbound exchange is unauthenticated).
type Config struct {
	// Tenants maps API keys to tenants. A key may belong to one tenant only.
	Tenants []Tenant `json:"tenants,omitempty"`
	// A2A and MCP are the version ranges the host speaks in each protocol.
	A2A VersionRange `json:"a2a,omitzero"`
	MCP VersionRange `json:"mcp,omitzero"`
	// Limits bounds every exchange, inbound and outbound.
	Limits Limits `json:"limits,omitzero"`
}

// Tenant is an isolation boundary: host events are delivered only to the
// tenant the exchange was attributed to.
type Tenant struct {
	ID      string   `json:"id"`
	APIKeys []string `json:"api_keys"`
}

// VersionRange is what the host supports in one protocol. Floor below
// Preferred is what lets an authenticated peer be downgraded rather than
// refused.
type VersionRange struct {
	// Versions lists every version the host can speak; order is irrelevant.
	Versions []string `json:"versions,omitempty"`
	// Preferred is what the host answers when the caller names nothing or
	// something newer than the host supports.
	Preferred string `json:"preferred,omitempty"`
	// Floor is the oldest version the host accepts; anything older is a
	// below-floor refusal. Empty means the oldest entry of Versions.
	Floor string `json:"floor,omitempty"`
}

// Limits bounds exchanges. Zero fields take the defaults below.
type Limits struct {
	// MaxBodyBytes caps every request body the host reads and every response
	// body it reads from a peer.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// OutboundTimeout is the whole-exchange deadline for a call to a peer.
	OutboundTimeout Duration `json:"outbound_timeout,omitzero"`
	// SSEKeepAlive is the interval between keep-alive comments on
	// /host/events, so idle proxies do not cut the stream.
	SSEKeepAlive Duration `json:"sse_keepalive,omitzero"`
	// SSEWriteTimeout bounds each write to a subscriber; a reader that stops
	// reading is dropped rather than pinning a goroutine forever.
	SSEWriteTimeout Duration `json:"sse_write_timeout,omitzero"`
	// MaxSubscribers caps concurrent /host/events streams host-wide.
	MaxSubscribers int `json:"max_subscribers,omitempty"`
	// MaxMCPSessions caps live inbound MCP sessions; the oldest is evicted.
	MaxMCPSessions int `json:"max_mcp_sessions,omitempty"`
}

// Duration is a time.Duration that reads and writes as a Go duration string
// ("10s") in JSON, which is what an operator writes by hand.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%q", time.Duration(d).String())), nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' {
		return errors.New("duration must be a string such as \"10s\"")
	}
	v, err := time.ParseDuration(string(b[1 : len(b)-1]))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Defaults. A2A versions follow the A2A spec's major.minor numbering; MCP
// revisions are dates. Each default range has a floor below its preferred
// version and one version in between.
var (
	DefaultA2A = VersionRange{Versions: []string{"0.3", "1.0"}, Preferred: "1.0", Floor: "0.3"}
	DefaultMCP = VersionRange{
		Versions:  []string{"2025-03-26", "2025-06-18", "2025-11-25"},
		Preferred: "2025-11-25",
		Floor:     "2025-03-26",
	}
)

const (
	defaultMaxBody         = 1 << 20
	defaultOutboundTimeout = 10 * time.Second
	defaultKeepAlive       = 15 * time.Second
	defaultWriteTimeout    = 10 * time.Second
	defaultMaxSubscribers  = 1024
	defaultMaxMCPSessions  = 4096
)

// resolved is Config after defaults and validation; the host reads only this.
type resolved struct {
	keys            map[string]string // API key -> tenant id
	a2a, mcp        versionPolicy
	maxBody         int64
	outboundTimeout time.Duration
	keepAlive       time.Duration
	writeTimeout    time.Duration
	maxSubscribers  int
	maxMCPSessions  int
}

func (c Config) resolve() (resolved, error) {
	r := resolved{keys: map[string]string{}}
	seen := map[string]bool{}
	for i, t := range c.Tenants {
		if t.ID == "" {
			return r, fmt.Errorf("tenants[%d]: id is empty", i)
		}
		if seen[t.ID] {
			return r, fmt.Errorf("tenants[%d]: duplicate tenant id %q", i, t.ID)
		}
		seen[t.ID] = true
		for _, k := range t.APIKeys {
			if k == "" {
				return r, fmt.Errorf("tenant %q: empty api key", t.ID)
			}
			if other, dup := r.keys[k]; dup {
				return r, fmt.Errorf("tenant %q: api key already belongs to tenant %q", t.ID, other)
			}
			r.keys[k] = t.ID
		}
	}
	var err error
	if r.a2a, err = newVersionPolicy("a2a", c.A2A, DefaultA2A); err != nil {
		return r, err
	}
	if r.mcp, err = newVersionPolicy("mcp", c.MCP, DefaultMCP); err != nil {
		return r, err
	}
	l := c.Limits
	r.maxBody = orDefault(l.MaxBodyBytes, defaultMaxBody)
	r.outboundTimeout = orDefault(time.Duration(l.OutboundTimeout), defaultOutboundTimeout)
	r.keepAlive = orDefault(time.Duration(l.SSEKeepAlive), defaultKeepAlive)
	r.writeTimeout = orDefault(time.Duration(l.SSEWriteTimeout), defaultWriteTimeout)
	r.maxSubscribers = orDefault(l.MaxSubscribers, defaultMaxSubscribers)
	r.maxMCPSessions = orDefault(l.MaxMCPSessions, defaultMaxMCPSessions)
	if r.maxBody < 1024 || r.outboundTimeout < 0 || r.keepAlive < 0 || r.writeTimeout < 0 ||
		r.maxSubscribers < 0 || r.maxMCPSessions < 0 {
		return r, errors.New("limits: negative value, or max_body_bytes below 1024")
	}
	return r, nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
