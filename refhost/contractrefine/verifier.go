package contractrefine

import (
	"fmt"
	"maps"
	"slices"
)

// Contract severities.
const (
	severityBlocking   = "blocking"
	severityRepairable = "repairable"
)

// Reasons. Every reason is "contract: <subreason>" with subreason in [a-z0-9_]+
// (tool-policy denials use the "policy: " prefix instead).
const (
	reasonPassed                 = "contract: passed"
	reasonSessionMetadataMissing = "contract: session_metadata_missing"
	reasonPlanShapeInvalid       = "contract: plan_shape_invalid"
	reasonCapabilityMismatch     = "contract: capability_mismatch"
	reasonZoneNotAllowed         = "contract: zone_not_allowed"
	reasonProvenanceMissing      = "contract: provenance_missing"
	reasonRollbackMissing        = "contract: rollback_missing"
	reasonEvidenceMissing        = "contract: evidence_missing"
	reasonRepairBudgetExhausted  = "contract: repair_budget_exhausted"
	reasonBindingNotFound        = "contract: binding_not_found"
	reasonBindingNotPass         = "contract: binding_not_pass"
	reasonBindingExpired         = "contract: binding_expired"
	reasonBindingKindMismatch    = "contract: binding_kind_mismatch"
	reasonPreflightRequired      = "contract: preflight_required"
	reasonToolNotAllowed         = "policy: tool_not_allowed"
	reasonToolAllowed            = "policy: allowed"
)

// verifier is the tracked ContractVerifier: pure, so safe for concurrent use.
type verifier struct {
	policyRef         string
	lockFingerprint   string // what it was constructed with; the host overrides it
	allowedZones      map[string]bool
	writeCapabilities map[string]bool
}

// verdict is the verifier's evaluation before the host composes an outcome
// (composition needs the repair budget, which is host state).
type verdict struct {
	results []ContractResult
	hints   []RepairHint
	// blocking and repairable are the reasons of the first failing contract
	// of each severity, "" when none failed.
	blocking   string
	repairable string
	// lockFingerprint is the verifier's own; it must never reach a decision.
	lockFingerprint string
}

// contract is one check. It returns a failure detail ("" on pass) and hints.
type contract struct {
	name     string
	severity string
	reason   string
	check    func(v *verifier, req *PreflightRequest) (detail string, hints []RepairHint)
}

// contracts run in this order; order fixes both contract_results and which
// failure's reason the decision carries.
var contracts = []contract{
	{"plan_shape", severityBlocking, reasonPlanShapeInvalid, checkPlanShape},
	{"capability_binding", severityBlocking, reasonCapabilityMismatch, checkCapabilityBinding},
	{"zone_policy", severityBlocking, reasonZoneNotAllowed, checkZonePolicy},
	{"provenance", severityRepairable, reasonProvenanceMissing, checkProvenance},
	{"rollback", severityRepairable, reasonRollbackMissing, checkRollback},
	{"evidence", severityRepairable, reasonEvidenceMissing, checkEvidence},
}

func (v *verifier) verify(req *PreflightRequest) verdict {
	out := verdict{lockFingerprint: v.lockFingerprint}
	// Without both budget keys the repair ladder cannot be bounded, so a
	// tracked verifier refuses before looking at anything else.
	if req.Actor.SessionID == "" || req.Intent.PlanHash == "" {
		out.results = []ContractResult{{
			Contract: "session_metadata", Outcome: "fail", Severity: severityBlocking,
			Detail: "actor.session_id and intent.plan_hash are both required",
		}}
		out.blocking = reasonSessionMetadataMissing
		return out
	}
	out.results = append(out.results, ContractResult{Contract: "session_metadata", Outcome: "pass", Severity: severityBlocking})
	for _, c := range contracts {
		detail, hints := c.check(v, req)
		r := ContractResult{Contract: c.name, Outcome: "pass", Severity: c.severity}
		if detail != "" {
			r.Outcome, r.Detail = "fail", detail
			switch {
			case c.severity == severityBlocking && out.blocking == "":
				out.blocking = c.reason
			case c.severity == severityRepairable && out.repairable == "":
				out.repairable = c.reason
			}
			out.hints = append(out.hints, hints...)
		}
		out.results = append(out.results, r)
	}
	return out
}

func checkPlanShape(_ *verifier, req *PreflightRequest) (string, []RepairHint) {
	if len(req.Plan) == 0 {
		return "plan is empty", nil
	}
	for i, s := range req.Plan {
		if s.Kind == "" {
			return fmt.Sprintf("plan[%d] has no kind", i), nil
		}
	}
	return "", nil
}

func checkCapabilityBinding(_ *verifier, req *PreflightRequest) (string, []RepairHint) {
	if req.Capability == "" {
		return "capability is empty", nil
	}
	for i, s := range req.Plan {
		if s.Kind != req.Capability {
			return fmt.Sprintf("plan[%d].kind %q is not the requested capability %q", i, s.Kind, req.Capability), nil
		}
	}
	return "", nil
}

func checkZonePolicy(v *verifier, req *PreflightRequest) (string, []RepairHint) {
	if z := req.Context.Zone; z != "" && !v.allowedZones[z] {
		return fmt.Sprintf("zone %q is not allowed", z), nil
	}
	return "", nil
}

func checkProvenance(_ *verifier, req *PreflightRequest) (string, []RepairHint) {
	var hints []RepairHint
	for i, s := range req.Plan {
		// Sorted keys keep the hints deterministic across identical requests.
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			if s.Provenance[k].Source == "" {
				hints = append(hints, RepairHint{
					Contract: "provenance",
					Path:     fmt.Sprintf("plan[%d].provenance.%s.source", i, k),
					Op:       "set",
					Value:    "operator",
				})
			}
		}
	}
	if len(hints) > 0 {
		return fmt.Sprintf("%d parameter(s) lack a provenance source", len(hints)), hints
	}
	return "", nil
}

func checkRollback(v *verifier, req *PreflightRequest) (string, []RepairHint) {
	if v.writeCapabilities[req.Capability] && req.Context.RollbackContract == "" {
		return fmt.Sprintf("write capability %q needs context.rollback_contract", req.Capability),
			[]RepairHint{{Contract: "rollback", Path: "context.rollback_contract", Op: "set", Value: "rb-required"}}
	}
	return "", nil
}

func checkEvidence(_ *verifier, req *PreflightRequest) (string, []RepairHint) {
	if !slices.Contains(req.Context.ExpectedEvidence, "audit_id") {
		return "context.expected_evidence lacks audit_id",
			[]RepairHint{{Contract: "evidence", Path: "context.expected_evidence", Op: "add", Value: "audit_id"}}
	}
	return "", nil
}
