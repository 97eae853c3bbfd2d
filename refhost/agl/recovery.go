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
	return h.st.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO instances(id,heartbeat_at,started_at) VALUES(?,?,?)
			ON CONFLICT(id) DO UPDATE SET heartbeat_at=excluded.heartbeat_at`, h.instance, now, now)
		return err
	})
}

func (h *Host) sweeper() {
	defer h.wg.Done()
	lease := time.Duration(h.cfg.ClaimLeaseMS) * time.Millisecond
	tick := time.NewTicker(max(lease/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
			if err := h.heartbeat(); err != nil {
				h.log.Warn("agl: heartbeat failed", "err", err)
			}
			if _, err := h.recoverOrphans(context.Background()); err != nil {
				h.log.Warn("agl: recovery sweep failed", "err", err)
			}
		}
	}
}

// recoverOrphans turns every operation left Claimed by a host that is no
// longer alive into Unknown. It never retries: whether the external call
// happened is exactly what nobody knows.
func (h *Host) recoverOrphans(ctx context.Context) (int, error) {
	cutoff := h.nowMS() - int64(h.cfg.ClaimLeaseMS)
	var n int
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
			if _, err := tx.Exec(`UPDATE operations SET state='Unknown', outcome=?, updated_at=? WHERE id=? AND state='Claimed'`, string(outcome), now, o.ID); err != nil {
				return err
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
	return n, err
}
