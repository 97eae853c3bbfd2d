package contractrefine

import "encoding/json"

// PreflightRequest is the body of POST /v1/preflight.
type PreflightRequest struct {
	Intent     Intent      `json:"intent"`
	Actor      Actor       `json:"actor"`
	Capability string      `json:"capability"`
	Plan       []PlanStep  `json:"plan"`
	Context    PlanContext `json:"context"`
}

// Intent describes what the plan is for; PlanHash keys the repair budget.
type Intent struct {
	Kind        string `json:"kind,omitempty"`
	Description string `json:"description,omitempty"`
	PlanHash    string `json:"plan_hash,omitempty"`
}

// Actor identifies the caller; SessionID keys the repair budget.
type Actor struct {
	NodeID    string `json:"node_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// PlanStep is one intended tool call.
type PlanStep struct {
	Kind       string                     `json:"kind"`
	Params     map[string]json.RawMessage `json:"params,omitempty"`
	Provenance map[string]Provenance      `json:"provenance,omitempty"`
}

// Provenance says where a parameter value came from.
type Provenance struct {
	Source string `json:"source"`
}

// PlanContext carries the execution context the contracts inspect.
type PlanContext struct {
	Zone             string   `json:"zone,omitempty"`
	Environment      string   `json:"environment,omitempty"`
	RollbackContract string   `json:"rollback_contract,omitempty"`
	ExpectedEvidence []string `json:"expected_evidence,omitempty"`
}

// Outcomes of a preflight decision.
const (
	OutcomePass           = "pass"
	OutcomeRepairRequired = "repair_required"
	OutcomeDeny           = "deny"
)

// PreflightDecision is the body of a 200 from POST or GET /v1/preflight.
type PreflightDecision struct {
	PreflightID          string               `json:"preflight_id"`
	AuditID              string               `json:"audit_id"`
	Outcome              string               `json:"outcome"`
	Reason               string               `json:"reason"`
	PolicyRef            string               `json:"policy_ref"`
	LockFingerprint      string               `json:"lock_fingerprint"`
	ContractResults      []ContractResult     `json:"contract_results"`
	RepairHints          []RepairHint         `json:"repair_hints,omitempty"`
	ExecutionEligibility ExecutionEligibility `json:"execution_eligibility"`
}

// ContractResult is one contract's verdict.
type ContractResult struct {
	Contract string `json:"contract"`
	Outcome  string `json:"outcome"`  // "pass" or "fail"
	Severity string `json:"severity"` // "blocking" or "repairable"
	Detail   string `json:"detail,omitempty"`
}

// RepairHint is a deterministic correction: apply Op with Value at Path.
type RepairHint struct {
	Contract string `json:"contract"`
	Path     string `json:"path"`
	Op       string `json:"op"`
	Value    string `json:"value"`
}

// ExecutionEligibility is the binding a pass issues to /v1/tool.
// ExpiresAt is RFC3339, or "" when no binding is issued.
type ExecutionEligibility struct {
	Allowed        bool     `json:"allowed"`
	BoundToolKinds []string `json:"bound_tool_kinds"`
	ExpiresAt      string   `json:"expires_at"`
}

// ToolRequest is the body of POST /v1/tool.
type ToolRequest struct {
	Kind   string                     `json:"kind"`
	Params map[string]json.RawMessage `json:"params,omitempty"`
	Actor  Actor                      `json:"actor"`
}

// ToolResponse is the body of a 200 or 403 from POST /v1/tool.
type ToolResponse struct {
	Outcome string          `json:"outcome"` // "allow" or "deny"
	Reason  string          `json:"reason,omitempty"`
	AuditID string          `json:"audit_id"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// PreflightIDHeader binds a /v1/tool call to a prior preflight.
const PreflightIDHeader = "X-Autonomy-Preflight-Id"

// WAL frame kinds.
const (
	KindPreflight = "autonomy.preflight"
	KindDecision  = "autonomy.decision"
)
