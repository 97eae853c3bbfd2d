package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
	h, preps := prepareClaims(b, b.N)
	ctx := context.Background()

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
		claimOne(b, h, preps[i])
		i++
	})
	b.ReportMetric(float64(time.Second)/float64(claimPer), "claims/s")
	b.ReportMetric(float64(time.Second)/float64(rawPer), "raw-claims/s")
}

// claimPrep is a permit with dispatcher steps 1 to 6 already run.
type claimPrep struct {
	ev       *evaluation
	permit   *permitRow
	proposal *proposalRow
}

// prepareClaims approves n emails and runs steps 1 to 6 for each, ahead of
// the timed loop.
func prepareClaims(b *testing.B, n int) (*Host, []claimPrep) {
	bh := newBenchHost(b)
	_, actions := bh.approveMany(b, n)
	h := bh.h
	ctx := context.Background()
	preps := make([]claimPrep, n)
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
		preps[i] = claimPrep{ev, p, prop}
	}
	return h, preps
}

// claimOne runs the dispatcher's claim of p.
func claimOne(b *testing.B, h *Host, p claimPrep) *operationRow {
	ctx := context.Background()
	f := h.newFlight(ctx)
	op, d, err := h.claim(f, p.ev, p.permit, p.proposal, nil)
	h.land(f)
	if d != nil || err != nil {
		b.Fatalf("claim: %v %v", d, err)
	}
	if op.State != "Claimed" {
		b.Fatalf("claimed operation is %s", op.State)
	}
	return op
}

// BenchmarkClaimChecks splits the claim's cost: the same claim against a
// transaction making exactly its writes (the permit consumed, the
// operation claimed, the resource moved, an audit record of the same size)
// on a store opened with the same DSN, without its reads and checks. The
// ratio is what the checks inside the claim cost on top of its I/O;
// BenchmarkDurableClaim's ratio is that times the cost of writing four rows
// (eight to ten WAL pages) instead of one (two or three).
func BenchmarkClaimChecks(b *testing.B) {
	h, preps := prepareClaims(b, b.N+1)
	ctx := context.Background()
	var claimedRec string
	probe := claimOne(b, h, preps[b.N])
	if err := h.st.db.QueryRow(`SELECT record FROM audit WHERE operation_id=? AND event='claimed'`, probe.ID).Scan(&claimedRec); err != nil {
		b.Fatal(err)
	}
	bare, err := openStore(filepath.Join(b.TempDir(), "writes.db"), time.Duration(h.cfg.BusyTimeoutMS)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	defer bare.close()
	ids := seedBareClaims(b, bare, b.N)
	i, j := 0, 0
	writesPer, claimPer := benchpair.Run(b, "claim/writes", func(b *testing.B) {
		id := ids[j]
		j++
		err := bare.tx(ctx, func(tx *sql.Tx) error {
			t := time.Now().UnixMilli()
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{sqlConsumePermit, []any{t, id, id, t}},
				{sqlClaimOperation, []any{id, "inst", t, id}},
				{sqlClaimResource, []any{id, t, id, 1, "Authorized"}},
				{sqlAuditInsert, []any{t, "claimed", claimedRec, id, "exec"}},
			} {
				res, err := bare.exec(ctx, tx, q.sql, q.args...)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("%s changed %d rows", q.sql, n)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}, func(b *testing.B) {
		claimOne(b, h, preps[i])
		i++
	})
	b.ReportMetric(float64(time.Second)/float64(claimPer), "claims/s")
	b.ReportMetric(float64(time.Second)/float64(writesPer), "writes-only/s")
}

// seedBareClaims puts n permits, operations and resources in st, in the
// states the host's are in when a dispatch arrives, for a bare baseline to
// claim; it returns their ids (one id names all three rows).
func seedBareClaims(b *testing.B, st *store, n int) []string {
	now := time.Now().UnixMilli()
	ids := make([]string, n)
	err := st.tx(context.Background(), func(tx *sql.Tx) error {
		for i := range ids {
			ids[i] = newID("bare_")
			if _, err := tx.Exec(`INSERT INTO permits(id,token_hash,proposal_id,request_id,approver,issued_at,expires_at) VALUES(?,?,?,?,?,?,?)`,
				ids[i], ids[i], ids[i], ids[i], "carol", now, now+3600_000); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO operations(id,execution_id,proposal_id,qualified_name,principal,agent_id,snapshot_digest,state,idempotency_key,created_at,updated_at)
				VALUES(?,?,?,?,?,?,?,'Pending',?,?,?)`, ids[i], "exec", ids[i], sendOp, "p", "a", "sha256:x", ids[i], now, now); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO resources(id,kind,owner,revision,state,payload,payload_digest,updated_at) VALUES(?,?,?,1,'Authorized','{}','sha256:x',?)`,
				ids[i], "email_draft", "p", now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}
