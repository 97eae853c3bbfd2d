package sabotage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

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
	protocol string // "" for every protocol
	// into, when set, picks the streams the records leak into.
	into func(x *Exchange) bool
	mu   sync.Mutex
	seen []leaked
	sent map[*Exchange]map[int]bool
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
		if c.into != nil && !c.into(x) {
			break
		}
		if l.key != key && !sent[i] {
			out = append(out, l.frame)
			sent[i] = true
		}
	}
	if h.payload != nil && (c.protocol == "" || h.is(c.protocol, "")) {
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

// --- Durable host events, the JSON-RPC and MCP forms, anonymous callers -------

// hostState tells a rule which records predate the host's last start: a
// host the proxy first saw (by its address) after a record was made is a
// restarted one, and the record was made by the host before it.
type hostState struct {
	mu    sync.Mutex
	first map[string]time.Time // upstream -> first request the proxy passed to it
}

func (h *hostState) see(x *Exchange) *Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first == nil {
		h.first = map[string]time.Time{}
	}
	if _, ok := h.first[x.Upstream]; !ok {
		h.first[x.Upstream] = time.Now()
	}
	return nil
}

// beforeStart reports whether a record was made before the host behind x
// started: its envelope timestamp precedes the first request the proxy
// passed to that host.
func (h *hostState) beforeStart(x *Exchange, env map[string]any) bool {
	h.mu.Lock()
	first, ok := h.first[x.Upstream]
	h.mu.Unlock()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(env["timestamp"]))
	return ok && err == nil && at.Before(first)
}

// amnesia is a host that keeps its host events in memory: after a restart,
// nothing recorded before it is delivered.
func amnesia() Rule {
	h := &hostState{}
	return Rule{
		Intercept: h.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env != nil && h.beforeStart(x, r.env) {
				return nil
			}
			return [][]byte{raw}
		}),
	}
}

// lostLast is a host that answers an exchange before its record reaches
// the disk: when it stops, the last record it made is lost. On each stream
// the last record made before the host's restart is held back and dropped
// once a record made after the restart shows it was the last.
func lostLast() Rule {
	h := &hostState{}
	var mu sync.Mutex
	held := map[*Exchange][]byte{}
	return Rule{
		Intercept: h.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil {
				return [][]byte{raw}
			}
			mu.Lock()
			defer mu.Unlock()
			prev := held[x]
			if h.beforeStart(x, r.env) {
				held[x] = append([]byte(nil), raw...)
				if prev != nil {
					return [][]byte{prev}
				}
				return nil
			}
			delete(held, x) // prev was the last record before the restart: lost
			return [][]byte{raw}
		}),
	}
}

// renumbered is a host that gives its records new eventIds when it starts
// again (ids drawn at load, not stored): a record made before the restart
// comes back under another id.
func renumbered() Rule {
	h := &hostState{}
	return Rule{
		Intercept: h.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil || !h.beforeStart(x, r.env) {
				return [][]byte{raw}
			}
			id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(x.Upstream+"#"+fmt.Sprint(r.env["eventId"]))).String()
			r.env["eventId"] = id
			r.frame.id, r.frame.hasID = id, true
			return [][]byte{withEnvelope(r)}
		}),
	}
}

// resumed reports whether x is a stream the client resumed.
func resumed(x *Exchange) bool { return strings.TrimSpace(x.Header.Get("Last-Event-ID")) != "" }

// resumeSkipsOne is a host that resumes one record too far: the first
// record after the one named in Last-Event-ID is never delivered.
func resumeSkipsOne() func(x *Exchange, frame []byte) [][]byte {
	var mu sync.Mutex
	skipped := map[*Exchange]bool{}
	return hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
		if r.env == nil || !resumed(x) {
			return [][]byte{raw}
		}
		mu.Lock()
		defer mu.Unlock()
		if !skipped[x] {
			skipped[x] = true
			return nil
		}
		return [][]byte{raw}
	})
}

// resumeInclusive is a host that resumes at the record named in
// Last-Event-ID rather than after it: the subscriber gets it again. Every
// record any stream delivered is remembered by eventId, so that the one a
// resumed stream names can be sent first.
func resumeInclusive() func(x *Exchange, frame []byte) [][]byte {
	var mu sync.Mutex
	byID := map[string][]byte{}
	started := map[*Exchange]bool{}
	return hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		if r.env != nil {
			byID[fmt.Sprint(r.env["eventId"])] = append([]byte(nil), raw...)
		}
		if !resumed(x) || started[x] {
			return [][]byte{raw}
		}
		started[x] = true
		if again, ok := byID[strings.TrimSpace(x.Header.Get("Last-Event-ID"))]; ok {
			return [][]byte{again, raw}
		}
		return [][]byte{raw}
	})
}

// streamOpened remembers when the proxy passed each stream request on.
type streamOpened struct {
	mu sync.Mutex
	at map[*Exchange]time.Time
}

func (s *streamOpened) see(x *Exchange) *Response {
	if isHostEvents(x) {
		s.mu.Lock()
		if s.at == nil {
			s.at = map[*Exchange]time.Time{}
		}
		s.at[x] = time.Now()
		s.mu.Unlock()
	}
	return nil
}

// replayed reports whether a record on a new (not resumed) subscription was
// made before the subscription opened.
func (s *streamOpened) replayed(x *Exchange, env map[string]any) bool {
	s.mu.Lock()
	opened, ok := s.at[x]
	s.mu.Unlock()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(env["timestamp"]))
	return ok && !resumed(x) && err == nil && at.Before(opened)
}

// liveOnly is a host whose new subscriptions start at "now": nothing made
// before a subscription opened is delivered to it.
func liveOnly() Rule {
	s := &streamOpened{}
	return Rule{
		Intercept: s.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env != nil && s.replayed(x, r.env) {
				return nil
			}
			return [][]byte{raw}
		}),
	}
}

// replayWithoutWorkspace is a host whose replay rebuilds records from a
// table that does not keep the workspace: a record delivered to a new
// subscription has lost its workspaceId.
func replayWithoutWorkspace() Rule {
	s := &streamOpened{}
	return Rule{
		Intercept: s.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil || !s.replayed(x, r.env) {
				return [][]byte{raw}
			}
			delete(r.env, "workspaceId")
			return [][]byte{withEnvelope(r)}
		}),
	}
}

// rpcBody reads a JSON-RPC request body: its method and params.
func rpcBody(x *Exchange) (method string, params map[string]any) {
	if x.Method != http.MethodPost {
		return "", nil
	}
	m := decodeUseNumber(x.Body)
	if m == nil || m["jsonrpc"] != "2.0" {
		return "", nil
	}
	method, _ = m["method"].(string)
	params, _ = m["params"].(map[string]any)
	return method, params
}

func isA2ARPC(x *Exchange) bool {
	m, _ := rpcBody(x)
	return m == "message/send" || m == "SendMessage"
}

func isInitialize(x *Exchange) bool {
	m, _ := rpcBody(x)
	return m == "initialize"
}

func isAgentCard(x *Exchange) bool {
	return x.Method == http.MethodGet && strings.HasSuffix(x.Path, "agent-card.json")
}

// workspaces remembers the workspace of the inbound requests a rule picks.
type workspaces struct {
	mu  sync.Mutex
	set map[string]string // workspace -> a value the rule keeps with it
}

func (w *workspaces) note(ws, v string) {
	if ws == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil {
		w.set = map[string]string{}
	}
	w.set[ws] = v
}

func (w *workspaces) get(env map[string]any) (string, bool) {
	ws, _ := env["workspaceId"].(string)
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.set[ws]
	return v, ok && ws != ""
}

// rpcUnrecorded is a host that records the agent-card negotiation but not
// the one every A2A JSON-RPC request makes.
func rpcUnrecorded() Rule {
	seen := &workspaces{}
	return Rule{
		Intercept: func(x *Exchange) *Response {
			if isA2ARPC(x) {
				seen.note(x.Header.Get("OpenWOP-Workspace-Id"), "")
			}
			return nil
		},
		Stream: hostRecords(func(_ *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env != nil {
				if _, ok := seen.get(r.env); ok {
					return nil
				}
			}
			return [][]byte{raw}
		}),
	}
}

// requestedFromHeader is a host that records, for an MCP initialize, the
// MCP-Protocol-Version header as what was asked for, not protocolVersion.
func requestedFromHeader(outcome string) Rule {
	seen := &workspaces{}
	return Rule{
		Intercept: func(x *Exchange) *Response {
			if isInitialize(x) {
				if v := x.Header.Get("MCP-Protocol-Version"); v != "" {
					seen.note(x.Header.Get("OpenWOP-Workspace-Id"), v)
				}
			}
			return nil
		},
		Stream: hostRecords(func(_ *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.payload == nil || !r.is("mcp", outcome) {
				return [][]byte{raw}
			}
			v, ok := seen.get(r.env)
			if !ok {
				return [][]byte{raw}
			}
			r.payload["requested"] = v
			return [][]byte{withEnvelope(r)}
		}),
	}
}

// anonymous reports whether x is an inbound negotiation with no
// authenticated caller, and names its protocol and the version it named.
func anonymous(x *Exchange) (protocol, named string, ok bool) {
	if x.Header.Get("Authorization") != "" {
		return "", "", false
	}
	switch {
	case isAgentCard(x) || isA2ARPC(x):
		return "a2a", strings.TrimSpace(x.Header.Get("A2A-Version")), true
	case isInitialize(x):
		_, p := rpcBody(x)
		v, _ := p["protocolVersion"].(string)
		return "mcp", v, true
	}
	return "", "", false
}

func sectionFloor(x *Exchange, protocol string) string {
	r, _ := x.Section("openwop")[protocol].(map[string]any)
	f, _ := r["floor"].(string)
	return f
}

// answerAnonymousAt rewrites the host's answer to an anonymous exchange so
// that it is accepted at version.
func answerAnonymousAt(x *Exchange, r *Response, protocol, version string) {
	r.Status = http.StatusOK
	r.Header.Set("Content-Type", "application/json")
	switch {
	case protocol == "mcp":
		body := decodeUseNumber(x.Body)
		r.SetJSON(map[string]any{"jsonrpc": "2.0", "id": body["id"], "result": map[string]any{
			"protocolVersion": version, "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "sabotaged", "version": "1"}}})
	case isA2ARPC(x):
		body := decodeUseNumber(x.Body)
		r.Header.Set("A2A-Version", version)
		r.SetJSON(map[string]any{"jsonrpc": "2.0", "id": body["id"], "result": map[string]any{"kind": "message", "role": "agent"}})
	default:
		r.Header.Set("A2A-Version", version)
		r.SetJSON(map[string]any{"name": "sabotaged", "protocolVersion": version, "url": "http://127.0.0.1/a2a"})
	}
}

// answered reads the host's answer to an inbound negotiation: whether it
// accepted and at which version.
func answered(x *Exchange, r *Response, protocol string) (version string, accepted bool) {
	if r.Status < 200 || r.Status >= 300 {
		return "", false
	}
	if protocol == "a2a" && isAgentCard(x) {
		v := r.Header.Get("A2A-Version")
		if v == "" {
			v, _ = r.JSON()["protocolVersion"].(string)
		}
		return v, true
	}
	body := r.JSON()
	if e, has := body["error"]; has && e != nil {
		return "", false
	}
	if protocol == "a2a" {
		return r.Header.Get("A2A-Version"), true
	}
	res, _ := body["result"].(map[string]any)
	v, _ := res["protocolVersion"].(string)
	return v, true
}

// anonymousLeak is a host that delivers the record of an exchange with no
// tenant to every tenant's stream: each anonymous negotiation the proxy
// passes is turned into the record such a host would write (no
// workspaceId, since the caller has no tenant to hold one) and sent on
// every host-event stream, once per stream.
type anonymousLeak struct {
	mu     sync.Mutex
	frames [][]byte
	sent   map[*Exchange]int
}

func (a *anonymousLeak) response(x *Exchange, r *Response) {
	protocol, named, ok := anonymous(x)
	if !ok {
		return
	}
	version, accepted := answered(x, r, protocol)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	p := map[string]any{"protocol": protocol, "outcome": "refused", "reason": "sabotaged", "at": now}
	if accepted {
		p = map[string]any{"protocol": protocol, "outcome": "accepted", "version": version, "at": now}
	}
	if named != "" {
		p["requested"] = named
	}
	id := uuid.NewString()
	env, _ := json.Marshal(map[string]any{"eventId": id, "type": "negotiation.decided", "timestamp": now, "delivery": "durable", "payload": p})
	f := sseFrame{event: "negotiation.decided", id: id, hasID: true, data: string(env)}
	a.mu.Lock()
	a.frames = append(a.frames, f.bytes())
	a.mu.Unlock()
}

func (a *anonymousLeak) stream(x *Exchange, frame []byte) [][]byte {
	if !isHostEvents(x) {
		return [][]byte{frame}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent == nil {
		a.sent = map[*Exchange]int{}
	}
	out := append([][]byte(nil), a.frames[a.sent[x]:]...)
	a.sent[x] = len(a.frames)
	return append(out, frame)
}

// noAt drops `at` from the matching records: a payload the schema refuses.
func noAt(p map[string]any) { delete(p, "at") }

func init() {
	leak := &anonymousLeak{}
	resumeLeak := &crossTenant{protocol: "", into: resumed}
	rules := []Rule{
		withID(amnesia(), "openwop.requirement.0242.inbound.recorded", "amnesia",
			"keeps its host events in memory: after a restart or crash, no record made before it is delivered"),
		withID(lostLast(), "openwop.requirement.0242.inbound.recorded", "lost-last",
			"answers an inbound exchange before its record reaches the disk, so the last record made before a restart or crash is lost"),
		withID(renumbered(), "openwop.requirement.0242.inbound.recorded", "renumbered",
			"gives its records new eventIds each time it starts, so a record made before a restart comes back under another id"),
		withID(amnesia(), "openwop.requirement.0242.inbound.recorded.mcp", "amnesia",
			"keeps its host events in memory: after a restart or crash, no record made before it is delivered"),
		withID(lostLast(), "openwop.requirement.0242.inbound.recorded.mcp", "lost-last",
			"answers an MCP initialize before its record reaches the disk, so the last record made before a restart or crash is lost"),
		withID(rpcUnrecorded(), "openwop.requirement.0242.inbound.recorded", "jsonrpc-unrecorded",
			"records the agent-card negotiation but not the one an A2A JSON-RPC request makes"),
		withID(rpcUnrecorded(), "openwop.requirement.0242.inbound.refused", "jsonrpc-unrecorded",
			"records the agent-card negotiation but not the one an A2A JSON-RPC request makes, refusals included"),
		withID(requestedFromHeader("accepted"), "openwop.requirement.0242.inbound.recorded.mcp", "requested-from-header",
			"records an MCP initialize's `requested` from the MCP-Protocol-Version header rather than from protocolVersion"),
		withID(requestedFromHeader("refused"), "openwop.requirement.0242.inbound.refused.mcp", "requested-from-header",
			"records a refused MCP initialize's `requested` from the MCP-Protocol-Version header rather than from protocolVersion"),
		{
			ID:     "openwop.hostevents.resume.after-last-event-id",
			Broken: "resumes one record too far: the first record after the one named in Last-Event-ID is never delivered",
			Stream: resumeSkipsOne(),
		},
		{
			ID:      "openwop.hostevents.resume.after-last-event-id",
			Variant: "inclusive",
			Broken:  "resumes at the record named in Last-Event-ID rather than after it, so the subscriber receives it again",
			Stream:  resumeInclusive(),
		},
		{
			ID:      "openwop.hostevents.resume.after-last-event-id",
			Variant: "cross-tenant",
			Broken:  "resolves Last-Event-ID in the whole log rather than the tenant's, delivering other tenants' records to a resumed stream",
			Stream:  hostRecords(resumeLeak.stream),
		},
		withID(liveOnly(), "openwop.hostevents.fresh-subscription.replays", "",
			"starts a subscription without Last-Event-ID at \"now\": no record made before it opened is delivered"),
		withID(replayWithoutWorkspace(), "openwop.hostevents.fresh-subscription.replays", "no-workspace",
			"replays records made before a subscription opened without their workspaceId"),
		{
			ID:       "openwop.rfc0242.unauthenticated.recorded-undelivered",
			Broken:   "delivers the record of an exchange with no authenticated caller to every tenant's host-event stream",
			Response: leak.response,
			Stream:   leak.stream,
		},
		{
			ID:     "openwop.rfc0242.unauthenticated.never-below-preferred",
			Broken: "gives an anonymous caller the version it asked for, even below the preferred one (and below the floor)",
			Response: func(x *Exchange, r *Response) {
				protocol, named, ok := anonymous(x)
				if !ok || named == "" {
					return
				}
				if _, accepted := answered(x, r, protocol); !accepted {
					answerAnonymousAt(x, r, protocol, named)
				}
			},
		},
		{
			ID:      "openwop.rfc0242.unauthenticated.never-below-preferred",
			Variant: "floor",
			Broken:  "answers an anonymous caller it accepts at its floor version, below the preferred one",
			Response: func(x *Exchange, r *Response) {
				protocol, _, ok := anonymous(x)
				if !ok {
					return
				}
				if _, accepted := answered(x, r, protocol); accepted {
					answerAnonymousAt(x, r, protocol, sectionFloor(x, protocol))
				}
			},
		},
		{
			ID:       "openwop.requirement.0242.requested.outbound",
			Variant:  "no-at",
			Broken:   "records an outbound A2A negotiation on the run's log without `at`, which the payload requires",
			Response: runRecords(func(p map[string]any) { ifProtocol(p, "a2a", noAt) }),
		},
		{
			ID:       "openwop.requirement.0242.requested.outbound.mcp",
			Variant:  "no-at",
			Broken:   "records an outbound MCP initialize on the run's log without `at`, which the payload requires",
			Response: runRecords(func(p map[string]any) { ifProtocol(p, "mcp", noAt) }),
		},
		{
			ID:      "openwop.requirement.0242.inbound.recorded",
			Variant: "no-workspace",
			Broken:  "writes inbound A2A host events without the workspaceId the request named",
			Stream: hostRecords(func(_ *Exchange, raw []byte, r hostRecord) [][]byte {
				if r.payload == nil || !r.is("a2a", "") {
					return [][]byte{raw}
				}
				delete(r.env, "workspaceId")
				return [][]byte{withEnvelope(r)}
			}),
		},
		{
			ID:      "openwop.requirement.0242.inbound.recorded",
			Variant: "no-at",
			Broken:  "writes inbound A2A host events without `at`, which the payload requires",
			Stream:  editHostPayloads("a2a", noAt),
		},
		{
			ID:      "openwop.requirement.0242.inbound.recorded.mcp",
			Variant: "no-at",
			Broken:  "writes inbound MCP host events without `at`, which the payload requires",
			Stream:  editHostPayloads("mcp", noAt),
		},
	}
	openWOPRules = append(openWOPRules, rules...)
}

func withID(r Rule, id, variant, broken string) Rule {
	r.ID, r.Variant, r.Broken = id, variant, broken
	return r
}

func ifProtocol(p map[string]any, protocol string, edit func(map[string]any)) {
	if p["protocol"] == protocol {
		edit(p)
	}
}

// editHostPayloads rewrites the payload of every host-event record of the
// protocol.
func editHostPayloads(protocol string, edit func(map[string]any)) func(x *Exchange, frame []byte) [][]byte {
	return hostRecords(func(_ *Exchange, raw []byte, r hostRecord) [][]byte {
		if r.payload == nil || !r.is(protocol, "") {
			return [][]byte{raw}
		}
		edit(r.payload)
		return [][]byte{withEnvelope(r)}
	})
}
