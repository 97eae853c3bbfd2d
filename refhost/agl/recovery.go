package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// heartbeat records that this host is alive. A Claimed operation whose owner
// has stopped heartbeating belongs to a crashed host.
func (h *Host) heartbeat() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(h.cfg.BusyTimeoutMS)*time.Millisecond+5*time.Second)
	defer cancel()
	now := h.nowMS()
	// A halted instance is dead: a tick that fired before the halt must not
	// write a heartbeat after it (read after now, so the last heartbeat
	// written is never later than the halt).
	if h.halted.Load() {
		return nil
	}
	return h.st.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO instances(id,heartbeat_at,started_at) VALUES(?,?,?)
			ON CONFLICT(id) DO UPDATE SET heartbeat_at=excluded.heartbeat_at`, h.instance, now, now)
		return err
	})
}

// heartbeats keeps this host alive in the store, on a ticker of its own: a
// recovery sweep that waits on a busy store must not delay the heartbeat
// past the lease, or another host takes a live host's claims for a dead
// one's and settles them while the live host still holds them.
func (h *Host) heartbeats() { h.everyQuarterLease(h.beat) }

// sweeper looks for orphaned claims, after a heartbeat of its own: the
// host's clock may have moved (the clock seam) since the last one, and a
// sweep must not take this host's own live claims for a dead host's.
func (h *Host) sweeper() {
	h.everyQuarterLease(func() {
		h.beat()
		if _, err := h.recoverOrphans(context.Background()); err != nil {
			h.log.Warn("agl: recovery sweep failed", "err", err)
		}
	})
}

func (h *Host) beat() {
	if err := h.heartbeat(); err != nil {
		h.log.Warn("agl: heartbeat failed", "err", err)
	}
}

// everyQuarterLease runs f every quarter of the claim lease until the host
// stops; it is one of the host's background goroutines (h.wg).
func (h *Host) everyQuarterLease(f func()) {
	defer h.wg.Done()
	lease := time.Duration(h.cfg.ClaimLeaseMS) * time.Millisecond
	tick := time.NewTicker(max(lease/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
			f()
		}
	}
}

// recoverOrphans turns every operation left Claimed by a host that is no
// longer alive into Unknown: whether the external call happened is exactly
// what nobody knows. It contacts nothing for operations that finished. An
// Unknown operation whose destination deduplicates by key is then settled by
// resume, after it checked that nothing it was approved under has changed.
func (h *Host) recoverOrphans(ctx context.Context) (int, error) {
	// A sweep under way counts as a resumption in flight until it has
	// started its resumptions: between its commit (the operation Unknown)
	// and their start, POST recover must not take "none left" for decided.
	h.resuming.Add(1)
	defer h.resuming.Add(-1)
	cutoff := h.nowMS() - int64(h.cfg.ClaimLeaseMS)
	var n int
	var recovered []*operationRow
	err := h.st.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT `+opCols+` FROM operations WHERE state='Claimed' AND
			(owner_instance IS NULL OR owner_instance NOT IN (SELECT id FROM instances WHERE heartbeat_at >= ?))`, cutoff)
		if err != nil {
			return err
		}
		var orphans []*operationRow
		for rows.Next() {
			o, err := scanOp(rows)
			if err != nil {
				rows.Close()
				return err
			}
			orphans = append(orphans, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := h.nowMS()
		for _, o := range orphans {
			outcome, _ := json.Marshal(handlerResult{Kind: outcomeUncertain, Reason: "the host stopped while the operation was claimed"})
			res, err := tx.Exec(`UPDATE operations SET state='Unknown', outcome=?, updated_at=? WHERE id=? AND state='Claimed'`, string(outcome), now, o.ID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				recovered = append(recovered, o)
			}
			var rid sql.NullString
			var rev sql.NullInt64
			tx.QueryRow(`SELECT resource_id, revision FROM proposals WHERE id=?`, o.ProposalID).Scan(&rid, &rev)
			rs := ""
			if rid.Valid {
				rs = "Unknown"
				if _, err := tx.Exec(`UPDATE resources SET state='Unknown', updated_at=? WHERE id=? AND state='Dispatching' AND last_operation=?`,
					now, rid.String, o.ID); err != nil {
					return err
				}
			}
			if err := h.audit(tx, auditRecord{Event: "recovered_unknown", ExecutionID: o.ExecutionID, OperationID: o.ID,
				QualifiedName: o.QualifiedName, Principal: o.Principal, AgentID: o.AgentID, ProposalID: o.ProposalID,
				ProposalDigest: o.SnapshotDigest, PermitID: o.PermitID, ResourceID: rid.String, ResourceRevision: rev.Int64,
				ResourceState: rs, Attempt: o.Attempt, Outcome: "Unknown", Detail: "claim owner " + o.Owner + " stopped"}); err != nil {
				return err
			}
			n++
		}
		_, err = tx.Exec(`DELETE FROM instances WHERE heartbeat_at < ? AND id <> ?`, cutoff-int64(h.cfg.ClaimLeaseMS), h.instance)
		return err
	})
	if n > 0 {
		h.log.Warn("agl: operations left claimed by a stopped host are now Unknown", "count", n)
	}
	if err == nil {
		for _, o := range recovered {
			h.wg.Add(1)
			h.resuming.Add(1)
			go func() {
				defer h.wg.Done()
				defer h.resuming.Add(-1)
				h.resume(o)
			}()
		}
	}
	return n, err
}

// sameDeployment says whether the deployment a snapshot bound is the one
// this host would send an operation to.
func sameDeployment(bound any, d Destination) bool {
	m, _ := bound.(map[string]any)
	url, _ := m["destination"].(string)
	account, _ := m["account"].(string)
	idem, _ := m["destination_idempotent"].(bool)
	return m != nil && url == d.URL && account == d.Account && idem == d.HonoursIdempotencyKey
}

// resume settles, where it safely can, an operation recovery just declared
// Unknown: when its contract promises deduplication by key and the
// destination honours the key, sending it again under the same key is a
// reconciliation (the destination answers the first receipt if the first
// attempt took effect). Before it contacts anything it checks that the
// operation would run exactly as it was approved: the registered contract,
// the trusted implementation, the deployment policy and the canonical
// encoding must still have the fingerprints its proposal recorded, the
// deployment (destination, account, deduplication) must be the one the
// snapshot bound, and the grant and the permit must still be valid. Any difference stops recovery:
// the operation stays Unknown for a human or a receiver lookup, and the
// audit trail says why (recovery_stopped).
func (h *Host) resume(o *operationRow) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(h.cfg.HandlerTimeoutMS)*time.Millisecond+30*time.Second)
	defer cancel()
	p, err := h.loadProposal(ctx, h.st.db, o.ProposalID)
	if err != nil {
		return
	}
	c, err := h.loadContract(ctx, h.st.db, o.QualifiedName)
	if err != nil {
		return
	}
	im := implementations[c.Implementation]
	if im == nil {
		return
	}
	dest, _ := h.destination(im, &c.OperationContract)
	if c.IdempotencyContract.Kind != "destination_key" || !dest.HonoursIdempotencyKey || o.Attempt >= c.SchedulingContract.MaxAttempts {
		return // nothing may be retried: it waits for reconciliation
	}
	stop := func(code, detail string) {
		// The record is the only trace of why recovery stopped, so a write
		// lost to a busy store is tried again until the deadline.
		for {
			err := h.st.tx(ctx, func(tx *sql.Tx) error {
				return h.audit(tx, auditRecord{Event: "recovery_stopped", ExecutionID: o.ExecutionID, OperationID: o.ID, QualifiedName: o.QualifiedName,
					Principal: o.Principal, AgentID: o.AgentID, ProposalID: o.ProposalID, ProposalDigest: o.SnapshotDigest, PermitID: o.PermitID,
					ContractFingerprint: c.Fingerprint, PolicyFingerprint: h.policyFP, Attempt: o.Attempt, Outcome: "Unknown", DenialCode: code, Detail: detail})
			})
			if err == nil {
				break
			}
			h.log.Error("agl: could not record that recovery stopped; trying again", "operation", o.ID, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		h.log.Warn("agl: recovery stopped; the operation waits for reconciliation", "operation", o.ID, "code", code, "detail", detail)
	}
	canon, _ := p.Snapshot["canon_version"].(string)
	switch {
	case p.ContractFP != c.Fingerprint:
		stop("contract_fingerprint_mismatch", "approved under contract "+p.ContractFP+"; "+c.Fingerprint+" is registered now")
		return
	case p.ImplFP != c.ImplementationFingerprint || p.ImplFP != im.fingerprint:
		stop("implementation_fingerprint_mismatch", "approved for implementation "+p.ImplFP+"; this host runs "+im.fingerprint)
		return
	case p.PolicyFP != h.policyFP:
		stop("policy_fingerprint_mismatch", "approved under policy "+p.PolicyFP+"; this host runs "+h.policyFP)
		return
	case canon != CanonVersion:
		stop("canonicalization_mismatch", "approved under "+canon+"; this host encodes "+CanonVersion)
		return
	case !sameDeployment(p.Snapshot["deployment"], dest):
		// The destination, account or deduplication promise the approval
		// bound is not the one this host would send to.
		stop("proposal_mismatch", "the approved deployment differs from this host's: "+dest.URL+" as "+dest.Account)
		return
	}
	var permit *permitRow
	if o.PermitID != "" {
		if permit, err = h.permitByID(ctx, h.st.db, o.PermitID); err != nil {
			return
		}
	}
	if d := h.recheck(ctx, h.st.db, p.GrantID, permit, 8); d != nil {
		stop(d.Code, d.Message)
		return
	}
	attempt := o.Attempt + 1
	err = h.st.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.Exec(`UPDATE operations SET attempt=?, updated_at=? WHERE id=? AND state='Unknown' AND attempt=?`, attempt, h.nowMS(), o.ID, o.Attempt)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return errAbort{deny(409, "not_awaiting_reconciliation", "invalid_protocol_state", 0, "settled meanwhile")}
		}
		return h.audit(tx, auditRecord{Event: "retry", ExecutionID: o.ExecutionID, OperationID: o.ID, QualifiedName: o.QualifiedName,
			Principal: o.Principal, AgentID: o.AgentID, ProposalID: o.ProposalID, ProposalDigest: o.SnapshotDigest, PermitID: o.PermitID,
			Attempt: attempt, Detail: "recovery: the destination deduplicates by key; sending again under the same key"})
	})
	if err != nil {
		return
	}
	hctx, hcancel := context.WithTimeout(ctx, time.Duration(h.cfg.HandlerTimeoutMS)*time.Millisecond)
	res := h.invoke(hctx, im, dest, o.ID, o.QualifiedName, p.Snapshot["arguments"], handlerContext{
		ExecutionID: o.ExecutionID, Principal: o.Principal, AgentID: o.AgentID, GrantID: p.GrantID,
		PermitID: nullStr(o.PermitID), ProposalID: p.ID, SnapshotDigest: p.Digest, Attempt: attempt})
	hcancel()
	if res.Kind != outcomeSuccess {
		return // still not known; it waits for reconciliation
	}
	recon := map[string]any{"method": "idempotent_retry", "resolution": "completed", "at": msTime(h.nowMS()),
		"evidence": map[string]any{"message_id": res.Output["message_id"], "duplicate": res.Duplicate, "attempt": attempt}}
	rb, _ := json.Marshal(recon)
	h.st.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.Exec(`UPDATE operations SET state='ReconciledCompleted', reconciliation=?, updated_at=? WHERE id=? AND state='Unknown'`, string(rb), h.nowMS(), o.ID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return nil
		}
		if p.ResourceID != "" {
			if _, err := tx.Exec(`UPDATE resources SET state='Sent', updated_at=? WHERE id=? AND state='Unknown' AND last_operation=?`, h.nowMS(), p.ResourceID, o.ID); err != nil {
				return err
			}
		}
		return h.audit(tx, auditRecord{Event: "reconciled", ExecutionID: o.ExecutionID, OperationID: o.ID, QualifiedName: o.QualifiedName,
			Principal: o.Principal, AgentID: o.AgentID, ProposalID: o.ProposalID, ProposalDigest: o.SnapshotDigest, PermitID: o.PermitID,
			ResourceID: p.ResourceID, ResourceRevision: p.Revision, ResourceState: stateIf(p.ResourceID, "Sent"),
			Outcome: "ReconciledCompleted", Reconciliation: recon, Attempt: attempt})
	})
}
