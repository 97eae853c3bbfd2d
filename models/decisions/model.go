// Package decisions is an executable model of ContractRefine preflight
// decisions across the mode ladder (contractrefine-preflight.txt: "Mode
// ladder", POST and GET /v1/preflight, the repair ladder and its budget,
// "WAL event", the /v1/tool binding; the readings in
// docs/hosts/contractrefine.md §2 and §5 and docs/interpretations.md): which
// outcomes a request may get, the autonomy.preflight frame each decision
// leaves, what GET returns for an id, and what a tool call does in each
// mode (its status, whether its effect happens, the autonomy.decision
// frames it leaves).
//
// Where the text allows several answers the model returns the set: once a
// session and plan hash have spent their repair budget, the same repairable
// request may be answered with any outcome but repair_required; in advisory
// a call missing a preflight its bundle requires may or may not leave a
// deny frame (frames.go).
package decisions

import (
	"fmt"
	"slices"
	"strings"
)

// Outcomes.
const (
	Pass   = "pass"
	Deny   = "deny"
	Repair = "repair_required"
)

// Variants of the suite's reference request (docs/hosts/contractrefine.md §2.1).
const (
	VPass      = "pass"      // satisfies every contract
	VDeliver   = "deliver"   // a tool.deliver plan
	VRepair    = "repair"    // params without provenance
	VMismatch  = "mismatch"  // step kind differs from the capability
	VNoSession = "nosession" // without actor.session_id
	VNoHash    = "nohash"    // without intent.plan_hash
)

// Variants lists them.
var Variants = []string{VPass, VDeliver, VRepair, VMismatch, VNoSession, VNoHash}

// Request is one POST: a variant under a session and plan hash (indices
// into the sequence's own fresh ones).
type Request struct {
	Variant       string
	Session, Hash int
}

// Capability is what a decision of the request binds, when it passes.
func (r Request) Capability() string {
	if r.Variant == VDeliver {
		return "tool.deliver"
	}
	return "tool.echo"
}

// Decision is a decision the model knows, by its preflight_id.
type Decision struct {
	ID      string
	Request Request
	Outcome string
	Doc     any // the JSON document POST answered
}

// Modes of the ladder (runtime.contract_refine.mode, as resolved).
const (
	Disabled = "disabled"
	Advisory = "advisory"
	Enforce  = "enforce"
)

// Model is the host's decisions and repair budgets.
type Model struct {
	mode      string
	requires  []string // tool kinds the policy bundle requires a preflight for
	maxRepair int
	spent     map[[2]int]int
	byID      map[string]*Decision
	order     []*Decision
}

// New returns an enforce host with no decisions, whose repair budget is
// maxRepair repair_required answers per session and plan hash.
func New(maxRepair int) *Model { return NewIn(Enforce, maxRepair, nil) }

// NewIn returns a host in mode (as resolved) with no decisions, whose
// repair budget is maxRepair and whose policy bundle requires a preflight
// for the kinds in requires.
func NewIn(mode string, maxRepair int, requires []string) *Model {
	return &Model{mode: mode, requires: requires, maxRepair: maxRepair, spent: map[[2]int]int{}, byID: map[string]*Decision{}}
}

// Mode is the host's mode.
func (m *Model) Mode() string { return m.mode }

// Decides says whether POST and GET answer at all: a disabled host answers
// both 503 (the ladder's first row), whatever the body or id.
func (m *Model) Decides() bool { return m.mode != Disabled }

// Allowed is the set of outcomes the request may get now.
func (m *Model) Allowed(r Request) []string {
	switch r.Variant {
	case VPass, VDeliver:
		return []string{Pass}
	case VMismatch, VNoSession, VNoHash:
		return []string{Deny}
	}
	if m.spent[[2]int{r.Session, r.Hash}] < m.maxRepair {
		return []string{Repair}
	}
	return []string{Pass, Deny}
}

// Post checks a 200 decision against the model and records it.
func (m *Model) Post(r Request, id, outcome, reason string, doc any) error {
	allowed := m.Allowed(r)
	if !slices.Contains(allowed, outcome) {
		return fmt.Errorf("outcome %q; the model allows %s", outcome, strings.Join(allowed, " or "))
	}
	if (r.Variant == VNoSession || r.Variant == VNoHash) && reason != "contract: session_metadata_missing" {
		return fmt.Errorf("reason %q, want contract: session_metadata_missing", reason)
	}
	if id == "" {
		return fmt.Errorf("the decision names no preflight_id")
	}
	if prev, dup := m.byID[id]; dup {
		return fmt.Errorf("preflight_id %s was already issued for an earlier decision (%s)", id, prev.Request.Variant)
	}
	if outcome == Repair && r.Variant == VRepair {
		m.spent[[2]int{r.Session, r.Hash}]++
	}
	d := &Decision{ID: id, Request: r, Outcome: outcome, Doc: doc}
	m.byID[id] = d
	m.order = append(m.order, d)
	return nil
}

// Decisions lists the decisions made so far, in order.
func (m *Model) Decisions() []*Decision { return m.order }

// Lookup returns a decision by id.
func (m *Model) Lookup(id string) (*Decision, bool) { d, ok := m.byID[id]; return d, ok }

// Binds says whether the decision id binds a call of kind ("" or an
// unknown id binds nothing): only a pass binding that kind does (its
// expiry is not reached within a sequence).
func (m *Model) Binds(id, kind string) bool {
	d, ok := m.byID[id]
	return ok && d.Outcome == Pass && d.Request.Capability() == kind
}

// Runs says whether the host runs a call of kind whose header names id (""
// for no header); the policy allows every kind the model calls.
func (m *Model) Runs(id, kind string) bool { return m.Call(id, kind).Runs }
