package sabotage

import (
	"net/http"
	"strings"
	"sync"
)

// OpenWOP rules for the witnesses added for issue 20: tenant isolation
// broken only on the paths a live stream does not take (a new
// subscription's replay, a reconnect naming another tenant's eventId), and
// a legacy record without requested refused on replay.

func init() { openWOPRules = append(openWOPRules, openWOPWitnessRules...) }

var openWOPWitnessRules = []Rule{
	replayLeak("openwop.requirement.0242.inbound.recorded", "a2a"),
	replayLeak("openwop.requirement.0242.inbound.recorded.mcp", "mcp"),
	foreignResume("openwop.requirement.0242.inbound.recorded", "a2a"),
	foreignResume("openwop.requirement.0242.inbound.recorded.mcp", "mcp"),
	{
		ID:      "openwop.rfc0242.compatibility.record-without-requested-read",
		Variant: "replay-drops",
		Broken:  "skips, on replay, every host event whose payload has no `requested` (a record written before the field existed)",
		Stream: hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
			if _, ok := h.payload["requested"]; h.payload != nil && !ok {
				return nil
			}
			return [][]byte{raw}
		}),
	},
	{
		ID:      "openwop.rfc0242.compatibility.record-without-requested-read",
		Variant: "replay-invents-requested",
		Broken:  "fills in, on replay, a `requested` that a record written before the field existed never had (its version, else its floor)",
		Stream: hostRecords(func(_ *Exchange, raw []byte, h hostRecord) [][]byte {
			if _, ok := h.payload["requested"]; h.payload == nil || ok {
				return [][]byte{raw}
			}
			if v, ok := h.payload["version"]; ok {
				h.payload["requested"] = v
			} else {
				h.payload["requested"] = h.payload["floor"]
			}
			return [][]byte{withEnvelope(h)}
		}),
	},
	{
		ID:      "openwop.rfc0242.compatibility.record-without-requested-read",
		Variant: "poll-refuses",
		Broken:  "answers 500 to a poll of a run's log that holds a negotiation.decided record without `requested`",
		Response: func(x *Exchange, r *Response) {
			if !isRunPoll(x) || r.Status != http.StatusOK {
				return
			}
			evs, _ := decodeUseNumber(r.Body)["events"].([]any)
			for _, e := range evs {
				ev, _ := e.(map[string]any)
				p, _ := ev["payload"].(map[string]any)
				if _, ok := p["requested"]; p != nil && ev["type"] == "negotiation.decided" && !ok {
					r.Status = http.StatusInternalServerError
					r.Header.Set("Content-Type", "application/json")
					r.SetJSON(map[string]any{"error": "invalid_record", "message": "negotiation.decided without requested"})
					return
				}
			}
		},
	},
}

// hostLog is what a broken host's whole log looks like through the proxy:
// every record any tenant's stream delivered, in the order first seen, per
// host, with the credential of the stream that carried it. A stream's
// opening is noted (Intercept) with how long the log was then, so that
// only records made before it opened are replayed into it.
type hostLog struct {
	protocol string
	mu       sync.Mutex
	entries  map[string][]logEntry // upstream -> records
	ids      map[string]bool       // upstream + eventId seen
	opened   map[*Exchange]int     // stream -> log length when it opened
	done     map[*Exchange]bool    // streams already given their leak
}

type logEntry struct {
	key, id string
	frame   []byte
}

func newHostLog(protocol string) *hostLog {
	return &hostLog{protocol: protocol, entries: map[string][]logEntry{}, ids: map[string]bool{},
		opened: map[*Exchange]int{}, done: map[*Exchange]bool{}}
}

func (l *hostLog) intercept(x *Exchange) *Response {
	if isHostEvents(x) {
		l.mu.Lock()
		l.opened[x] = len(l.entries[x.Upstream])
		l.mu.Unlock()
	}
	return nil
}

// stream logs each record of the protocol the host sends, and, at a
// stream's first frame, asks leak which earlier records to send first.
func (l *hostLog) stream(leak func(x *Exchange, before []logEntry) []logEntry) func(x *Exchange, frame []byte) [][]byte {
	return func(x *Exchange, frame []byte) [][]byte {
		if !isHostEvents(x) {
			return [][]byte{frame}
		}
		key := x.Header.Get("Authorization")
		f := parseSSE(frame)
		env := decodeUseNumber([]byte(f.data))
		p, _ := env["payload"].(map[string]any)
		l.mu.Lock()
		defer l.mu.Unlock()
		var out [][]byte
		if !l.done[x] {
			l.done[x] = true
			n, ok := l.opened[x]
			if ok {
				for _, e := range leak(x, l.entries[x.Upstream][:n]) {
					out = append(out, e.frame)
				}
			}
		}
		if id := f.id; !f.comment && p != nil && p["protocol"] == l.protocol && id != "" && !l.ids[x.Upstream+"\x00"+id] {
			l.ids[x.Upstream+"\x00"+id] = true
			l.entries[x.Upstream] = append(l.entries[x.Upstream], logEntry{key: key, id: id, frame: append([]byte(nil), frame...)})
		}
		return append(out, frame)
	}
}

// replayLeak is a host whose new subscriptions (no Last-Event-ID) replay the
// whole host's earlier records of the protocol, not only the tenant's; its
// live delivery and its resumes are filtered as they should be.
func replayLeak(id, protocol string) Rule {
	l := newHostLog(protocol)
	return Rule{
		ID:        id,
		Variant:   "replay-unfiltered",
		Broken:    "replays to a new subscription (no Last-Event-ID) every tenant's earlier " + strings.ToUpper(protocol) + " records, not only its own; live delivery and resumes stay filtered",
		Intercept: l.intercept,
		Stream: l.stream(func(x *Exchange, before []logEntry) []logEntry {
			if x.Header.Get("Last-Event-ID") != "" {
				return nil
			}
			var out []logEntry
			for _, e := range before {
				if e.key != x.Header.Get("Authorization") {
					out = append(out, e)
				}
			}
			return out
		}),
	}
}

// foreignResume is a host that resolves Last-Event-ID in the whole log and
// resumes the stream of the tenant whose record it names: a reconnect
// naming another tenant's eventId is sent that tenant's later records. A
// resume with one's own eventId, and new subscriptions, are served right.
func foreignResume(id, protocol string) Rule {
	l := newHostLog(protocol)
	return Rule{
		ID:        id,
		Variant:   "foreign-resume",
		Broken:    "resolves a Last-Event-ID naming another tenant's " + strings.ToUpper(protocol) + " record in that tenant's log, and sends the reconnecting subscriber that tenant's later records",
		Intercept: l.intercept,
		Stream: l.stream(func(x *Exchange, before []logEntry) []logEntry {
			last := x.Header.Get("Last-Event-ID")
			if last == "" {
				return nil
			}
			owner, at := "", -1
			for i, e := range before {
				if e.id == last {
					owner, at = e.key, i
				}
			}
			if at < 0 || owner == x.Header.Get("Authorization") {
				return nil
			}
			var out []logEntry
			for _, e := range before[at+1:] {
				if e.key == owner {
					out = append(out, e)
				}
			}
			return out
		}),
	}
}
