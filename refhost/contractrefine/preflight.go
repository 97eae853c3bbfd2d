package contractrefine

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

func (h *Host) postPreflight(w http.ResponseWriter, r *http.Request) {
	// Fail closed before reading anything: a disabled surface or a missing
	// verifier must never produce a decision.
	if h.s.mode == ModeDisabled {
		writeError(w, http.StatusServiceUnavailable, "contract_refine mode is disabled")
		return
	}
	if !h.s.verifierWired {
		writeError(w, http.StatusServiceUnavailable, "no contract verifier is wired")
		return
	}
	var req PreflightRequest
	if status, err := readObject(w, r, &req); err != nil {
		writeError(w, status, err.Error())
		return
	}
	if h.wal == nil {
		// Without an emitter the decision could never be audited or read back,
		// which is the same failure the spec answers with 500 for a failed emit.
		writeError(w, http.StatusInternalServerError, "no telemetry emitter is wired; refusing a non-auditable decision")
		return
	}

	decisionJSON, err := h.decide(&req)
	if err != nil {
		h.log.Error("preflight decision not recorded; refusing it", slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "decision could not be recorded in the WAL")
		return
	}
	writeJSON(w, http.StatusOK, decisionJSON)
}

// decide verifies req, composes the outcome, and records it. It returns the
// decision bytes only once the autonomy.preflight frame is durable.
func (h *Host) decide(req *PreflightRequest) ([]byte, error) {
	v := h.s.verifier.verify(req)
	preflightID, err := newID()
	if err != nil {
		return nil, err
	}
	auditID, err := newID()
	if err != nil {
		return nil, err
	}
	now := h.now()
	agent := h.s.forAgent(req.Actor.AgentID)
	d := PreflightDecision{
		PreflightID:     preflightID,
		AuditID:         auditID,
		PolicyRef:       h.s.policyRef,
		LockFingerprint: h.s.lockFingerprint, // the live one, never v.lockFingerprint
		ContractResults: v.results,
	}

	var consumed *budget
	switch {
	case v.blocking != "":
		d.deny(v.blocking)
	case v.repairable != "":
		b := h.budgets.get(budgetKey{req.Actor.SessionID, req.Intent.PlanHash})
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.used >= agent.maxRepairAttempts {
			d.deny(reasonRepairBudgetExhausted)
		} else {
			d.Outcome, d.Reason = OutcomeRepairRequired, v.repairable
			d.RepairHints = v.hints
			d.ExecutionEligibility = ExecutionEligibility{BoundToolKinds: []string{}}
			consumed = b
		}
	default:
		d.Outcome, d.Reason = OutcomePass, reasonPassed
		d.ExecutionEligibility = ExecutionEligibility{
			Allowed:        true,
			BoundToolKinds: []string{req.Capability},
			ExpiresAt:      now.Add(agent.ttl).UTC().Format(time.RFC3339),
		}
	}

	decisionJSON, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode decision: %w", err)
	}
	resultsJSON, err := json.Marshal(d.ContractResults)
	if err != nil {
		return nil, fmt.Errorf("encode contract results: %w", err)
	}
	attrs := map[string]any{
		"preflight_id":       d.PreflightID,
		"audit_id":           d.AuditID,
		"outcome":            d.Outcome,
		"reason":             d.Reason,
		"policy_ref":         d.PolicyRef,
		"lock_fingerprint":   d.LockFingerprint,
		"capability":         req.Capability,
		"contract_results":   string(resultsJSON),
		"repair_hints_count": len(d.RepairHints),
		"expires_at":         d.ExecutionEligibility.ExpiresAt,
		"decision_json":      string(decisionJSON),
	}
	// session_id is not in the spec's table; it is here so the repair
	// budgets can be rebuilt from the WAL at startup.
	setIf(attrs, "plan_hash", req.Intent.PlanHash)
	setIf(attrs, "session_id", req.Actor.SessionID)
	setIf(attrs, "zone", req.Context.Zone)
	setIf(attrs, "environment", req.Context.Environment)
	setIf(attrs, "actor_node_id", req.Actor.NodeID)
	setIf(attrs, "actor_agent_id", req.Actor.AgentID)

	if agent.walFail && !h.s.walFail {
		return nil, errWALInjected // the agent's fault (agents.<id>.faults.wal_emit)
	}
	if err := h.wal.append(KindPreflight, now, attrs, d.PreflightID); err != nil {
		return nil, err // nothing consumed: the attempt never became a decision
	}
	if consumed != nil {
		consumed.used++
	}
	h.log.Debug("preflight decided", slog.String("preflight_id", d.PreflightID),
		slog.String("outcome", d.Outcome), slog.String("reason", d.Reason))
	return decisionJSON, nil
}

func (d *PreflightDecision) deny(reason string) {
	d.Outcome, d.Reason = OutcomeDeny, reason
	d.ExecutionEligibility = ExecutionEligibility{BoundToolKinds: []string{}}
}

func setIf(attrs map[string]any, name, value string) {
	if value != "" {
		attrs[name] = value
	}
}

func (h *Host) getPreflight(w http.ResponseWriter, r *http.Request) {
	if h.s.mode == ModeDisabled {
		writeError(w, http.StatusServiceUnavailable, "contract_refine mode is disabled")
		return
	}
	if h.wal == nil {
		writeError(w, http.StatusServiceUnavailable, "no telemetry emitter is wired")
		return
	}
	id, _ := trimPathPrefix(r.URL.Path, "/v1/preflight/")
	switch {
	case id == "":
		writeError(w, http.StatusBadRequest, "preflight_id path segment is empty")
		return
	case strings.Contains(id, "/"):
		notFound(w, r)
		return
	}
	fr, ok, err := h.wal.lookup(id)
	if err != nil {
		h.log.Error("WAL read failed", slog.String("preflight_id", id), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "WAL read failed")
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no autonomy.preflight frame for "+id)
		return
	}
	raw, present := fr.Attrs["decision_json"]
	var decision string
	if !present || json.Unmarshal(raw, &decision) != nil || decision == "" {
		writeError(w, http.StatusInternalServerError, "stored frame carries no decision_json")
		return
	}
	// Verbatim: the bytes POST returned, not a re-encoding.
	writeJSON(w, http.StatusOK, []byte(decision))
}
