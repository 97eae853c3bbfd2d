// Package subscriptions is a sequential model of the durable host-event
// logs of OpenWOP tenants as subscribers see them (openwop-rfc-0242.md §B.2
// a runless negotiation is a durable host event of the caller's tenant, §B.4
// an anonymous exchange reaches no tenant, §D the /host/events reads and the
// resume with Last-Event-ID; docs/interpretations.md, "Concurrent
// subscriptions"), against which a concurrent history of inbound exchanges
// and subscriptions is checked for linearizability with
// github.com/anishathalye/porcupine.
//
// The model: each tenant has one log. An authenticated inbound exchange
// appends its record to its caller's tenant's log; an anonymous one appends
// nothing. A subscription is one call from the moment it is requested to
// its cut (the moment the suite stops reading it): what it delivered up to
// the cut is, once each and in log order, exactly the tenant's log after its
// starting point (the whole log for a new subscription, what follows the
// record Last-Event-ID names for a resumed one) as it stands at one instant
// between its request and its cut. There must be one order of all calls,
// each taking effect within its interval, that explains every exchange and
// every subscription's deliveries: records of exchanges that completed
// before another began are logged in that order, and every subscriber of a
// tenant sees the same log.
package subscriptions

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kinds of call.
const (
	Record    = "record"
	Subscribe = "subscribe"
)

// Input is a call. Records are named by their workspace (each exchange
// names a fresh one, and its record carries it).
type Input struct {
	Kind   string
	Tenant int // the caller's tenant; -1 for an anonymous exchange
	// Record: the exchange's workspace and how it was made (for the drawing).
	Workspace string
	What      string
	// Subscribe: the record Last-Event-ID named, by its workspace ("" for a
	// new subscription).
	After string
}

// Output is what the host answered.
type Output struct {
	// Record: the answer, for the drawing only (other ids judge it).
	Answer string
	// Record: where the record stands in its tenant's log, as Check pins
	// it from what subscriptions delivered (set by Check, not by a driver):
	// pinned, Pos is its index; otherwise it stands at MinPos or later.
	Pinned      bool
	Pos, MinPos int
	// Subscribe: the workspaces of the records the stream delivered up to
	// its cut, in the order delivered.
	Delivered []string
}

// state is every tenant's log, each a list of workspaces joined by "\n"
// (comparable, so porcupine can cache states).
type state [2]string

func (s state) log(t int) []string {
	if s[t] == "" {
		return nil
	}
	return strings.Split(s[t], "\n")
}

// Tenants is how many tenants a history may name (0 and 1).
const Tenants = 2

// Model is the logs' sequential specification. Tenants' logs are
// independent, so a history is checked per tenant (porcupine's
// partitions); an anonymous exchange changes no log and joins none.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		parts := make([][]porcupine.Operation, Tenants)
		for _, op := range history {
			if t := op.Input.(Input).Tenant; t >= 0 && t < Tenants {
				parts[t] = append(parts[t], op)
			}
		}
		return parts
	},
	Init: func() any { return state{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(state), in.(Input), out.(Output)
		if i.Tenant < 0 || i.Tenant >= Tenants {
			// Anonymous: recorded nowhere; a subscription of no tenant is
			// never made.
			return i.Kind == Record, st
		}
		if i.Kind == Record {
			n := len(st.log(i.Tenant))
			if (o.Pinned && o.Pos != n) || n < o.MinPos {
				return false, st
			}
			if st[i.Tenant] == "" {
				st[i.Tenant] = i.Workspace
			} else {
				st[i.Tenant] += "\n" + i.Workspace
			}
			return true, st
		}
		return equal(o.Delivered, Due(st.log(i.Tenant), i.After)), st
	},
	DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
	DescribeState: func(s any) string {
		st := s.(state)
		return fmt.Sprintf("tenant 0: %d records; tenant 1: %d records", len(st.log(0)), len(st.log(1)))
	},
}

// Due is what a subscription starting after the record after (by its
// workspace; "" for none) must deliver of log; nil when log lacks it.
func Due(log []string, after string) []string {
	if after == "" {
		return log
	}
	for i, w := range log {
		if w == after {
			return log[i+1:]
		}
	}
	return nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Names gives records short names in a drawing: a workspace's name is the
// tenant's letter and its place in call order ("a3" the third exchange of
// tenant 0 called, "x1" the first anonymous one).
type Names map[string]string

// NamesOf names every record a history's exchanges made.
func NamesOf(history []porcupine.Operation) Names {
	h := sorted(history)
	n, count := Names{}, map[int]int{}
	for _, op := range h {
		i := op.Input.(Input)
		if i.Kind != Record {
			continue
		}
		count[i.Tenant]++
		letter := "x"
		if i.Tenant >= 0 {
			letter = string(rune('a' + i.Tenant))
		}
		n[i.Workspace] = fmt.Sprintf("%s%d", letter, count[i.Tenant])
	}
	return n
}

func (n Names) of(ws string) string {
	if s, ok := n[ws]; ok {
		return s
	}
	return "?" + ws
}

// Describe renders one call and its answer, naming records by workspace.
func Describe(i Input, o Output) string { return describe(nil, i, o) }

func describe(n Names, i Input, o Output) string {
	name := func(ws string) string {
		if n == nil {
			return ws
		}
		return n.of(ws)
	}
	who := "anonymous"
	if i.Tenant >= 0 {
		who = fmt.Sprintf("tenant %d", i.Tenant)
	}
	if i.Kind == Record {
		return fmt.Sprintf("%s %s → %s (record %s)", who, i.What, o.Answer, name(i.Workspace))
	}
	from := "new subscription"
	if i.After != "" {
		from = "resumed after " + name(i.After)
	}
	got := make([]string, len(o.Delivered))
	for k, ws := range o.Delivered {
		got[k] = name(ws)
	}
	return fmt.Sprintf("%s %s → delivered [%s]", who, from, strings.Join(got, " "))
}

// Check checks a history; ok is false when it is not linearizable (or the
// check ran out of time, which says so). drawing renders the history, one
// line per call in call order, with its interval, for a report.
//
// Before the search, every record a new subscription delivered is pinned
// to its place in that subscription's deliveries (the new subscription of
// its tenant that delivered the most): whatever order explains the history
// has the records that subscription delivered first in its log, in that
// order, and every other record after them, so pinning them loses no
// explanation and spares the search every other order of records (without
// it, a history that is not linearizable of a few dozen calls is not
// decided in seconds).
func Check(history []porcupine.Operation, timeout time.Duration) (ok bool, verdict string, drawing string) {
	res := porcupine.CheckOperationsTimeout(Model, pin(history), timeout)
	switch res {
	case porcupine.Ok:
		verdict = "linearizable"
	case porcupine.Illegal:
		verdict = "not linearizable: no order of the calls, each taking effect between its call and its answer (a subscription's: its cut), gives every answer and every stream's deliveries"
	default:
		verdict = "undecided within " + timeout.String()
	}
	return res == porcupine.Ok, verdict, Draw(history)
}

// pin returns a copy of history with every record's place pinned as Check
// explains.
func pin(history []porcupine.Operation) []porcupine.Operation {
	var ref [Tenants][]string
	for _, op := range history {
		i, o := op.Input.(Input), op.Output.(Output)
		if i.Kind == Subscribe && i.After == "" && i.Tenant >= 0 && i.Tenant < Tenants && len(o.Delivered) > len(ref[i.Tenant]) {
			ref[i.Tenant] = o.Delivered
		}
	}
	out := append([]porcupine.Operation(nil), history...)
	for k, op := range out {
		i, o := op.Input.(Input), op.Output.(Output)
		if i.Kind != Record || i.Tenant < 0 || i.Tenant >= Tenants {
			continue
		}
		o.Pinned, o.Pos, o.MinPos = false, 0, len(ref[i.Tenant])
		for p, ws := range ref[i.Tenant] {
			if ws == i.Workspace {
				o.Pinned, o.Pos, o.MinPos = true, p, 0
				break
			}
		}
		out[k].Output = o
	}
	return out
}

func sorted(history []porcupine.Operation) []porcupine.Operation {
	h := append([]porcupine.Operation(nil), history...)
	sort.SliceStable(h, func(a, b int) bool { return h[a].Call < h[b].Call })
	return h
}

// Draw renders a history as a timeline: per call its client, interval (µs
// from the first call) and answer, ordered by call time; records are named
// as NamesOf names them.
func Draw(history []porcupine.Operation) string {
	h, n := sorted(history), NamesOf(history)
	var t0 int64
	if len(h) > 0 {
		t0 = h[0].Call
	}
	var b strings.Builder
	for _, op := range h {
		fmt.Fprintf(&b, "  client %2d [%8dµs … %8dµs] %s\n", op.ClientId, (op.Call-t0)/1000, (op.Return-t0)/1000, describe(n, op.Input.(Input), op.Output.(Output)))
	}
	return b.String()
}
