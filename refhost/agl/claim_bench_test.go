package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/benchpair"
)

// BenchmarkDurableClaim measures the operation store's atomic claim, the
// transaction the dispatcher commits at step 7 (grant and permit re-read,
// contract and tool set re-checked, the permit consumed, the operation
// claimed, the resource's revision compared and swapped, the audit record
// appended, the operation read back), against a raw single-row transaction
// loop: BEGIN IMMEDIATE; UPDATE one row WHERE state='Pending' (a prepared
// statement); COMMIT, on a store opened with the same DSN (WAL,
// synchronous=FULL, BEGIN IMMEDIATE).
// Both commit once per claim, so both wait for one fsync of the
// write-ahead log; what the raw loop leaves out is everything that makes
// the claim a claim of this permit and nothing else. Each claim takes a
// permit approved before the timed loop, with steps 1 to 6 already run.
// Reported: claims per second for both, and the ratio of times (goal: at
// least 2,000 claims/s, or at most 1.25x the raw loop's time, i.e. at
// least 0.8x its rate).
func BenchmarkDurableClaim(b *testing.B) {
	bh := newBenchHost(b)
	_, actions := bh.approveMany(b, b.N)
	h := bh.h
	ctx := context.Background()

	// Steps 1 to 6 for every permit, ahead of the loop.
	type prepared struct {
		ev       *evaluation
		permit   *permitRow
		proposal *proposalRow
	}
	preps := make([]prepared, b.N)
	for i, a := range actions {
		var req dispatchRequest
		if err := json.Unmarshal(a.body, &req); err != nil {
			b.Fatal(err)
		}
		p, err := h.permitByToken(ctx, h.st.db, req.PermitToken)
		if err != nil {
			b.Fatal(err)
		}
		prop, err := h.loadProposal(ctx, h.st.db, p.ProposalID)
		if err != nil {
			b.Fatal(err)
		}
		ev, d, err := h.evaluate(ctx, &req.actionRequest, false, nil)
		if d != nil || err != nil {
			b.Fatalf("evaluate: %v %v", d, err)
		}
		if d := h.checkPermit(ctx, ev, req.PermitToken, p, prop); d != nil {
			b.Fatalf("permit: %v", d)
		}
		preps[i] = prepared{ev, p, prop}
	}

	// The raw loop's rows, in the operations table of a store of the same
	// schema and DSN.
	raw, err := openStore(filepath.Join(b.TempDir(), "raw.db"), time.Duration(h.cfg.BusyTimeoutMS)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.close()
	ids := make([]string, b.N)
	now := time.Now().UnixMilli()
	err = raw.tx(ctx, func(tx *sql.Tx) error {
		for i := range ids {
			ids[i] = newID("op_")
			if _, err := tx.Exec(`INSERT INTO operations(id,execution_id,qualified_name,principal,agent_id,snapshot_digest,state,idempotency_key,created_at,updated_at)
				VALUES(?,'exec',?,'p','a','sha256:x','Pending',?,?,?)`, ids[i], sendOp, ids[i], now, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// Prepared, as the store prepares its own statements: neither side
	// pays for parsing SQL on every claim.
	update, err := raw.db.Prepare(`UPDATE operations SET state='Claimed', updated_at=? WHERE id=? AND state='Pending'`)
	if err != nil {
		b.Fatal(err)
	}
	defer update.Close()

	i, j := 0, 0
	rawPer, claimPer := benchpair.Run(b, "claim/raw", func(b *testing.B) {
		tx, err := raw.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
		if err != nil {
			b.Fatal(err)
		}
		res, err := tx.Stmt(update).Exec(time.Now().UnixMilli(), ids[j])
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			b.Fatalf("raw claim of %s changed %d rows", ids[j], n)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		j++
	}, func(b *testing.B) {
		p := preps[i]
		i++
		f := h.newFlight(ctx)
		op, d, err := h.claim(f, p.ev, p.permit, p.proposal, nil)
		h.land(f)
		if d != nil || err != nil {
			b.Fatalf("claim: %v %v", d, err)
		}
		if op.State != "Claimed" {
			b.Fatalf("claimed operation is %s", op.State)
		}
	})
	b.ReportMetric(float64(time.Second)/float64(claimPer), "claims/s")
	b.ReportMetric(float64(time.Second)/float64(rawPer), "raw-claims/s")
}
