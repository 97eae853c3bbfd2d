package checker

import (
	"fmt"
	"sort"
)

// Diagnostic codes. They are stable: a code once published keeps its
// meaning (docs/agl-binding.md §11.6 lists them).
const (
	EUnknownName        = "AGL-E0001"
	EUnknownDecl        = "AGL-E0002"
	EControl            = "AGL-E0003"
	EConsumed           = "AGL-E0101"
	EInputs             = "AGL-E0110"
	EAuthority          = "AGL-E0120"
	EEffect             = "AGL-E0130"
	EMissingPermit      = "AGL-E0140"
	EUnboundApproval    = "AGL-E0141"
	EState              = "AGL-E0201"
	EBoolean            = "AGL-E0202"
	EBranchOwnership    = "AGL-E0210"
	EStale              = "AGL-E0230"
	ELoopConsumes       = "AGL-E0310"
	ELoopInvariant      = "AGL-E0311"
	EUnsafeRetry        = "AGL-E0320"
	EUnhandled          = "AGL-E0330"
	EDeadCatch          = "AGL-E0331"
	ENonExhaustive      = "AGL-E0401"
	EArm                = "AGL-E0402"
	EForged             = "AGL-E0501"
	EFallback           = "AGL-E0520"
	EParallelCapture    = "AGL-E0601"
	EParallelMapDup     = "AGL-E0603"
	EProtectedRace      = "AGL-E0610"
	EToolSetCeiling     = "AGL-E0701"
	EInvalidDeclaration = "AGL-E0901"
)

// Codes lists every code with the remediation a diagnostic of it carries.
var Codes = map[string]string{
	EUnknownName:        "bind the name before this point; a name bound inside a branch, loop body or catch arm is not visible after it",
	EUnknownDecl:        "declare the operation, agent or protocol among the workflow's declarations",
	EControl:            "remove the statements after return, and keep return out of parallel scopes",
	EConsumed:           "a handle or permit is used once: use the handle the operation returned, or obtain a new permit through a new approval",
	EInputs:             "pass exactly the declared inputs, each of its declared type and resource kind",
	EAuthority:          "make the authority kind available to the workflow (a grant that covers it), or call an operation it already covers",
	EEffect:             "raise the workflow's effect ceiling, or call an operation whose effects it permits",
	EMissingPermit:      "propose the action, request approval, and dispatch in the Granted arm with the permit it carries",
	EUnboundApproval:    "dispatch exactly the action that was approved: the same operation, resources, revisions and arguments",
	EState:              "bring the resource to the required state through its protocol before this call",
	EBoolean:            "a Bool is not a tagged outcome and cannot narrow a resource: request approval and match its Granted outcome",
	EBranchOwnership:    "make every branch leave the resource owned in the same state, or finish it inside each branch",
	EStale:              "use the handle the edit returned, and propose and approve the new revision",
	ELoopConsumes:       "obtain the permit or handle inside the loop body, or move the consuming call out of the loop",
	ELoopInvariant:      "end the loop body with the resource in the state it had at loop entry, or move the transition out of the loop",
	EUnsafeRetry:        "retry only idempotent operations that consume no permit or handle; reconcile an uncertain write instead of retrying it",
	EUnhandled:          "match every outcome the call can have, or catch its failure outcomes in an enclosing try",
	EDeadCatch:          "remove the catch clause: nothing in the try body can have that outcome",
	ENonExhaustive:      "add an arm for every missing outcome",
	EArm:                "match only outcomes and fields the value can carry, each once",
	EForged:             "handles, permits, proposals and outcomes come only from trusted operations and the approval resolver; model and host output is ordinary data",
	EFallback:           "handle the failure explicitly: a fallback value cannot stand in for a permit or a handle",
	EParallelCapture:    "give each parallel branch its own handles and permits, and share only values it reads",
	EParallelMapDup:     "create the handle or obtain the permit inside the mapped body, one per item",
	EProtectedRace:      "run protected external writes outside the race; race only reads and model calls",
	EToolSetCeiling:     "remove the tool from the agent's tool set or raise the effect ceiling: every tool the agent may select counts, whatever its prompt says",
	EInvalidDeclaration: "fix the declaration",
}

// Related is another place a diagnostic concerns.
type Related struct {
	Span    Span   `json:"span"`
	Message string `json:"message"`
}

// Diagnostic is one reason a workflow does not check.
type Diagnostic struct {
	Code        string    `json:"code"`
	Message     string    `json:"message"`
	Span        Span      `json:"span"`
	Related     []Related `json:"related"`
	Required    string    `json:"required,omitempty"`
	Actual      string    `json:"actual,omitempty"`
	Remediation string    `json:"remediation"`
}

func (d Diagnostic) String() string { return d.Code + " at " + d.Span.String() + ": " + d.Message }

func rel(s Span, format string, a ...any) Related {
	return Related{Span: s, Message: fmt.Sprintf(format, a...)}
}

// sortDiagnostics orders diagnostics by place, then code and message, and
// drops exact repetitions, so that the same workflow always gets the same list.
func sortDiagnostics(ds []Diagnostic) []Diagnostic {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Span != b.Span {
			return a.Span.less(b.Span)
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
	var out []Diagnostic
	for _, d := range ds {
		if n := len(out); n > 0 && d.Code == out[n-1].Code && d.Span == out[n-1].Span && d.Message == out[n-1].Message {
			continue
		}
		out = append(out, d)
	}
	for i := range out {
		if out[i].Related == nil {
			out[i].Related = []Related{}
		}
	}
	return out
}
