// Package hostevents is an executable model of OpenWOP durable host events
// as RFC 0242 uses them (openwop-rfc-0242.md §B.2, §B.4, §D, and the readings
// in docs/interpretations.md, "OpenWOP RFC 0242"): inbound negotiations
// recorded as durable negotiation.decided host events of the caller's
// tenant, delivered on /host/events to that tenant alone, replayed to a new
// subscription and continued after Last-Event-ID on a resumed one.
//
// The model knows nothing of the wire or of any host: a driver
// (steps/openwop/model.go) performs each operation on a host and hands the
// model what came back. Where the text allows several answers (an anonymous
// caller may be refused or answered at the preferred version; a record of an
// exchange that named no version may or may not carry requested), the model
// accepts each of them; a host is wrong only when its answer is none of them.
package hostevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Protocols, as a record's payload names them.
const (
	A2A = "a2a"
	MCP = "mcp"
)

// Range is the version range a host speaks for one protocol.
type Range struct {
	Versions         []string
	Floor, Preferred string
}

// Config is the host's configuration as the model needs it.
type Config struct {
	A2A, MCP Range
}

func (c Config) rng(protocol string) Range {
	if protocol == MCP {
		return c.MCP
	}
	return c.A2A
}

// compare orders two versions: A2A versions as dotted numbers, MCP
// revisions (dates, YYYY-MM-DD) as strings, which orders dates.
func compare(protocol, a, b string) int {
	if protocol == MCP {
		return strings.Compare(a, b)
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// Answer is how the host answered an exchange.
type Answer struct {
	Accepted bool
	Version  string // the version answered, when accepted
}

func (a Answer) String() string {
	if !a.Accepted {
		return "refused"
	}
	return "accepted at " + a.Version
}

// Exchange is one inbound negotiation.
type Exchange struct {
	Tenant    int    // the caller's tenant; -1 for an anonymous caller
	Protocol  string // A2A or MCP
	Named     string // the version the caller named; "" for none
	Workspace string // the workspace the request names (the record's marker)
}

// Record is a durable record the model expects a tenant's stream to carry.
type Record struct {
	Tenant    int
	Index     int // its place in the tenant's log
	Workspace string
	Protocol  string
	Named     string
	Answer    Answer
	Floor     string // the floor of a refusal below it
	// EventID and Doc are bound on first delivery: every later delivery
	// must carry the same eventId and the same JSON document.
	EventID string
	Doc     any
}

func (r *Record) String() string {
	named := r.Named
	if named == "" {
		named = "no version"
	}
	return fmt.Sprintf("record %d of tenant %d (%s naming %s, %s; workspace %s)", r.Index+1, r.Tenant, strings.ToUpper(r.Protocol), named, r.Answer, r.Workspace)
}

// Sub is one subscription to a tenant's stream.
type Sub struct {
	ID          int
	Tenant      int
	Start       int    // the index, in the tenant's log, of the first record it must deliver
	LastEventID string // what it named in Last-Event-ID ("" for a new subscription)
	Delivered   int    // how many records it delivered so far
	Open        bool
}

// Model is the state: each tenant's log of records, and the subscriptions.
type Model struct {
	cfg  Config
	logs map[int][]*Record
	subs []*Sub
	ids  map[string]*Record // bound eventIds
	ws   map[string]*Record // every record by workspace
}

// New returns the model of a host with no records.
func New(cfg Config) *Model {
	return &Model{cfg: cfg, logs: map[int][]*Record{}, ids: map[string]*Record{}, ws: map[string]*Record{}}
}

// negotiate is the one answer an authenticated caller gets (docs/hosts/
// openwop.md, the configuration table): below the floor is refused; the
// preferred version, a newer one or none is answered at the preferred; a
// spoken version between them as asked; an unspoken one with the newest
// spoken version below it.
func (m *Model) negotiate(protocol, named string) Answer {
	r := m.cfg.rng(protocol)
	switch {
	case named == "" || compare(protocol, named, r.Preferred) >= 0:
		return Answer{Accepted: true, Version: r.Preferred}
	case compare(protocol, named, r.Floor) < 0:
		return Answer{}
	case slices.Contains(r.Versions, named):
		return Answer{Accepted: true, Version: named}
	}
	best := r.Floor
	for _, v := range r.Versions {
		if compare(protocol, v, named) < 0 && compare(protocol, v, best) > 0 {
			best = v
		}
	}
	return Answer{Accepted: true, Version: best}
}

// Allowed is the set of answers the text allows to an exchange. An
// authenticated caller has one; an anonymous one (§B.4) may be refused, or
// answered at a version not below the preferred one.
func (m *Model) Allowed(x Exchange) []Answer {
	if x.Tenant >= 0 {
		return []Answer{m.negotiate(x.Protocol, x.Named)}
	}
	out := []Answer{{}}
	r := m.cfg.rng(x.Protocol)
	for _, v := range r.Versions {
		if compare(x.Protocol, v, r.Preferred) >= 0 {
			out = append(out, Answer{Accepted: true, Version: v})
		}
	}
	return out
}

// Exchange checks the host's answer against the allowed ones and, for an
// authenticated caller, appends the record the exchange must leave to the
// caller's tenant's log. An anonymous exchange's record reaches no one.
func (m *Model) Exchange(x Exchange, got Answer) error {
	allowed := m.Allowed(x)
	if !slices.Contains(allowed, got) {
		var as []string
		for _, a := range allowed {
			as = append(as, a.String())
		}
		return fmt.Errorf("the host answered %s; the model allows %s", got, strings.Join(as, " or "))
	}
	if x.Tenant < 0 {
		return nil
	}
	rec := &Record{Tenant: x.Tenant, Index: len(m.logs[x.Tenant]), Workspace: x.Workspace, Protocol: x.Protocol, Named: x.Named, Answer: got}
	if !got.Accepted {
		rec.Floor = m.cfg.rng(x.Protocol).Floor
	}
	m.logs[x.Tenant] = append(m.logs[x.Tenant], rec)
	m.ws[x.Workspace] = rec
	return nil
}

// Log is a tenant's records, in the order they were made.
func (m *Model) Log(tenant int) []*Record { return m.logs[tenant] }

// Subscribe opens a subscription of tenant: a new one (after "") starts at
// the tenant's first record; a resumed one starts after the record whose
// eventId it names, which must be one of the tenant's records already
// delivered to it (the model resumes only from what a subscriber has).
func (m *Model) Subscribe(tenant int, after string) (*Sub, error) {
	s := &Sub{ID: len(m.subs), Tenant: tenant, LastEventID: after, Open: true}
	if after != "" {
		r, ok := m.ids[after]
		if !ok || r.Tenant != tenant {
			return nil, fmt.Errorf("model: resuming tenant %d after %q, which is none of its delivered records", tenant, after)
		}
		s.Start = r.Index + 1
	}
	m.subs = append(m.subs, s)
	return s, nil
}

// Close ends a subscription.
func (m *Model) Close(s *Sub) { s.Open = false }

// Open lists the open subscriptions.
func (m *Model) Open() []*Sub {
	var out []*Sub
	for _, s := range m.subs {
		if s.Open {
			out = append(out, s)
		}
	}
	return out
}

// Expected is what s must have delivered by now, in order.
func (m *Model) Expected(s *Sub) []*Record {
	l := m.logs[s.Tenant]
	if s.Start >= len(l) {
		return nil
	}
	return l[s.Start:]
}

// Pending is how many records s still owes.
func (m *Model) Pending(s *Sub) int { return len(m.Expected(s)) - s.Delivered }

// ErrUnexpected marks a delivery of another record than the one due: one
// of another tenant, one the stream should not carry, one again, or one
// out of order.
var ErrUnexpected = errors.New("not the record due")

// Frame is one negotiation.decided frame a stream delivered.
type Frame struct {
	Event     string // the SSE event field
	ID        string // the SSE id field
	HasID     bool
	Data      string         // the SSE data, as sent
	Env       map[string]any // the data as a JSON object (nil when it is not one)
	Workspace string         // the envelope's workspaceId
}

// Deliver checks the next frame s delivered against the record the model
// expects next, and binds the record's eventId and document on its first
// delivery.
func (m *Model) Deliver(s *Sub, f Frame) error {
	exp := m.Expected(s)
	if s.Delivered >= len(exp) {
		return fmt.Errorf("%w: the stream delivered %s after every record the model expects on it (%d): %s", ErrUnexpected, m.describe(s, f), len(exp), clip(f.Data))
	}
	want := exp[s.Delivered]
	if f.Env == nil {
		return fmt.Errorf("the stream delivered a negotiation.decided frame whose data is not a JSON object where the model expects %s: %s", want, clip(f.Data))
	}
	if f.Workspace != want.Workspace {
		return fmt.Errorf("%w: the stream delivered %s where the model expects %s: %s", ErrUnexpected, m.describe(s, f), want, clip(f.Data))
	}
	if err := m.shape(want, f); err != nil {
		return fmt.Errorf("%s: %v: %s", want, err, clip(f.Data))
	}
	id, _ := f.Env["eventId"].(string)
	if want.EventID == "" {
		if other, taken := m.ids[id]; taken {
			return fmt.Errorf("%s was delivered under eventId %q, which %s already has", want, id, other)
		}
		want.EventID, want.Doc = id, f.Env
		m.ids[id] = want
	} else {
		if id != want.EventID {
			return fmt.Errorf("%s was first delivered under eventId %q and now under %q", want, want.EventID, id)
		}
		if !reflect.DeepEqual(want.Doc, f.Env) {
			first, _ := json.Marshal(want.Doc)
			return fmt.Errorf("%s was delivered again altered: first %s, now %s", want, first, clip(f.Data))
		}
	}
	s.Delivered++
	return nil
}

// shape checks the envelope and payload against the record.
func (m *Model) shape(want *Record, f Frame) error {
	env := f.Env
	id, _ := env["eventId"].(string)
	switch {
	case id == "":
		return fmt.Errorf("the envelope has no eventId")
	case env["type"] != "negotiation.decided" || f.Event != "negotiation.decided":
		return fmt.Errorf("SSE event %q and type %v, want negotiation.decided for both", f.Event, env["type"])
	case !f.HasID || f.ID != id:
		return fmt.Errorf("SSE id %q differs from eventId %q", f.ID, id)
	case env["delivery"] != "durable":
		return fmt.Errorf("delivery %v, want durable", env["delivery"])
	}
	if _, ok := env["runId"]; ok {
		return fmt.Errorf("a host event carries a runId")
	}
	p, _ := env["payload"].(map[string]any)
	if p == nil {
		return fmt.Errorf("no payload object")
	}
	if p["protocol"] != want.Protocol {
		return fmt.Errorf("payload protocol %v, want %s", p["protocol"], want.Protocol)
	}
	if want.Named != "" && p["requested"] != want.Named {
		return fmt.Errorf("payload requested %v, want %q (the version the caller named)", p["requested"], want.Named)
	}
	if want.Answer.Accepted {
		if p["outcome"] != "accepted" || p["version"] != want.Answer.Version {
			return fmt.Errorf("payload outcome %v version %v, want accepted at %s (what the host answered)", p["outcome"], p["version"], want.Answer.Version)
		}
		return nil
	}
	if p["outcome"] != "refused" || p["reason"] != "below-floor" || p["floor"] != want.Floor {
		return fmt.Errorf("payload outcome %v reason %v floor %v, want refused, below-floor, %s", p["outcome"], p["reason"], p["floor"], want.Floor)
	}
	return nil
}

// describe names the record a frame is, as the model knows it.
func (m *Model) describe(s *Sub, f Frame) string {
	id, _ := f.Env["eventId"].(string)
	r := m.ws[f.Workspace]
	if r == nil && id != "" {
		r = m.ids[id]
	}
	switch {
	case r == nil:
		return fmt.Sprintf("a record the model does not know (workspace %q, eventId %q)", f.Workspace, id)
	case r.Tenant != s.Tenant:
		return fmt.Sprintf("another tenant's %s", r)
	case r.Index < s.Start:
		return fmt.Sprintf("%s, which precedes where the stream starts (record %d)", r, s.Start+1)
	case r.Index < s.Start+s.Delivered:
		return fmt.Sprintf("%s again", r)
	}
	return r.String()
}

func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
