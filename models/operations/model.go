// Package operations is an executable model of AGL exact-action permits and
// the operations they authorize, one execution at a time
// (agl-behavioral-contracts.txt §6.3 consumption and rejection, §7 the
// dispatcher's steps and budget charges, §8 the operation lifecycle and
// reconciliation, §9 admission budgets; parley's binding docs/agl-binding.md
// §3 endpoints, §4 denials, §5 state machines and §5.1 budgets): which
// answers a proposal, an approval decision, a dispatch, a revocation, a
// reconciliation and a read may get, and how many effects the destination
// sees.
//
// Where the text allows several answers the model returns the set: when
// several denials apply to one dispatch, any of them is allowed (the order
// of checks is the binding's, and hand-written scenarios hold hosts to it);
// a dispatch presenting a consumed permit whose operation is Unknown may say
// uncertain_completion or permit_consumed; a dispatch that changes the
// approved action may be refused by any check it fails.
package operations

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Operation states (agl-binding.md §5).
const (
	Pending             = "Pending"
	Completed           = "Completed"
	FailedNoEffect      = "FailedNoEffect"
	Unknown             = "Unknown"
	ReconciledCompleted = "ReconciledCompleted"
	ReconciledNoEffect  = "ReconciledNoEffect"
)

// Destination faults the suite arms at its fake destination before a send.
const (
	FaultNone   = ""
	FaultReject = "reject"            // refused before any effect: no effect
	FaultFail   = "fail_after_effect" // the effect, then a 5xx: uncertain
)

// Request states of an approval request.
const (
	NoRequest = ""
	Requested = "pending"
	Granted   = "granted"
	Denied    = "denied"
)

// Answer is one answer the model allows: a status and, for a refusal, its
// code ("" for a success).
type Answer struct {
	Status int
	Code   string
}

func (a Answer) String() string {
	if a.Code == "" {
		return fmt.Sprint(a.Status)
	}
	return fmt.Sprintf("%d %s", a.Status, a.Code)
}

// Refusals a dispatch may meet, with the binding's status (§4, hosts page §10).
var (
	GrantRevoked    = Answer{403, "grant_revoked"}
	PermitRevoked   = Answer{403, "permit_revoked"}
	BudgetExhausted = Answer{403, "budget_exhausted"}
	ProposalDiffers = Answer{403, "proposal_mismatch"}
	PermitConsumed  = Answer{409, "permit_consumed"}
	Uncertain       = Answer{409, "uncertain_completion"}
	InvalidState    = Answer{409, "invalid_protocol_state"}
	StaleRevision   = Answer{409, "stale_revision"}
	NotAwaiting     = Answer{409, "not_awaiting_reconciliation"}
	NotPending      = Answer{409, "request_not_pending"}
	OK              = Answer{200, ""}
)

// Action is one proposed action of the sequence: its draft, its proposal's
// operation, its approval request and its permit.
type Action struct {
	Index         int
	Op            string // the operation's state
	Request       string // the approval request's state
	Permit        bool   // a permit was minted
	PermitRevoked bool
	Consumed      bool // the permit was claimed
	Revision      int  // the draft's revision (1 when proposed)
	Edited        bool // the draft was edited after its proposal
}

// Model is one execution: its budget, its grant, its actions and the
// destination's armed fault and effects.
type Model struct {
	Budget       int // tool calls of the execution's root scope
	Used         int // tool calls charged (never refunded)
	GrantRevoked bool
	Fault        []string // armed destination faults, in order
	Effects      int
	Actions      []*Action
}

// New returns an execution with a budget of budget tool calls and nothing
// proposed.
func New(budget int) *Model { return &Model{Budget: budget} }

// ProposeAllowed is what a new proposal (its draft created, then
// proposed) may get: 201 while the grant is valid; after it was revoked,
// 201 or grant_revoked.
func (m *Model) ProposeAllowed() []Answer {
	if m.GrantRevoked {
		// The text has revocation stop a new dispatch (§6.3); whether a
		// proposal, which has no effect, is refused too it leaves open.
		return []Answer{{201, ""}, GrantRevoked}
	}
	return []Answer{{201, ""}}
}

// RequestAllowed is what an approval request for a's proposal may get:
// 201, or grant_revoked once the grant was revoked (the text leaves it
// open, as for a proposal).
func (m *Model) RequestAllowed() []Answer {
	if m.GrantRevoked {
		return []Answer{{201, ""}, GrantRevoked}
	}
	return []Answer{{201, ""}}
}

// Propose applies an accepted proposal: its operation is Pending.
func (m *Model) Propose() *Action {
	a := &Action{Index: len(m.Actions), Op: Pending, Revision: 1}
	m.Actions = append(m.Actions, a)
	return a
}

// RequestApproval: a pending request for the proposal (once per action in
// the sequences the driver draws).
func (m *Model) RequestApproval(a *Action) { a.Request = Requested }

// DecideAllowed is what a resolver's decision on a's request may get: 201
// with a permit for granted, 200 for denied, request_not_pending once it
// was decided.
func (m *Model) DecideAllowed(a *Action, grant bool) []Answer {
	if a.Request != Requested {
		return []Answer{NotPending}
	}
	if a.Edited {
		// An edit invalidated the pending request (binding §5).
		return []Answer{NotPending, StaleRevision}
	}
	if grant && m.GrantRevoked {
		return []Answer{{201, ""}, GrantRevoked}
	}
	if grant {
		return []Answer{{201, ""}}
	}
	return []Answer{OK}
}

// Decide applies an accepted decision.
func (m *Model) Decide(a *Action, grant bool) {
	if a.Request != Requested || a.Edited {
		return
	}
	if grant {
		a.Request, a.Permit = Granted, true
	} else {
		a.Request = Denied
	}
}

// consumedRefusals are the answers to a permit already claimed.
func consumedRefusals(a *Action) []Answer {
	out := []Answer{PermitConsumed, InvalidState}
	if a.Op == Unknown {
		out = append(out, Uncertain)
	}
	return out
}

// denials lists every denial that applies to a dispatch of a's approved
// action unchanged, with a's permit.
func (m *Model) denials(a *Action) []Answer {
	var out []Answer
	if m.GrantRevoked {
		out = append(out, GrantRevoked)
	}
	if a.Consumed {
		out = append(out, consumedRefusals(a)...)
	}
	if a.PermitRevoked {
		out = append(out, PermitRevoked)
	}
	if a.Edited && !a.Consumed {
		out = append(out, StaleRevision)
	}
	if m.Used >= m.Budget {
		out = append(out, BudgetExhausted)
	}
	return out
}

// DispatchAllowed is what a dispatch of a's approved action with its permit
// may get: a denial that applies, or, when none does, 200 with the state
// the armed fault gives (Completed, Unknown after an effect, FailedNoEffect
// before one).
func (m *Model) DispatchAllowed(a *Action) (denials []Answer, state string) {
	if d := m.denials(a); len(d) > 0 {
		return uniq(d), ""
	}
	switch m.nextFault() {
	case FaultFail:
		return nil, Unknown
	case FaultReject:
		return nil, FailedNoEffect
	}
	return nil, Completed
}

// Dispatch applies a dispatch the host claimed (answered 200): the permit
// is consumed, the budget charged, the armed fault spent and the effect
// counted.
func (m *Model) Dispatch(a *Action) {
	_, state := m.DispatchAllowed(a)
	if len(m.Fault) > 0 {
		m.Fault = m.Fault[1:]
	}
	a.Consumed, a.Op = true, state
	m.Used++
	if state != FailedNoEffect {
		m.Effects++
	}
}

// ChangedAllowed is what a dispatch presenting a's permit with the draft of
// another action b (a changed action) may get: a refusal, whichever check
// answers it (the draft is not the approved one, or not Authorized under
// this permit, or another denial of a's), and never an effect.
func (m *Model) ChangedAllowed(a, b *Action) []Answer {
	out := []Answer{ProposalDiffers, InvalidState, StaleRevision}
	out = append(out, m.denials(a)...)
	if b.Consumed {
		out = append(out, consumedRefusals(b)...)
	}
	return uniq(out)
}

func (m *Model) nextFault() string {
	if len(m.Fault) == 0 {
		return FaultNone
	}
	return m.Fault[0]
}

// Arm records a fault armed at the destination for its next send.
func (m *Model) Arm(fault string) { m.Fault = append(m.Fault, fault) }

// EditAllowed is what an edit of a's draft expecting its current revision
// may get: 200 with the next revision until the permit's claim moved the
// draft on, invalid_protocol_state after (binding §5).
func (m *Model) EditAllowed(a *Action) []Answer {
	if a.Consumed {
		return []Answer{InvalidState}
	}
	return []Answer{OK}
}

// Edit applies an accepted edit: the next revision, in Draft; the
// proposal's handle, its pending request and its permit are stale.
func (m *Model) Edit(a *Action) {
	if !a.Consumed {
		a.Revision++
		a.Edited = true
	}
}

// RevokePermit: the resolver's revocation of a's permit is answered 200
// (a revocation after the claim undoes nothing: binding hosts page §9).
func (m *Model) RevokePermit(a *Action) { a.PermitRevoked = true }

// RevokeGrant: the authority's revocation of the execution's grant.
func (m *Model) RevokeGrant() { m.GrantRevoked = true }

// Reconciliation methods.
const (
	Lookup        = "receiver_lookup"
	HumanEffect   = "human completed"
	HumanNoEffect = "human no_effect"
)

// ReconcileAllowed is what a reconciliation of a's operation may get: 200
// with the state it establishes for an Unknown operation, refused
// not_awaiting_reconciliation for any other. A receiver lookup finds the
// send, since every Unknown of the sequences is a send that took effect
// (fail_after_effect). Neither needs a valid permit or grant (§8).
func (m *Model) ReconcileAllowed(a *Action, method string) (refusal []Answer, state string) {
	if a.Op != Unknown {
		return []Answer{NotAwaiting}, ""
	}
	if method == HumanNoEffect {
		return nil, ReconciledNoEffect
	}
	return nil, ReconciledCompleted
}

// Reconcile applies an accepted reconciliation.
func (m *Model) Reconcile(a *Action, method string) {
	if _, state := m.ReconcileAllowed(a, method); state != "" {
		a.Op = state
	}
}

// PermitRead is what a read of a's permit must say.
type PermitRead struct{ Revoked, Consumed bool }

// ReadPermit is what a read of a's permit says now.
func (m *Model) ReadPermit(a *Action) PermitRead {
	return PermitRead{Revoked: a.PermitRevoked, Consumed: a.Consumed}
}

// ReadOperation is the state a read of a's operation says now, and whether
// it awaits reconciliation.
func (m *Model) ReadOperation(a *Action) (string, bool) { return a.Op, a.Op == Unknown }

// Contains reports whether got is among allowed.
func Contains(allowed []Answer, got Answer) bool { return slices.Contains(allowed, got) }

// Join renders a set of answers.
func Join(allowed []Answer) string {
	s := make([]string, len(allowed))
	for i, a := range allowed {
		s[i] = a.String()
	}
	return strings.Join(s, " or ")
}

func uniq(in []Answer) []Answer {
	seen := map[Answer]bool{}
	var out []Answer
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
