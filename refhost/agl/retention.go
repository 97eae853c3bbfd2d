package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"time"
)

// Retention (spec 8): the store is cleaned of what no credential can ever
// use again, and of nothing else. A consumed permit keeps its row for the
// life of the store: its consumed_at is the tombstone that refuses a replay,
// and the token it belongs to could be presented at any time. A pending
// intent (an operation still Pending) is kept while any permit that could
// dispatch it is alive. What the sweep removes, once retention_ms has passed
// since it died:
//
//   - unconsumed permits that expired or were revoked (their token is
//     refused whatever happens: as expired, revoked, or unknown);
//   - approval requests that were denied or invalidated, or granted but
//     whose permit is gone;
//   - pending intents left with no permit and no approval request, with
//     their proposal: nothing can ever dispatch them.

type sweepResult struct {
	Permits          int64 `json:"permits"`
	ApprovalRequests int64 `json:"approval_requests"`
	Intents          int64 `json:"intents"`
}

func (h *Host) retentionSweep(ctx context.Context) (sweepResult, error) {
	var out sweepResult
	cutoff := h.nowMS() - h.cfg.RetentionMS
	err := h.st.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM permits WHERE consumed_at IS NULL AND
			((revoked_at IS NOT NULL AND revoked_at < ?) OR expires_at < ?)`, cutoff, cutoff)
		if err != nil {
			return err
		}
		out.Permits, _ = res.RowsAffected()
		res, err = tx.Exec(`DELETE FROM approval_requests WHERE decided_at IS NOT NULL AND decided_at < ? AND
			(status IN ('denied','invalidated') OR (status='granted' AND id NOT IN (SELECT request_id FROM permits)))`, cutoff)
		if err != nil {
			return err
		}
		out.ApprovalRequests, _ = res.RowsAffected()
		// An intent is dead when nothing can dispatch it any more: no
		// permit of it is left (the dead ones went above) and no approval
		// request for one (pending, or kept for its own retention).
		dead := `SELECT o.id FROM operations o JOIN proposals p ON p.id=o.proposal_id
			WHERE o.state='Pending' AND o.created_at < ?
			AND NOT EXISTS (SELECT 1 FROM permits m WHERE m.proposal_id=p.id)
			AND NOT EXISTS (SELECT 1 FROM approval_requests a WHERE a.proposal_id=p.id)`
		rows, err := tx.Query(dead, cutoff)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.Exec(`DELETE FROM proposals WHERE operation_id=?`, id); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM operations WHERE id=? AND state='Pending'`, id); err != nil {
				return err
			}
		}
		out.Intents = int64(len(ids))
		if out.Permits+out.ApprovalRequests+out.Intents == 0 {
			return nil
		}
		b, _ := json.Marshal(out)
		return h.audit(tx, auditRecord{Event: "retention_swept", Detail: string(b)})
	})
	return out, err
}

// retentionLoop runs the sweep every retention_sweep_ms.
func (h *Host) retentionLoop() {
	defer h.wg.Done()
	tick := time.NewTicker(time.Duration(h.cfg.RetentionSweepMS) * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
			if r, err := h.retentionSweep(context.Background()); err != nil {
				h.log.Warn("agl: retention sweep failed", "err", err)
			} else if r.Permits+r.ApprovalRequests+r.Intents > 0 {
				h.log.Info("agl: retention sweep", "permits", r.Permits, "approval_requests", r.ApprovalRequests, "intents", r.Intents)
			}
		}
	}
}

func (h *Host) hRetentionSeam(w http.ResponseWriter, r *http.Request) {
	res, err := h.retentionSweep(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"removed": res, "retention_ms": h.cfg.RetentionMS})
}

type clockBody struct {
	AdvanceMS int64 `json:"advance_ms"`
}

// hClockSeam moves this host's clock forward (never back): for witnessing
// expiry and retention without waiting. It moves only this host's clock;
// hosts sharing a store keep theirs.
func (h *Host) hClockSeam(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var b clockBody
		if d := decode(r, &b); d != nil {
			writeDenial(w, d)
			return
		}
		if b.AdvanceMS < 0 {
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "the clock only moves forward"))
			return
		}
		h.clockOffset.Add(b.AdvanceMS)
	}
	writeJSON(w, 200, map[string]any{"now": msTime(h.nowMS()), "offset_ms": h.clockOffset.Load()})
}
