package sabotage

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// OpenWOP RFC 0242 rules. The records live on two surfaces, a run's log
// (GET /runs/{runId}/events/poll) and the host-event stream (GET
// /host/events, rewritten frame by frame through Rule.Stream); discovery is
// GET /.well-known/openwop.

var runPollPath = regexp.MustCompile(`^/runs/[^/]+/events/poll$`)

func isRunPoll(x *Exchange) bool {
	return x.Method == http.MethodGet && runPollPath.MatchString(x.Path)
}
func isDiscovery(x *Exchange) bool {
	return x.Method == http.MethodGet && x.Path == "/.well-known/openwop"
}
func isHostEvents(x *Exchange) bool {
	return x.Method == http.MethodGet && x.Path == "/host/events"
}

func decodeUseNumber(b []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// runRecords rewrites the payload of every negotiation.decided event a run's
// log returns.
func runRecords(edit func(p map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !isRunPoll(x) || r.Status != http.StatusOK {
			return
		}
		body := decodeUseNumber(r.Body)
		evs, _ := body["events"].([]any)
		if evs == nil {
			return
		}
		for _, e := range evs {
			ev, _ := e.(map[string]any)
			if p, _ := ev["payload"].(map[string]any); p != nil && ev["type"] == "negotiation.decided" {
				edit(p)
			}
		}
		r.SetJSON(body)
	}
}

// sseFrame is one parsed event-stream frame. comment is a frame that
// dispatches nothing (a keep-alive), passed on as it came.
type sseFrame struct {
	event, id, data string
	hasID           bool
	comment         bool
}

func parseSSE(frame []byte) sseFrame {
	var f sseFrame
	var data []string
	dirty := false
	for _, line := range strings.Split(strings.TrimRight(string(frame), "\r\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, ":") || line == "" {
			continue
		}
		dirty = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			f.event = value
		case "id":
			f.id, f.hasID = value, true
		case "data":
			data = append(data, value)
		}
	}
	f.data = strings.Join(data, "\n")
	f.comment = !dirty
	return f
}

func (f sseFrame) bytes() []byte {
	var b strings.Builder
	if f.event != "" {
		b.WriteString("event: " + f.event + "\n")
	}
	if f.hasID {
		b.WriteString("id: " + f.id + "\n")
	}
	for _, l := range strings.Split(f.data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	return []byte(b.String())
}

// hostRecord is a negotiation.decided host event as a rule sees it.
type hostRecord struct {
	frame   sseFrame
	env     map[string]any
	payload map[string]any
}

func (h hostRecord) is(protocol, outcome string) bool {
	return h.payload["protocol"] == protocol && (outcome == "" || h.payload["outcome"] == outcome)
}

// hostRecords applies edit to every negotiation.decided frame of a host-event
// stream; edit returns the frames to send instead (nil drops the record).
// Other frames pass as they came.
func hostRecords(edit func(x *Exchange, raw []byte, h hostRecord) [][]byte) func(x *Exchange, frame []byte) [][]byte {
	return func(x *Exchange, frame []byte) [][]byte {
		if !isHostEvents(x) {
			return [][]byte{frame}
		}
		f := parseSSE(frame)
		env := decodeUseNumber([]byte(f.data))
		p, _ := env["payload"].(map[string]any)
		if f.comment || env == nil || p == nil || env["type"] != "negotiation.decided" {
			return edit(x, frame, hostRecord{frame: f})
		}
		return edit(x, frame, hostRecord{frame: f, env: env, payload: p})
	}
}

// withEnvelope re-encodes a record after its envelope was edited.
func withEnvelope(h hostRecord) []byte {
	b, _ := json.Marshal(h.env)
	h.frame.data = string(b)
	return h.frame.bytes()
}

// dropRecords is a host that records nothing for the matching exchanges:
// their records never reach the stream.
func dropRecords(protocol, outcome string) func(x *Exchange, frame []byte) [][]byte {
	return hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
		if h.payload != nil && h.is(protocol, outcome) {
			return nil
		}
		return [][]byte{raw}
	})
}

// crossTenant is a host that delivers one tenant's records of a protocol to
// every other tenant's stream as well: each record seen on one tenant's
// stream is replayed into every stream opened with another credential.
type crossTenant struct {
	protocol string
	mu       sync.Mutex
	seen     []leaked
	sent     map[*Exchange]map[int]bool
}

type leaked struct {
	key   string
	frame []byte
}

func (c *crossTenant) stream(x *Exchange, raw []byte, h hostRecord) [][]byte {
	key := x.Header.Get("Authorization")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent = map[*Exchange]map[int]bool{}
	}
	sent := c.sent[x]
	if sent == nil {
		sent = map[int]bool{}
		c.sent[x] = sent
	}
	var out [][]byte
	for i, l := range c.seen {
		if l.key != key && !sent[i] {
			out = append(out, l.frame)
			sent[i] = true
		}
	}
	if h.payload != nil && h.is(c.protocol, "") {
		c.seen = append(c.seen, leaked{key: key, frame: append([]byte(nil), raw...)})
		sent[len(c.seen)-1] = true
	}
	return append(out, raw)
}

// downgradeAsMet writes a downgrade as though the request had been met:
// version is overwritten with requested.
func downgradeAsMet(p map[string]any) {
	v, _ := p["version"].(string)
	q, _ := p["requested"].(string)
	if p["outcome"] == "accepted" && v != "" && q != "" && v != q {
		p["version"] = q
	}
}

// duplicateRecords is a host that records each matching exchange twice: two
// durable events with distinct eventIds, so that a reader of the log sees
// two negotiations where there was one.
func duplicateRecords(protocol, outcome string) func(x *Exchange, frame []byte) [][]byte {
	return hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
		if h.payload == nil || !h.is(protocol, outcome) {
			return [][]byte{raw}
		}
		id := uuid.NewString()
		h.env["eventId"] = id
		h.frame.id, h.frame.hasID = id, true
		return [][]byte{raw, withEnvelope(h)}
	})
}

// editDiscovery rewrites the discovery document.
func editDiscovery(edit func(doc map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !isDiscovery(x) || r.Status != http.StatusOK {
			return
		}
		doc := decodeUseNumber(r.Body)
		if doc == nil {
			return
		}
		edit(doc)
		r.SetJSON(doc)
	}
}

var (
	a2aLeak = &crossTenant{protocol: "a2a"}
	mcpLeak = &crossTenant{protocol: "mcp"}
)

var openWOPRules = []Rule{
	{
		ID:     "openwop.requirement.0242.requested.outbound",
		Broken: "records an outbound A2A negotiation on the run's log without `requested`",
		Response: runRecords(func(p map[string]any) {
			if p["protocol"] == "a2a" {
				delete(p, "requested")
			}
		}),
	},
	{
		ID:     "openwop.requirement.0242.requested.outbound.mcp",
		Broken: "records an outbound MCP initialize on the run's log without `requested`",
		Response: runRecords(func(p map[string]any) {
			if p["protocol"] == "mcp" {
				delete(p, "requested")
			}
		}),
	},
	{
		ID:       "openwop.rfc0242.downgrade.reads-as-accepted",
		Broken:   "writes a downgrade (run log and host event) with `version` equal to `requested`, so it reads as a request that was met",
		Response: runRecords(downgradeAsMet),
		Stream: hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
			if h.payload == nil {
				return [][]byte{raw}
			}
			downgradeAsMet(h.payload)
			return [][]byte{withEnvelope(h)}
		}),
	},
	{
		ID:     "openwop.requirement.0242.inbound.recorded",
		Broken: "delivers each tenant's inbound A2A records to every other tenant's host-event stream as well",
		Stream: hostRecords(a2aLeak.stream),
	},
	{
		ID:     "openwop.requirement.0242.inbound.recorded.mcp",
		Broken: "records nothing for an accepted inbound MCP initialize (no host event reaches the stream)",
		Stream: dropRecords("mcp", "accepted"),
	},
	{
		ID:     "openwop.requirement.0242.inbound.refused",
		Broken: "records nothing for a refused inbound A2A negotiation",
		Stream: dropRecords("a2a", "refused"),
	},
	{
		ID:     "openwop.requirement.0242.inbound.refused.mcp",
		Broken: "delivers a refused MCP initialize's record as an ephemeral event without an SSE id, so it is not durable",
		Stream: hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
			if h.payload == nil || !h.is("mcp", "refused") {
				return [][]byte{raw}
			}
			h.env["delivery"] = "ephemeral"
			h.frame.hasID, h.frame.id = false, ""
			return [][]byte{withEnvelope(h)}
		}),
	},
	{
		ID:     "openwop.requirement.0242.inbound.listed",
		Broken: "serves A2A and MCP inbound but lists no `negotiation.decided` entry in `hostEvents.types`",
		Response: editDiscovery(func(doc map[string]any) {
			he, _ := doc["hostEvents"].(map[string]any)
			types, _ := he["types"].([]any)
			if types == nil {
				return
			}
			kept := []any{}
			for _, t := range types {
				if e, _ := t.(map[string]any); e != nil && e["type"] == "negotiation.decided" {
					continue
				}
				kept = append(kept, t)
			}
			he["types"] = kept
		}),
	},
	{
		ID:      "openwop.requirement.0242.inbound.listed",
		Variant: "facet-url",
		Broken:  "advertises its A2A inbound facet (`a2a.agentCardUrl`) at a URL that is not http(s), so no caller can reach what it says it serves",
		Response: editDiscovery(func(doc map[string]any) {
			if a, _ := doc["a2a"].(map[string]any); a != nil {
				if u, _ := a["agentCardUrl"].(string); u != "" {
					a["agentCardUrl"] = "urn:openwop:agent-card"
				}
			}
		}),
	},
	{
		ID:      "openwop.requirement.0242.inbound.refused",
		Variant: "recorded-twice",
		Broken:  "records a refused inbound A2A negotiation twice (two durable host events with distinct eventIds)",
		Stream:  duplicateRecords("a2a", "refused"),
	},
	{
		ID:      "openwop.requirement.0242.inbound.recorded.mcp",
		Variant: "cross-tenant",
		Broken:  "delivers each tenant's inbound MCP records to every other tenant's host-event stream as well",
		Stream:  hostRecords(mcpLeak.stream),
	},
}
