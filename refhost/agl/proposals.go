package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
)

type proposalRow struct {
	ID, OperationID, ExecutionID, Principal, AgentID, QualifiedName string
	ContractFP, ImplFP, PolicyFP, GrantID, Digest                   string
	Snapshot                                                        map[string]any
	ResourceID                                                      string
	Revision                                                        int64
	CreatedAt                                                       int64
}

func (p *proposalRow) view() map[string]any {
	enc, _ := Canonicalize(p.Snapshot)
	v := map[string]any{
		"proposal_id": p.ID, "operation_id": p.OperationID, "execution_id": p.ExecutionID, "principal": p.Principal,
		"agent_id": p.AgentID, "operation": p.QualifiedName, "contract_fingerprint": p.ContractFP,
		"implementation_fingerprint": p.ImplFP, "policy_fingerprint": p.PolicyFP, "grant_id": p.GrantID,
		"canon_version": CanonVersion, "digest": p.Digest, "snapshot": p.Snapshot, "canonical_encoding": string(enc),
		"created_at": msTime(p.CreatedAt),
	}
	if p.ResourceID != "" {
		v["resource"] = map[string]any{"resource_id": p.ResourceID, "revision": p.Revision}
	}
	return v
}

var sqlLoadProposal = hot(`SELECT id, operation_id, execution_id, principal, agent_id, qualified_name, contract_fp,
		implementation_fp, policy_fp, grant_id, snapshot, digest, resource_id, revision, created_at FROM proposals WHERE id=?`)

func (h *Host) loadProposal(ctx context.Context, q querier, id string) (*proposalRow, error) {
	p := &proposalRow{}
	var snap string
	var rid sql.NullString
	var rev sql.NullInt64
	err := h.st.row(ctx, q, sqlLoadProposal, id).
		Scan(&p.ID, &p.OperationID, &p.ExecutionID, &p.Principal, &p.AgentID, &p.QualifiedName, &p.ContractFP, &p.ImplFP,
			&p.PolicyFP, &p.GrantID, &snap, &p.Digest, &rid, &rev, &p.CreatedAt)
	if err != nil {
		return nil, err
	}
	v, err := ParseJSON([]byte(snap))
	if err != nil {
		return nil, err
	}
	p.Snapshot, _ = v.(map[string]any)
	p.ResourceID, p.Revision = rid.String, rev.Int64
	return p, nil
}

// insertProposal persists the immutable snapshot. The operation's logical
// ID is allocated here, so the permit can bind it.
func (h *Host) insertProposal(tx *sql.Tx, ev *evaluation, opState string) (*proposalRow, error) {
	p := &proposalRow{ID: newID("prop_"), OperationID: newID("op_"), ExecutionID: ev.req.ExecutionID,
		Principal: ev.req.Principal, AgentID: ev.req.AgentID, QualifiedName: ev.contract.QualifiedName,
		ContractFP: ev.contract.Fingerprint, ImplFP: ev.contract.ImplementationFingerprint, PolicyFP: h.policyFP,
		GrantID: ev.grant.ID, Digest: ev.digest, Snapshot: ev.snapshot, CreatedAt: h.nowMS()}
	for _, pc := range ev.contract.ProtocolPreconditions {
		if rh := ev.handles[pc.Argument]; rh != nil {
			p.ResourceID, p.Revision = rh.ResourceID, rh.Revision
		}
	}
	snap, _ := json.Marshal(ev.snapshot)
	_, err := tx.Exec(`INSERT INTO proposals VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, p.ID, p.OperationID, p.ExecutionID,
		p.Principal, p.AgentID, p.QualifiedName, p.ContractFP, p.ImplFP, p.PolicyFP, p.GrantID, string(snap), p.Digest,
		nullStr(p.ResourceID), nullRev(p.Revision), p.CreatedAt)
	if err != nil {
		return nil, err
	}
	if opState != "" {
		_, err = tx.Exec(`INSERT INTO operations(id,execution_id,proposal_id,qualified_name,principal,agent_id,snapshot_digest,state,
			idempotency_key,created_at,updated_at) VALUES(?,?,?,?,?,?,?,?,?,?,?)`, p.OperationID, p.ExecutionID, p.ID,
			p.QualifiedName, p.Principal, p.AgentID, p.Digest, opState, p.OperationID, p.CreatedAt, p.CreatedAt)
	}
	return p, err
}

func nullRev(r int64) any {
	if r == 0 {
		return nil
	}
	return r
}

// hPropose snapshots an action. It is deterministic and performs no
// external write; the resource moves Draft -> Proposed and the operation is
// recorded as Pending.
func (h *Host) hPropose(w http.ResponseWriter, r *http.Request) {
	var req actionRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	ev, d, err := h.evaluate(r.Context(), &req, true, nil)
	if d != nil || err != nil {
		h.writeEvalErr(w, d, err)
		return
	}
	h.meet(r.Context(), pointPropose, ev.resourceID())
	var p *proposalRow
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if p, err = h.insertProposal(tx, ev, "Pending"); err != nil {
			return err
		}
		if p.ResourceID != "" {
			res, err := tx.Exec(`UPDATE resources SET state='Proposed', updated_at=? WHERE id=? AND revision=? AND state='Draft'`,
				h.nowMS(), p.ResourceID, p.Revision)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return errAbort{deny(409, "stale_revision", "stale_revision", 7, "resource %s changed while the proposal was made", p.ResourceID)}
			}
		}
		return h.audit(tx, auditRecord{Event: "proposed", ExecutionID: p.ExecutionID, OperationID: p.OperationID,
			QualifiedName: p.QualifiedName, Principal: p.Principal, AgentID: p.AgentID, ContractFingerprint: p.ContractFP,
			PolicyFingerprint: p.PolicyFP, ResourceID: p.ResourceID, ResourceRevision: p.Revision, ResourceState: stateIf(p.ResourceID, "Proposed"),
			ProposalID: p.ID, ProposalDigest: p.Digest, GrantID: p.GrantID})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, p.view())
}

func stateIf(id, s string) string {
	if id == "" {
		return ""
	}
	return s
}

func (h *Host) hGetProposal(w http.ResponseWriter, r *http.Request) {
	p, err := h.loadProposal(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such proposal"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, p.view())
}

type approvalRequestRow struct {
	ID, ProposalID, Role, Status, Approver, Reason string
	TTLSeconds                                     int
	DecidedAt                                      *int64
	CreatedAt                                      int64
}

func (a *approvalRequestRow) view(p *proposalRow) map[string]any {
	v := map[string]any{"request_id": a.ID, "proposal_id": a.ProposalID, "role": a.Role, "status": a.Status,
		"ttl_seconds": a.TTLSeconds, "approver": nullStr(a.Approver), "reason": nullStr(a.Reason),
		"decided_at": msPtr(a.DecidedAt), "created_at": msTime(a.CreatedAt)}
	if p != nil {
		// The approver is shown exactly the snapshot dispatch will execute.
		v["proposal"] = p.view()
	}
	return v
}

func (h *Host) loadApprovalRequest(ctx context.Context, q querier, id string) (*approvalRequestRow, error) {
	a := &approvalRequestRow{}
	var appr, reason sql.NullString
	var dec sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT id, proposal_id, role, ttl_seconds, status, approver, reason, decided_at, created_at
		FROM approval_requests WHERE id=?`, id).Scan(&a.ID, &a.ProposalID, &a.Role, &a.TTLSeconds, &a.Status, &appr, &reason, &dec, &a.CreatedAt)
	if err != nil {
		return nil, err
	}
	a.Approver, a.Reason = appr.String, reason.String
	if dec.Valid {
		a.DecidedAt = &dec.Int64
	}
	return a, nil
}

type approvalRequestBody struct {
	Role       string `json:"role"`
	TTLSeconds int    `json:"ttl_seconds"`
}

// hRequestApproval creates the pending server-side request that a decision
// must answer. Anyone holding the proposal may ask; only the resolver decides.
func (h *Host) hRequestApproval(w http.ResponseWriter, r *http.Request) {
	var body approvalRequestBody
	if d := decode(r, &body); d != nil {
		writeDenial(w, d)
		return
	}
	p, err := h.loadProposal(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such proposal"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	c, err := h.loadContract(r.Context(), h.st.db, p.QualifiedName)
	if err != nil {
		h.fail(w, err)
		return
	}
	if body.Role == "" {
		body.Role = c.ApprovalRequirement.Role
	}
	if c.ApprovalRequirement.Role != "" && body.Role != c.ApprovalRequirement.Role {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "%s requires approval by role %s", p.QualifiedName, c.ApprovalRequirement.Role))
		return
	}
	if body.Role == "" {
		body.Role = "operator"
	}
	if body.TTLSeconds <= 0 || body.TTLSeconds > h.cfg.MaxApprovalTTLSeconds {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "ttl_seconds must be between 1 and %d", h.cfg.MaxApprovalTTLSeconds))
		return
	}
	a := &approvalRequestRow{ID: newID("apr_"), ProposalID: p.ID, Role: body.Role, TTLSeconds: body.TTLSeconds, Status: "pending", CreatedAt: h.nowMS()}
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var opState string
		if err := tx.QueryRow(`SELECT state FROM operations WHERE id=?`, p.OperationID).Scan(&opState); err != nil {
			return err
		}
		if opState != "Pending" {
			return errAbort{deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "operation %s is %s; approval is only requested before dispatch", p.OperationID, opState)}
		}
		if p.ResourceID != "" {
			var rev int64
			var state string
			if err := tx.QueryRow(`SELECT revision, state FROM resources WHERE id=?`, p.ResourceID).Scan(&rev, &state); err != nil {
				return err
			}
			if rev != p.Revision {
				return errAbort{deny(409, "stale_revision", "stale_revision", 0, "resource %s moved to revision %d; propose again", p.ResourceID, rev)}
			}
			if state != "Proposed" {
				return errAbort{deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "resource %s is %s, not Proposed", p.ResourceID, state)}
			}
		}
		if _, err := tx.Exec(`INSERT INTO approval_requests(id,proposal_id,role,ttl_seconds,status,created_at) VALUES(?,?,?,?,?,?)`,
			a.ID, a.ProposalID, a.Role, a.TTLSeconds, a.Status, a.CreatedAt); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "approval_requested", ExecutionID: p.ExecutionID, OperationID: p.OperationID,
			ProposalID: p.ID, ProposalDigest: p.Digest, Principal: p.Principal, Detail: "role " + a.Role})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, a.view(p))
}

func (h *Host) hGetApprovalRequest(w http.ResponseWriter, r *http.Request) {
	a, err := h.loadApprovalRequest(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such approval request"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	p, err := h.loadProposal(r.Context(), h.st.db, a.ProposalID)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, a.view(p))
}

type decisionBody struct {
	Approver string `json:"approver"`
	Role     string `json:"role"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Digest is the proposal digest the approver was shown; a decision
	// about any other snapshot is refused.
	Digest string `json:"digest"`
}

// hDecide is the trusted approval resolver. The resolver authenticates with
// the resolver key and names the human approver and role; only this path
// mints a permit.
func (h *Host) hDecide(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "resolver", h.cfg.Keys.Resolver); d != nil {
		d.Code = "unauthenticated_decision"
		writeDenial(w, d)
		return
	}
	var body decisionBody
	if d := decode(r, &body); d != nil {
		writeDenial(w, d)
		return
	}
	if body.Approver == "" || (body.Decision != "granted" && body.Decision != "denied") {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "approver and decision (granted or denied) are required"))
		return
	}
	var a *approvalRequestRow
	var p *proposalRow
	var permitID, token string
	var expires int64
	now := h.nowMS()
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if a, err = h.loadApprovalRequest(r.Context(), tx, r.PathValue("id")); err != nil {
			return err
		}
		if p, err = h.loadProposal(r.Context(), tx, a.ProposalID); err != nil {
			return err
		}
		if a.Status != "pending" {
			return errAbort{deny(409, "request_not_pending", "invalid_protocol_state", 0, "approval request %s is %s", a.ID, a.Status)}
		}
		if body.Role != a.Role {
			return errAbort{deny(403, "approver_role_mismatch", "authorization_denied", 0, "request %s needs role %s", a.ID, a.Role)}
		}
		if body.Digest != p.Digest {
			return errAbort{deny(409, "proposal_mismatch", "proposal_mismatch", 0, "the decision names digest %s; the proposal is %s", body.Digest, p.Digest)}
		}
		resState := ""
		if p.ResourceID != "" {
			var rev int64
			var state string
			if err := tx.QueryRow(`SELECT revision, state FROM resources WHERE id=?`, p.ResourceID).Scan(&rev, &state); err != nil {
				return err
			}
			if rev != p.Revision || state != "Proposed" {
				return errAbort{deny(409, "stale_revision", "stale_revision", 0, "resource %s is now revision %d in %s; the request is void", p.ResourceID, rev, state)}
			}
			resState = map[string]string{"granted": "Authorized", "denied": "Denied"}[body.Decision]
			if _, err := tx.Exec(`UPDATE resources SET state=?, updated_at=? WHERE id=? AND revision=?`, resState, now, p.ResourceID, rev); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`UPDATE approval_requests SET status=?, approver=?, reason=?, decided_at=? WHERE id=?`,
			body.Decision, body.Approver, nullStr(body.Reason), now, a.ID); err != nil {
			return err
		}
		a.Status, a.Approver, a.Reason, a.DecidedAt = body.Decision, body.Approver, body.Reason, &now
		rec := auditRecord{Event: "approval_decided", ExecutionID: p.ExecutionID, OperationID: p.OperationID,
			QualifiedName: p.QualifiedName, Principal: p.Principal, ProposalID: p.ID, ProposalDigest: p.Digest,
			ResourceID: p.ResourceID, ResourceRevision: p.Revision, ResourceState: resState,
			DecisionActor: body.Approver, DecisionAt: msTime(now), Decision: body.Decision}
		if body.Decision == "granted" {
			permitID, token = newID("permit_"), randomToken("apt_")
			expires = now + int64(a.TTLSeconds)*1000
			if _, err := tx.Exec(`INSERT INTO permits(id,token_hash,proposal_id,request_id,approver,issued_at,expires_at) VALUES(?,?,?,?,?,?,?)`,
				permitID, hashToken(token), p.ID, a.ID, body.Approver, now, expires); err != nil {
				return err
			}
			rec.PermitID = permitID
		}
		return h.audit(tx, rec)
	})
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such approval request"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	out := a.view(nil)
	if permitID == "" {
		writeJSON(w, 200, out)
		return
	}
	out["permit"] = map[string]any{
		"permit_id": permitID, "permit_token": token, "issued_at": msTime(now), "expires_at": msTime(expires),
		"binds": map[string]any{
			"approver": body.Approver, "role": a.Role, "principal": p.Principal, "execution_id": p.ExecutionID,
			"grant_id": p.GrantID, "operation": p.QualifiedName, "operation_id": p.OperationID,
			"contract_fingerprint": p.ContractFP, "implementation_fingerprint": p.ImplFP,
			"policy_fingerprint": p.PolicyFP, "digest": p.Digest, "resource": nullStr(p.ResourceID), "revision": nullRev(p.Revision),
		},
	}
	writeJSON(w, 201, out)
}

type permitRow struct {
	ID, ProposalID, RequestID, Approver, ConsumedBy string
	IssuedAt, ExpiresAt                             int64
	RevokedAt, ConsumedAt                           *int64
}

func scanPermit(row *sql.Row) (*permitRow, error) {
	p := &permitRow{}
	var rev, cons sql.NullInt64
	var by sql.NullString
	if err := row.Scan(&p.ID, &p.ProposalID, &p.RequestID, &p.Approver, &p.IssuedAt, &p.ExpiresAt, &rev, &cons, &by); err != nil {
		return nil, err
	}
	if rev.Valid {
		p.RevokedAt = &rev.Int64
	}
	if cons.Valid {
		p.ConsumedAt = &cons.Int64
	}
	p.ConsumedBy = by.String
	return p, nil
}

const permitCols = `id, proposal_id, request_id, approver, issued_at, expires_at, revoked_at, consumed_at, consumed_by`

var (
	sqlPermitByToken = hot(`SELECT ` + permitCols + ` FROM permits WHERE token_hash=?`)
	sqlPermitByID    = hot(`SELECT ` + permitCols + ` FROM permits WHERE id=?`)
)

func (h *Host) permitByToken(ctx context.Context, q querier, token string) (*permitRow, error) {
	return scanPermit(h.st.row(ctx, q, sqlPermitByToken, hashToken(token)))
}

func (h *Host) permitByID(ctx context.Context, q querier, id string) (*permitRow, error) {
	return scanPermit(h.st.row(ctx, q, sqlPermitByID, id))
}

func (p *permitRow) view() map[string]any {
	return map[string]any{"permit_id": p.ID, "proposal_id": p.ProposalID, "request_id": p.RequestID, "approver": p.Approver,
		"issued_at": msTime(p.IssuedAt), "expires_at": msTime(p.ExpiresAt), "revoked_at": msPtr(p.RevokedAt),
		"consumed_at": msPtr(p.ConsumedAt), "consumed_by_operation": nullStr(p.ConsumedBy)}
}

func (h *Host) hGetPermit(w http.ResponseWriter, r *http.Request) {
	p, err := h.permitByID(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such permit"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, p.view())
}

// hRevokePermit: revocation stops a new dispatch; it cannot undo one that
// already happened, and reading its outcome stays legal.
func (h *Host) hRevokePermit(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "resolver", h.cfg.Keys.Resolver); d != nil {
		writeDenial(w, d)
		return
	}
	var p *permitRow
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE permits SET revoked_at=? WHERE id=? AND revoked_at IS NULL`, h.nowMS(), r.PathValue("id"))
		if err != nil {
			return err
		}
		if p, err = h.permitByID(r.Context(), tx, r.PathValue("id")); err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return h.audit(tx, auditRecord{Event: "permit_revoked", PermitID: p.ID, ProposalID: p.ProposalID})
		}
		return nil
	})
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such permit"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, p.view())
}
