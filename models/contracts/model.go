// Package contracts is an executable model of AGTP RCNS contracts, written
// from agtp-rcns.txt ("Tier C Resolution", "The Four-Lock Dispatcher
// Gate", "Delivery Modes", "Contract Scoping and Lifecycle", "Headers and
// Rate Limiting") and agtp-wire-notes.md (§3, §7), with the readings of
// docs/interpretations.md: which answers a host may give an opted-in
// request through the gate, a plain request the resolver answers, a
// presented contract, SUSPEND and REVOKE target=contract, an idempotent
// replay, and what the clock passing every contract's lifetime leaves.
//
// Where the texts allow several answers the model returns the set (the
// GUIDE's fairness rule): a host is wrong only when it gives none of them.
package contracts

import (
	"fmt"
	"slices"
	"strings"
)

// Delivery modes.
const (
	ConfirmFirst = "confirm-first"
	Optimistic   = "optimistic"
)

// The agents of a sequence. A0 and A1 are negotiators (every lock open),
// fresh for the sequence; the others are the run's, shared by its
// sequences.
const (
	A0       = 0 // tier 1, rooms:*, rcns:negotiate
	A1       = 1 // the same class
	Tier3    = 2 // tier 3 (below min_trust_tier 2), rooms:*, rcns:negotiate
	NoGrant  = 3 // tier 1, rooms:* (rcns:negotiate not granted)
	Operator = 4 // tier 1, inspect:all
)

// Agents names them for a trace.
var Agents = []string{"agent 0", "agent 1", "the tier-3 agent", "the agent without rcns:negotiate", "the operator"}

// Pairs: two places a recipe composes, and one nothing composes.
const (
	Room0 = 0
	Room1 = 1
	Desk  = 2
)

// Pairs names them for a trace.
var Pairs = []string{"BOOK room 0", "BOOK room 1", "BOOK desk"}

// Kinds of operation.
const (
	Gate      = "gate"      // an opted-in request presenting nothing
	Unclaimed = "unclaimed" // the same, its Authority-Scope claim leaving rcns:negotiate out
	Replay    = "replay"    // an opted-in request repeating an Idempotency-Key of the agent's
	Plain     = "plain"     // no opt-in, nothing presented: the resolver answers
	Present   = "present"   // Contract-Synthesized names a contract (or an id never issued)
	Suspend   = "suspend"   // SUSPEND synthesis_id
	Revoke    = "revoke"    // REVOKE target=contract
	Expire    = "expire"    // the host's clock passes every contract's lifetime (clock seam)
)

// Op is one operation.
type Op struct {
	Kind  string
	Agent int
	Pair  int
	// Contract is the contract presented, suspended or revoked ("" for an
	// id the host never issued).
	Contract string
	// OptIn adds Allow-RCNS: true to a presentation.
	OptIn bool
	// Key is a gate request's Idempotency-Key (0 or 1; -1 none).
	Key int
}

// Answer is what the host answered, as the model reads it.
type Answer struct {
	Status int
	Reason string // the refusal's reason word, if any
	Scope  string // the scope a refusal names (429: rcns)
	// Contract is the synthesis_id the answer names: a 461's preview, a
	// success's Contract-Synthesized (or Attribution-Record synthesis_id).
	Contract string
}

func (a Answer) String() string {
	s := fmt.Sprint(a.Status)
	if a.Reason != "" {
		s += " " + a.Reason
	}
	if a.Contract != "" {
		s += " naming " + a.Contract
	}
	return s
}

// States of a contract.
type State int

// The states.
const (
	Pending  State = iota // previewed by a 461, not yet accepted
	Active                // accepted, or issued by an optimistic synthesis
	Released              // released by its originator (SUSPEND)
	Revoked               // revoked (REVOKE target=contract)
	Expired               // its lifetime passed
)

func (s State) String() string {
	return [...]string{"pending", "active", "released", "revoked", "expired"}[s]
}

func (s State) live() bool { return s == Pending || s == Active }

// Contract is a contract the host issued.
type Contract struct {
	ID    string
	Label string // c1, c2, ... in issue order
	Agent int
	Pair  int
	State State
	// Said464 is set once a presentation was answered 464
	// contract-revoked: the runtime may have forgotten it since (404).
	Said464 bool
}

type cached struct {
	pair    int
	first   Answer
	binding bool // the first answer must come back as it was
}

// Model is the host's contracts, as one sequence sees them.
type Model struct {
	mode    string
	ceiling int
	byID    map[string]*Contract
	order   []*Contract
	evals   [2]int // gate evaluations A0 and A1 may have been counted for
	keys    map[[2]int]*cached
}

// New returns a host with no contracts of the sequence's agents, in mode,
// whose gate ceiling is ceiling evaluations a minute per agent.
func New(mode string, ceiling int) *Model {
	return &Model{mode: mode, ceiling: ceiling, byID: map[string]*Contract{}, keys: map[[2]int]*cached{}}
}

// Contracts lists the contracts issued so far, in order.
func (m *Model) Contracts() []*Contract { return m.order }

// Lookup returns a contract by synthesis_id.
func (m *Model) Lookup(id string) (*Contract, bool) { c, ok := m.byID[id]; return c, ok }

// Label names a synthesis_id in a trace.
func (m *Model) Label(id string) string {
	if c, ok := m.byID[id]; ok {
		return c.Label
	}
	if id == "" {
		return "none"
	}
	return "an id never issued"
}

// KeyUsed reports whether agent already sent Idempotency-Key key, and for
// which pair.
func (m *Model) KeyUsed(agent, key int) (int, bool) {
	c, ok := m.keys[[2]int{agent, key}]
	if !ok {
		return 0, false
	}
	return c.pair, true
}

// Expect is one answer the model allows.
type Expect struct {
	Status  int      // 200 stands for any 2xx, 400 for any 4xx
	Reasons []string // one of these reasons (none: not read)
	Scope   string   // the scope the refusal names
	Under   []string // a 461 or success names one of these contracts
	Fresh   bool     // ... or a synthesis_id never issued
	Same    *Answer  // exactly this answer (an idempotent replay)
	then    func(a Answer)
}

func (e Expect) String() string {
	if e.Same != nil {
		return "the first answer again (" + e.Same.String() + ")"
	}
	s := fmt.Sprint(e.Status)
	switch e.Status {
	case 200:
		s = "2xx"
	case 400:
		s = "4xx"
	}
	if len(e.Reasons) > 0 {
		s += " " + strings.Join(e.Reasons, "|")
	}
	if e.Scope != "" {
		s += " scope " + e.Scope
	}
	var under []string
	if e.Fresh {
		under = append(under, "a new contract")
	}
	under = append(under, e.Under...)
	if len(under) > 0 {
		s += " naming " + strings.Join(under, " or ")
	}
	return s
}

func (m *Model) match(e Expect, a Answer) bool {
	if e.Same != nil {
		return a.Status == e.Same.Status && a.Reason == e.Same.Reason && a.Contract == e.Same.Contract
	}
	switch e.Status {
	case 200:
		if a.Status < 200 || a.Status > 299 {
			return false
		}
	case 400:
		if a.Status < 400 || a.Status > 499 {
			return false
		}
	default:
		if a.Status != e.Status {
			return false
		}
	}
	if len(e.Reasons) > 0 && !slices.Contains(e.Reasons, a.Reason) {
		return false
	}
	if e.Scope != "" && a.Scope != e.Scope {
		return false
	}
	if e.Fresh || len(e.Under) > 0 {
		if a.Contract == "" {
			return false
		}
		if _, known := m.byID[a.Contract]; !known {
			return e.Fresh // a new synthesis_id is one never issued before, to anyone
		}
		return slices.Contains(e.Under, m.Label(a.Contract))
	}
	return true
}

// labels names contracts for an Expect.
func labels(cs []*Contract) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Label
	}
	return out
}

func (m *Model) held(agent, pair int, states ...State) []*Contract {
	var out []*Contract
	for _, c := range m.order {
		if c.Agent == agent && c.Pair == pair && slices.Contains(states, c.State) {
			out = append(out, c)
		}
	}
	return out
}

func (m *Model) heldByOthers(agent, pair int) bool {
	for _, c := range m.order {
		if c.Agent != agent && c.Pair == pair && c.State.live() {
			return true
		}
	}
	return false
}

// issue records a contract the host issued.
func (m *Model) issue(id string, agent, pair int, s State) {
	c := &Contract{ID: id, Label: fmt.Sprintf("c%d", len(m.order)+1), Agent: agent, Pair: pair, State: s}
	m.byID[id] = c
	m.order = append(m.order, c)
}

// rateLimited is the 429 a gate request may get: only once the agent may
// have had the ceiling's evaluations counted (every opted-in request and
// every unserved plain request is counted as one, an upper bound: the
// window's shape, whether a refusal or a replay counts, and whether the
// window follows the clock seam are the host's). The run's shared agents
// may always be at their ceiling.
func (m *Model) rateLimited(agent int) []Expect {
	if agent > A1 || m.evals[agent] >= m.ceiling {
		return []Expect{{Status: 429, Scope: "rcns"}}
	}
	return nil
}

func (m *Model) count(agent int) {
	if agent <= A1 {
		m.evals[agent]++
	}
}

// Allowed is the set of answers op may get now; each carries the change
// the answer makes.
func (m *Model) Allowed(op Op) []Expect {
	switch op.Kind {
	case Gate:
		if op.Key >= 0 {
			if _, used := m.keys[[2]int{op.Agent, op.Key}]; used {
				return m.replay(op)
			}
		}
		return m.gate(op)
	case Replay:
		return m.replay(op)
	case Unclaimed:
		// Lock 3 closed by the claim; the agent's own contract for the
		// pair may still serve it (the resolver answers before the gate).
		return append(m.rateLimited(op.Agent), append(m.resolved(op.Agent, op.Pair), Expect{Status: 262, Reasons: []string{"scope-required"}})...)
	case Plain:
		return m.plain(op)
	case Present:
		return m.present(op)
	case Suspend:
		return m.suspend(op)
	case Revoke:
		return m.revoke(op)
	case Expire:
		return []Expect{{Status: 200, then: func(Answer) {
			for _, c := range m.order {
				if c.State.live() {
					c.State = Expired
				}
			}
			for _, k := range m.keys {
				k.binding = false // an idempotency cache may keep its entries no longer
			}
		}}}
	}
	panic("contracts: unknown operation " + op.Kind)
}

func (m *Model) gate(op Op) []Expect {
	out := m.rateLimited(op.Agent)
	switch {
	case op.Agent == Tier3:
		return append(out, Expect{Status: 464, Reasons: []string{"trust-tier-insufficient"}})
	case op.Agent == NoGrant:
		return append(out, Expect{Status: 455, Reasons: []string{"scope-exceeded"}})
	case op.Pair == Desk:
		return append(out, Expect{Status: 464, Reasons: []string{"composition-impossible"}})
	}
	agent, pair := op.Agent, op.Pair
	if m.mode == Optimistic {
		// Synthesized and executed inline: a success naming its new
		// contract; or the agent's own active contract for the pair serves
		// it (the resolver answers before the gate).
		return append(out, Expect{Status: 200, Fresh: true, Under: labels(m.held(agent, pair, Active)), then: func(a Answer) {
			if _, known := m.byID[a.Contract]; !known {
				m.issue(a.Contract, agent, pair, Active)
			}
		}})
	}
	// Confirm-first: a 461 previewing a new contract (or again one the
	// agent holds for the pair); or served under the agent's own contract.
	live := labels(m.held(agent, pair, Pending, Active))
	return append(append(out,
		Expect{Status: 461, Fresh: true, Under: live, then: func(a Answer) {
			if _, known := m.byID[a.Contract]; !known {
				m.issue(a.Contract, agent, pair, Pending)
			}
		}}), m.resolved(agent, pair)...)
}

// resolved is a success under one of the agent's own live contracts for
// the pair, when it holds one: the resolver may answer an opted-in request
// before the gate does.
func (m *Model) resolved(agent, pair int) []Expect {
	live := labels(m.held(agent, pair, Pending, Active))
	if len(live) == 0 {
		return nil
	}
	return []Expect{{Status: 200, Under: live, then: func(a Answer) { m.byID[a.Contract].State = Active }}}
}

// replay is an opted-in request repeating a key the agent sent: the cached
// answer, exactly; when the first answer bound nothing (a refusal) or the
// clock has passed every lifetime since, the cache may also have let it go
// and the request is evaluated again.
func (m *Model) replay(op Op) []Expect {
	k, ok := m.keys[[2]int{op.Agent, op.Key}]
	if !ok {
		return m.gate(op)
	}
	first := k.first
	out := []Expect{{Same: &first}}
	if !k.binding {
		out = append(out, m.gate(Op{Kind: Gate, Agent: op.Agent, Pair: k.pair, Key: -1})...)
	}
	return out
}

func (m *Model) plain(op Op) []Expect {
	agent, pair := op.Agent, op.Pair
	active := m.held(agent, pair, Active)
	pending := m.held(agent, pair, Pending)
	serve := Expect{Status: 200, Under: labels(append(active, pending...)), then: func(a Answer) { m.byID[a.Contract].State = Active }}
	if len(active) > 0 {
		return []Expect{serve}
	}
	var out []Expect
	if len(pending) > 0 {
		// Whether a previewed contract not yet accepted resolves is not
		// said: served under it or refused.
		out = append(out, serve)
	}
	out = append(out, m.rateLimited(agent)...)
	refusal := []Expect{{Status: 404}, {Status: 405}}
	if m.heldByOthers(agent, pair) {
		refusal = append(refusal, Expect{Status: 464, Reasons: []string{"contract-not-yours"}})
	}
	return append(out, refusal...)
}

func (m *Model) present(op Op) []Expect {
	c, ok := m.byID[op.Contract]
	if !ok {
		return []Expect{{Status: 404}}
	}
	owner := c.Agent == op.Agent
	mark := func(a Answer) {
		if a.Status == 464 && a.Reason == "contract-revoked" {
			c.Said464 = true
		}
	}
	switch {
	case c.State.live() && owner:
		return []Expect{{Status: 200, Under: []string{c.Label}, then: func(Answer) { c.State = Active }}}
	case c.State.live():
		return []Expect{{Status: 464, Reasons: []string{"contract-not-yours"}}}
	}
	reasons := []string{"contract-revoked"}
	if !owner {
		reasons = append(reasons, "contract-not-yours")
	}
	out := []Expect{{Status: 464, Reasons: reasons, then: mark}}
	if c.State == Released || c.Said464 {
		out = append(out, Expect{Status: 404})
	}
	return out
}

func (m *Model) suspend(op Op) []Expect {
	c, ok := m.byID[op.Contract]
	if !ok {
		return []Expect{{Status: 400}}
	}
	owner := c.Agent == op.Agent
	release := func(Answer) { c.State = Released }
	switch {
	case owner && c.State == Active:
		return []Expect{{Status: 200, then: release}}
	case owner && c.State == Pending:
		// Releasing a preview not yet accepted: taken, or refused.
		return []Expect{{Status: 200, then: release}, {Status: 400}}
	case owner:
		return []Expect{{Status: 200}, {Status: 400}}
	case c.State.live():
		return []Expect{{Status: 403}}
	}
	return []Expect{{Status: 400}}
}

func (m *Model) revoke(op Op) []Expect {
	c, ok := m.byID[op.Contract]
	if !ok {
		return []Expect{{Status: 400}}
	}
	if op.Agent == c.Agent || op.Agent == Operator {
		if c.State.live() {
			return []Expect{{Status: 200, then: func(Answer) { c.State = Revoked }}}
		}
		return []Expect{{Status: 200}, {Status: 400}}
	}
	if c.State.live() {
		return []Expect{{Status: 403}, {Status: 262}, {Status: 455}}
	}
	return []Expect{{Status: 400}, {Status: 262}}
}

// Apply checks the host's answer to op against the model and makes the
// change it makes; an answer outside the set is an error naming the set.
func (m *Model) Apply(op Op, a Answer) error {
	allowed := m.Allowed(op)
	var hit *Expect
	for i := range allowed {
		if m.match(allowed[i], a) {
			hit = &allowed[i]
			break
		}
	}
	if hit == nil {
		want := make([]string, len(allowed))
		for i, e := range allowed {
			want[i] = e.String()
		}
		return fmt.Errorf("answered %s; the model allows %s", m.Describe(a), strings.Join(want, ", or "))
	}
	switch op.Kind {
	case Gate, Replay, Unclaimed:
		m.count(op.Agent)
	case Plain:
		if a.Status < 200 || a.Status > 299 {
			m.count(op.Agent)
		}
	}
	if hit.then != nil {
		hit.then(a)
	}
	binds := a.Status == 461 || (a.Status >= 200 && a.Status < 300)
	if (op.Kind == Gate || op.Kind == Replay) && op.Key >= 0 {
		k, used := m.keys[[2]int{op.Agent, op.Key}]
		switch {
		case !used && op.Kind == Gate:
			m.keys[[2]int{op.Agent, op.Key}] = &cached{pair: op.Pair, first: a, binding: binds}
		case used && hit.Same == nil:
			// The cache had let the first answer go and the request was
			// evaluated again: what the host answered now is what it
			// keeps for the key, and what a later replay must get back.
			k.first, k.binding = a, binds
		}
	}
	return nil
}

// Describe names an answer in the model's terms (contracts by label).
func (m *Model) Describe(a Answer) string {
	s := fmt.Sprint(a.Status)
	if a.Reason != "" {
		s += " " + a.Reason
	}
	if a.Scope != "" {
		s += " scope " + a.Scope
	}
	if a.Contract != "" {
		if c, ok := m.byID[a.Contract]; ok {
			s += fmt.Sprintf(" naming %s (%s's, %s)", c.Label, Agents[c.Agent], c.State)
		} else {
			s += " naming a new contract"
		}
	}
	return s
}
