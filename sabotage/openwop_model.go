package sabotage

import (
	"fmt"
	"strings"
	"sync"
)

// Hosts broken in ways only an order of operations shows: each rule below
// but the last lets every hand-written host-event scenario pass
// (sabotage/proofs/model_test.go shows it) and is caught by the model-based
// requirement openwop.model.host-events, which draws the orders.

// exchangeLog is what a rule knows of the host's history: every inbound
// exchange in the order the host received it (by its workspace and the
// caller's credential), when each stream opened in that order, and every
// record a stream carried (by eventId).
type exchangeLog struct {
	mu      sync.Mutex
	order   []logged             // kept for rules that need the host's order of exchanges
	pos     map[string]int       // workspace -> place in order
	opened  map[*Exchange]int    // stream -> len(order) when it opened
	wsOf    map[string]string    // eventId -> workspace
	raw     map[string][]byte    // workspace -> the record's frame, as first seen
	lastOn  map[string]*Exchange // eventId -> the last stream that carried it
	started map[*Exchange]bool   // streams that carried a record already
}

type logged struct{ key, ws string }

func newExchangeLog() *exchangeLog {
	return &exchangeLog{pos: map[string]int{}, opened: map[*Exchange]int{}, wsOf: map[string]string{},
		raw: map[string][]byte{}, lastOn: map[string]*Exchange{}, started: map[*Exchange]bool{}}
}

// see is the rule's Intercept: it logs, and answers nothing itself.
func (l *exchangeLog) see(x *Exchange) *Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	if isHostEvents(x) {
		l.opened[x] = len(l.order)
		return nil
	}
	if ws := x.Header.Get("OpenWOP-Workspace-Id"); ws != "" {
		if _, dup := l.pos[ws]; !dup {
			l.pos[ws] = len(l.order)
			l.order = append(l.order, logged{key: x.Header.Get("Authorization"), ws: ws})
		}
	}
	return nil
}

// note learns a record's workspace and frame; it returns the record's
// workspace and whether it was made before stream x opened.
func (l *exchangeLog) note(x *Exchange, raw []byte, r hostRecord) (ws string, replayed bool) {
	ws, _ = r.env["workspaceId"].(string)
	id := fmt.Sprint(r.env["eventId"])
	l.wsOf[id] = ws
	if _, ok := l.raw[ws]; !ok {
		l.raw[ws] = append([]byte(nil), raw...)
	}
	p, known := l.pos[ws]
	return ws, known && p < l.opened[x]
}

// crossProtocolSkip is a host that keeps a resume cursor per protocol and
// merges them wrongly: on a resumed stream, the first record made before
// the stream opened is lost when it is of another protocol than the record
// Last-Event-ID names (an MCP record after an A2A one, or the reverse).
func crossProtocolSkip() Rule {
	l := newExchangeLog()
	protocolOf := map[string]any{}
	return Rule{
		Intercept: l.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil {
				return [][]byte{raw}
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			_, replayed := l.note(x, raw, r)
			protocolOf[fmt.Sprint(r.env["eventId"])] = r.payload["protocol"]
			first := !l.started[x]
			l.started[x] = true
			if !first || !resumed(x) || !replayed {
				return [][]byte{raw}
			}
			named, ok := protocolOf[strings.TrimSpace(x.Header.Get("Last-Event-ID"))]
			if ok && named != r.payload["protocol"] {
				return nil
			}
			return [][]byte{raw}
		}),
	}
}

// replayWindow is a host whose new subscriptions replay only the three most
// recent of the tenant's records made before they opened.
func replayWindow(keep int) Rule {
	l := newExchangeLog()
	var dropped = map[*Exchange]int{}
	return Rule{
		Intercept: l.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil {
				return [][]byte{raw}
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			_, replayed := l.note(x, raw, r)
			if resumed(x) || !replayed {
				return [][]byte{raw}
			}
			key, before := x.Header.Get("Authorization"), 0
			for _, e := range l.order[:l.opened[x]] {
				if e.key == key {
					before++
				}
			}
			if dropped[x] < before-keep {
				dropped[x]++
				return nil
			}
			return [][]byte{raw}
		}),
	}
}

// stickyCursor is a host that resolves Last-Event-ID to the cursor of the
// stream that last delivered that event: resuming from an event a resumed
// stream delivered continues after what that stream had resumed from, so
// the records between are delivered again.
func stickyCursor() Rule {
	l := newExchangeLog()
	return Rule{
		Intercept: l.see,
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil {
				return [][]byte{raw}
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.note(x, raw, r)
			id := fmt.Sprint(r.env["eventId"])
			first := !l.started[x]
			l.started[x] = true
			var out [][]byte
			if first && resumed(x) {
				named := strings.TrimSpace(x.Header.Get("Last-Event-ID"))
				if prev := l.lastOn[named]; prev != nil && resumed(prev) {
					from, to := l.pos[l.wsOf[strings.TrimSpace(prev.Header.Get("Last-Event-ID"))]], l.pos[l.wsOf[named]]
					key := x.Header.Get("Authorization")
					for i := from + 1; i <= to && i < len(l.order); i++ {
						if e := l.order[i]; e.key == key && l.raw[e.ws] != nil {
							out = append(out, l.raw[e.ws])
						}
					}
				}
			}
			l.lastOn[id] = x
			return append(out, raw)
		}),
	}
}

func init() {
	const id = "openwop.model.host-events"
	openWOPRules = append(openWOPRules,
		withID(crossProtocolSkip(), id, "cross-protocol-resume",
			"keeps a resume cursor per protocol: a resumed stream loses the first earlier record when it is of another protocol than the record Last-Event-ID names"),
		withID(replayWindow(3), id, "replay-window",
			"replays to a new subscription only the three most recent of the tenant's records made before it opened"),
		withID(stickyCursor(), id, "sticky-cursor",
			"resolves Last-Event-ID to the cursor of the resumed stream that delivered that event, so a client resuming twice receives records again"),
		Rule{ID: id, Variant: "skips-one", Stream: resumeSkipsOne(),
			Broken: "resumes one record too far: the first record after the one named in Last-Event-ID is never delivered"},
	)
}

// inFlightMissed is a host that publishes a record to the streams open when
// its exchange arrives and appends it to the log a new or resumed stream
// replays only once the exchange is answered: a stream (new ones when fresh
// is true, resumed ones otherwise) that opens while the exchange is being
// answered receives the record neither way. Calls made one at a time never
// show it; only a subscription opened during an exchange does
// (openwop.model.concurrent-subscriptions).
func inFlightMissed(fresh bool) Rule {
	var mu sync.Mutex
	inFlight := map[string]bool{}             // workspaces of exchanges being answered
	missed := map[*Exchange]map[string]bool{} // stream -> workspaces in flight when it opened
	return Rule{
		Intercept: func(x *Exchange) *Response {
			mu.Lock()
			defer mu.Unlock()
			if isHostEvents(x) {
				if resumed(x) != fresh && len(inFlight) > 0 {
					m := map[string]bool{}
					for ws := range inFlight {
						m[ws] = true
					}
					missed[x] = m
				}
				return nil
			}
			if ws := x.Header.Get("OpenWOP-Workspace-Id"); ws != "" {
				inFlight[ws] = true
			}
			return nil
		},
		Response: func(x *Exchange, _ *Response) {
			mu.Lock()
			defer mu.Unlock()
			delete(inFlight, x.Header.Get("OpenWOP-Workspace-Id"))
		},
		Stream: hostRecords(func(x *Exchange, raw []byte, r hostRecord) [][]byte {
			if r.env == nil {
				return [][]byte{raw}
			}
			mu.Lock()
			defer mu.Unlock()
			if ws, _ := r.env["workspaceId"].(string); missed[x][ws] {
				return nil
			}
			return [][]byte{raw}
		}),
	}
}

func init() {
	const id = "openwop.model.concurrent-subscriptions"
	openWOPRules = append(openWOPRules,
		withID(inFlightMissed(true), id, "new-stream-misses-in-flight",
			"publishes a record live before appending it to the log replayed to new subscriptions: a new subscription opened while the exchange is being answered never receives it"),
		withID(inFlightMissed(false), id, "resume-misses-in-flight",
			"publishes a record live before appending it to the log a resume continues from: a stream resumed with Last-Event-ID while the exchange is being answered never receives it"),
	)
}
