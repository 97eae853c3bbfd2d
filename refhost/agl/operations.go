package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"time"
)

type operationRow struct {
	ID, ExecutionID, ProposalID, PermitID, QualifiedName, Principal, AgentID string
	SnapshotDigest, State, IdempotencyKey, Owner                             string
	Attempt                                                                  int
	Outcome, Reconciliation                                                  map[string]any
	CreatedAt, UpdatedAt                                                     int64
}

func (o *operationRow) view() map[string]any {
	return map[string]any{
		"operation_id": o.ID, "execution_id": o.ExecutionID, "proposal_id": nullStr(o.ProposalID), "permit_id": nullStr(o.PermitID),
		"operation": o.QualifiedName, "principal": o.Principal, "agent_id": o.AgentID, "snapshot_digest": o.SnapshotDigest,
		"state": o.State, "attempt": o.Attempt, "idempotency_key": o.IdempotencyKey,
		"outcome": o.Outcome, "reconciliation": o.Reconciliation,
		// An Unknown write is never retried blindly; it waits here.
		"awaiting_reconciliation": o.State == "Unknown",
		"created_at":              msTime(o.CreatedAt), "updated_at": msTime(o.UpdatedAt),
	}
}

const opCols = `id, execution_id, COALESCE(proposal_id,''), COALESCE(permit_id,''), qualified_name, principal, agent_id,
	snapshot_digest, state, attempt, idempotency_key, COALESCE(owner_instance,''), outcome, reconciliation, created_at, updated_at`

func scanOp(sc interface{ Scan(...any) error }) (*operationRow, error) {
	o := &operationRow{}
	var outcome, recon sql.NullString
	if err := sc.Scan(&o.ID, &o.ExecutionID, &o.ProposalID, &o.PermitID, &o.QualifiedName, &o.Principal, &o.AgentID,
		&o.SnapshotDigest, &o.State, &o.Attempt, &o.IdempotencyKey, &o.Owner, &outcome, &recon, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return nil, err
	}
	if outcome.Valid {
		json.Unmarshal([]byte(outcome.String), &o.Outcome)
	}
	if recon.Valid {
		json.Unmarshal([]byte(recon.String), &o.Reconciliation)
	}
	return o, nil
}

var sqlLoadOperation = hot(`SELECT ` + opCols + ` FROM operations WHERE id=?`)

func (h *Host) loadOperation(ctx context.Context, q querier, id string) (*operationRow, error) {
	return scanOp(h.st.row(ctx, q, sqlLoadOperation, id))
}

func (h *Host) hGetOperation(w http.ResponseWriter, r *http.Request) {
	o, err := h.loadOperation(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such operation"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, o.view())
}

func (h *Host) hListOperations(w http.ResponseWriter, r *http.Request) {
	exec := r.URL.Query().Get("execution_id")
	if exec == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "execution_id query parameter is required"))
		return
	}
	rows, err := h.st.db.QueryContext(r.Context(), `SELECT `+opCols+` FROM operations WHERE execution_id=? ORDER BY created_at, id LIMIT 1000`, exec)
	if err != nil {
		h.fail(w, err)
		return
	}
	defer rows.Close()
	out := []map[string]any{}
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			h.fail(w, err)
			return
		}
		out = append(out, o.view())
	}
	if err := rows.Err(); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"operations": out})
}

type reconcileBody struct {
	Method     string         `json:"method"`
	Resolution string         `json:"resolution,omitempty"`
	Actor      string         `json:"actor,omitempty"`
	Evidence   map[string]any `json:"evidence,omitempty"`
}

// hReconcile establishes the outcome of an Unknown operation, either by
// asking the receiver (receiver_lookup) or by a human decision relayed by
// the trusted resolver. It never returns a resource to a reusable state.
func (h *Host) hReconcile(w http.ResponseWriter, r *http.Request) {
	var body reconcileBody
	if d := decode(r, &body); d != nil {
		writeDenial(w, d)
		return
	}
	switch body.Method {
	case "receiver_lookup":
		if d := h.requireKey(r, "operator or resolver", h.cfg.Keys.Operator, h.cfg.Keys.Resolver); d != nil {
			writeDenial(w, d)
			return
		}
	case "human":
		if d := h.requireKey(r, "resolver", h.cfg.Keys.Resolver); d != nil {
			writeDenial(w, d)
			return
		}
		if body.Actor == "" || (body.Resolution != "completed" && body.Resolution != "no_effect") {
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "human reconciliation needs an actor and a resolution (completed or no_effect)"))
			return
		}
	default:
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "method must be receiver_lookup or human"))
		return
	}
	o, err := h.loadOperation(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such operation"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	if o.State != "Unknown" {
		writeDenial(w, deny(409, "not_awaiting_reconciliation", "invalid_protocol_state", 0, "operation %s is %s, not Unknown", o.ID, o.State))
		return
	}
	recon := map[string]any{"method": body.Method, "at": msTime(h.nowMS())}
	resolution := body.Resolution
	if body.Method == "receiver_lookup" {
		c, err := h.loadContract(r.Context(), h.st.db, o.QualifiedName)
		if err != nil {
			h.fail(w, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(h.cfg.HandlerTimeoutMS)*time.Millisecond)
		var dest Destination
		if im := implementations[c.Implementation]; im != nil {
			dest, _ = h.destination(im, &c.OperationContract)
		}
		found, msgID, err := h.lookup(ctx, dest, o.IdempotencyKey)
		cancel()
		if err != nil {
			// This one genuinely is a network problem and may be retried.
			d := deny(502, "destination_unreachable", "reconciliation", 0, "the receiver could not be asked: %v", err)
			d.Retryable = true
			writeDenial(w, d)
			return
		}
		resolution = "no_effect"
		recon["evidence"] = map[string]any{"found": found}
		if found {
			resolution = "completed"
			recon["evidence"] = map[string]any{"found": true, "message_id": msgID}
		}
	} else {
		recon["actor"] = body.Actor
		if body.Evidence != nil {
			recon["evidence"] = body.Evidence
		}
	}
	recon["resolution"] = resolution
	state := map[string]string{"completed": "ReconciledCompleted", "no_effect": "ReconciledNoEffect"}[resolution]
	resState := map[string]string{"completed": "Sent", "no_effect": "FailedNoEffect"}[resolution]
	rb, _ := json.Marshal(recon)
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE operations SET state=?, reconciliation=?, updated_at=? WHERE id=? AND state='Unknown'`, state, string(rb), h.nowMS(), o.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errAbort{deny(409, "not_awaiting_reconciliation", "invalid_protocol_state", 0, "operation %s was reconciled concurrently", o.ID)}
		}
		var rid sql.NullString
		var rev sql.NullInt64
		tx.QueryRow(`SELECT resource_id, revision FROM proposals WHERE id=?`, o.ProposalID).Scan(&rid, &rev)
		rs := ""
		if rid.Valid {
			rs = resState
			if _, err := tx.Exec(`UPDATE resources SET state=?, updated_at=? WHERE id=? AND state='Unknown' AND last_operation=?`,
				resState, h.nowMS(), rid.String, o.ID); err != nil {
				return err
			}
		}
		return h.audit(tx, auditRecord{Event: "reconciled", ExecutionID: o.ExecutionID, OperationID: o.ID, QualifiedName: o.QualifiedName,
			Principal: o.Principal, AgentID: o.AgentID, ProposalID: o.ProposalID, ProposalDigest: o.SnapshotDigest, PermitID: o.PermitID,
			ResourceID: rid.String, ResourceRevision: rev.Int64, ResourceState: rs, Outcome: state, Reconciliation: recon, Attempt: o.Attempt})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	o, err = h.loadOperation(r.Context(), h.st.db, o.ID)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, o.view())
}
