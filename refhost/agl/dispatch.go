package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ExecContext describes where in a workflow the dispatch happens. Race marks
// a call made from a branch of a race, where the losing branch is cancelled.
type ExecContext struct {
	Race bool `json:"race,omitempty"`
}

type dispatchRequest struct {
	actionRequest
	PermitToken string      `json:"permit_token,omitempty"`
	Context     ExecContext `json:"context"`
	// ScopeID names the budget scope the call is charged to; without it the
	// execution's root scope, if it has one.
	ScopeID string `json:"scope_id,omitempty"`
	// A decision or approval supplied by the client is never authority; the
	// members are recognised only so the refusal can say so precisely.
	Decision json.RawMessage `json:"decision,omitempty"`
	Approval json.RawMessage `json:"approval,omitempty"`
}

func (h *Host) hDispatch(w http.ResponseWriter, r *http.Request) {
	var req dispatchRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	f := h.newFlight(r.Context())
	defer h.land(f)
	op, d, err := h.dispatchFlight(&req, f)
	if err != nil && d == nil && f.wasCancelled() {
		// Cancelled while it read the store, before anything was claimed.
		d, err = cancelledDenial(0, f.opID), nil
	}
	if d != nil || err != nil {
		if d != nil {
			h.auditDenial(&req, d)
		}
		h.writeEvalErr(w, d, err)
		return
	}
	writeJSON(w, 200, op.view())
}

// auditDenial records a refused dispatch in its own transaction: nothing
// else was written, so there is nothing for it to be atomic with.
func (h *Host) auditDenial(req *dispatchRequest, d *Denial) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.st.tx(ctx, func(tx *sql.Tx) error {
		return h.audit(tx, auditRecord{Event: "dispatch_denied", ExecutionID: req.ExecutionID, QualifiedName: req.Operation,
			Principal: req.Principal, AgentID: req.AgentID, PolicyFingerprint: h.policyFP, DenialCode: d.Code, DenialStep: d.Step})
	})
	if err != nil {
		h.log.Warn("agl: could not audit a denial", "code", d.Code, "err", err)
	}
}

// dispatchFlight is the enforcing dispatcher: the nine steps in the spec's
// order. Until the claim it runs in f.pre (the request's context, which a
// cancellation also ends); from the claim on in f.exec, which outlives the
// client and only a cancellation ends.
func (h *Host) dispatchFlight(req *dispatchRequest, f *flight) (*operationRow, *Denial, error) {
	ctx := f.pre
	if len(req.Decision) > 0 || len(req.Approval) > 0 {
		return nil, deny(403, "unauthenticated_decision", "authorization_denied", 5,
			"an approval is a permit minted by the trusted resolver; a decision inside a dispatch request is not one"), nil
	}
	// The permit is looked up once, up front, only so steps 1 and 4 can name
	// the precise reason; it is validated at step 5 and claimed at step 7.
	var permit *permitRow
	var proposal *proposalRow
	if req.PermitToken != "" {
		p, err := h.permitByToken(ctx, h.st.db, req.PermitToken)
		if err != nil && !isNoRows(err) {
			return nil, nil, err
		}
		if p != nil {
			permit = p
			if proposal, err = h.loadProposal(ctx, h.st.db, p.ProposalID); err != nil {
				return nil, nil, err
			}
		}
	}
	// A resource that already left Authorized may have been moved by this
	// very permit (perhaps by another host a moment ago): say so precisely.
	consumed := func(*resourceRow) *Denial {
		if permit == nil {
			return nil
		}
		if fresh, err := h.permitByID(ctx, h.st.db, permit.ID); err == nil && fresh.ConsumedAt != nil {
			return h.consumedDenial(ctx, h.st.db, fresh, 4)
		}
		return nil
	}

	// Steps 1-4.
	ev, d, err := h.evaluate(ctx, &req.actionRequest, false, consumed)
	if d != nil || err != nil {
		return nil, d, err
	}
	if proposal != nil && (proposal.ContractFP != ev.contract.Fingerprint || proposal.ImplFP != ev.contract.ImplementationFingerprint) {
		return nil, deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 1,
			"the permit was issued for contract %s; %s is now registered as %s", proposal.ContractFP, ev.contract.QualifiedName, ev.contract.Fingerprint), nil
	}
	if req.Context.Race && contains(ev.contract.PossibleEffects, "external_write") {
		return nil, deny(403, "unsupported_protected_race", "authorization_denied", 4,
			"a protected external write cannot run inside a race: cancelling the loser cannot retract its effect"), nil
	}

	// Step 5: the approval, against the exact canonical proposal.
	needPermit := ev.contract.ApprovalRequirement.Required || req.PermitToken != ""
	if needPermit {
		if d := h.checkPermit(ctx, ev, req.PermitToken, permit, proposal); d != nil {
			return nil, d, nil
		}
	}

	if proposal != nil {
		h.track(f, proposal.OperationID)
	}

	// Step 6: admission (a concurrency slot and the budget of the scopes the
	// call is charged to), then authorization again, since it may have
	// changed while this request waited.
	chain, d, err := h.scopeChain(ctx, req.ExecutionID, req.ScopeID)
	if d != nil || err != nil {
		return nil, d, err
	}
	adm, d, err := h.admit(f, chain, h.gateOf(ev))
	if d != nil || err != nil {
		return nil, d, err
	}
	defer adm.release()
	if d := h.recheck(ctx, h.st.db, ev.grant.ID, permit, 6); d != nil {
		return nil, d, nil
	}

	h.meet(ctx, pointClaim, ev.resourceID())

	// Step 7: claim permit, resource revision and operation, charge the
	// budget, persist the intent and its audit record, all in one
	// transaction. The reservation is spent either way.
	op, d, err := h.claim(f, ev, permit, proposal, adm.chain)
	adm.releaseBudget()
	if d != nil || err != nil {
		return nil, d, err
	}
	f.decide(true)
	if f.opID == "" {
		h.track(f, op.ID)
	}

	// Steps 8 and 9 must finish even if the caller goes away: abandoning a
	// started call would turn a knowable outcome into an Unknown one. Only a
	// cancellation abandons it.
	return h.execute(f.exec, ev, op, permit)
}

// consumedDenial reads through q: inside the claim transaction that must be
// the transaction itself, since asking the pool for a second connection while
// holding the write lock can starve (every other connection may be waiting
// for that lock).
func (h *Host) consumedDenial(ctx context.Context, q querier, p *permitRow, step int) *Denial {
	var state string
	q.QueryRowContext(ctx, `SELECT state FROM operations WHERE id=?`, p.ConsumedBy).Scan(&state)
	if state == "Unknown" {
		d := deny(409, "uncertain_completion", "uncertain_completion", step,
			"permit %s was already used by operation %s, whose outcome is not established; it awaits reconciliation, not a retry", p.ID, p.ConsumedBy)
		d.Detail = map[string]any{"operation_id": p.ConsumedBy, "operation_state": state}
		return d
	}
	d := deny(409, "permit_consumed", "permit_claimed", step, "permit %s was already claimed by operation %s", p.ID, p.ConsumedBy)
	d.Detail = map[string]any{"operation_id": p.ConsumedBy, "operation_state": state}
	return d
}

func (h *Host) checkPermit(ctx context.Context, ev *evaluation, token string, p *permitRow, prop *proposalRow) *Denial {
	now := h.nowMS()
	switch {
	case token == "":
		return deny(403, "unbound_approval", "authorization_denied", 5, "%s requires an approval permit", ev.contract.QualifiedName)
	case p == nil:
		return deny(403, "unbound_approval", "authorization_denied", 5, "the permit token is not one the approval resolver issued")
	case p.RevokedAt != nil:
		return deny(403, "permit_revoked", "approval_expired_or_revoked", 5, "permit %s was revoked", p.ID)
	case now >= p.ExpiresAt:
		return deny(403, "permit_expired", "approval_expired_or_revoked", 5, "permit %s expired at %s", p.ID, msTime(p.ExpiresAt))
	case p.ConsumedAt != nil:
		return h.consumedDenial(ctx, h.st.db, p, 5)
	case prop.PolicyFP != h.policyFP:
		return deny(403, "policy_fingerprint_mismatch", "proposal_mismatch", 5, "the permit was issued under deployment policy %s; the host now runs %s", prop.PolicyFP, h.policyFP)
	case prop.Digest != ev.digest:
		d := deny(403, "proposal_mismatch", "proposal_mismatch", 5, "the action differs from the approved snapshot")
		d.Detail = map[string]any{"approved_digest": prop.Digest, "presented_digest": ev.digest, "differs": snapshotDiff(prop.Snapshot, ev.snapshot)}
		return d
	}
	return nil
}

// recheck re-reads grant and permit state: revocation or expiry that
// happened after steps 3 and 5 must still stop the dispatch.
func (h *Host) recheck(ctx context.Context, q querier, grantID string, p *permitRow, step int) *Denial {
	g, err := h.grantByID(ctx, q, grantID)
	if err != nil {
		return deny(403, "authority_missing", "authorization_denied", step, "grant %s is gone", grantID)
	}
	if d := h.checkGrantChain(ctx, q, g, step); d != nil {
		return d
	}
	if p != nil {
		fresh, err := h.permitByID(ctx, q, p.ID)
		if err != nil {
			return deny(403, "unbound_approval", "authorization_denied", step, "permit %s is gone", p.ID)
		}
		if fresh.RevokedAt != nil {
			return deny(403, "permit_revoked", "approval_expired_or_revoked", step, "permit %s was revoked", p.ID)
		}
		if h.nowMS() >= fresh.ExpiresAt {
			return deny(403, "permit_expired", "approval_expired_or_revoked", step, "permit %s expired", p.ID)
		}
	}
	return nil
}

// The claim's statements, the permit, the operation and the resource each
// guarded by the state it must still be in.
var (
	sqlContractFP     = hot(`SELECT contract_fp FROM contracts WHERE qualified_name=?`)
	sqlConsumePermit  = hot(`UPDATE permits SET consumed_at=?, consumed_by=? WHERE id=? AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at>?`)
	sqlClaimOperation = hot(`UPDATE operations SET state='Claimed', permit_id=?, attempt=1, owner_instance=?, updated_at=? WHERE id=? AND state='Pending'`)
	sqlClaimResource  = hot(`UPDATE resources SET state='Dispatching', last_operation=?, updated_at=? WHERE id=? AND revision=? AND state=?`)
	sqlOutcome        = hot(`UPDATE operations SET state=?, outcome=?, attempt=?, updated_at=? WHERE id=? AND state='Claimed'`)
	sqlOutcomeRes     = hot(`UPDATE resources SET state=?, updated_at=? WHERE id=? AND state='Dispatching' AND last_operation=?`)
)

func (h *Host) claim(f *flight, ev *evaluation, permit *permitRow, proposal *proposalRow, chain []string) (*operationRow, *Denial, error) {
	ctx := f.pre
	// The statements inside the transaction run without the request's
	// context, as tx.Exec does: only the cancellation check ends a claim.
	bg := context.Background()
	var opID string
	var op *operationRow
	err := h.st.tx(ctx, func(tx *sql.Tx) error {
		now := h.nowMS()
		if proposal == nil {
			// No approval: the snapshot is persisted now, as the intent.
			p, err := h.insertProposal(tx, ev, "")
			if err != nil {
				return err
			}
			proposal = p
			if _, err := tx.Exec(`INSERT INTO operations(id,execution_id,proposal_id,qualified_name,principal,agent_id,snapshot_digest,state,
				attempt,idempotency_key,owner_instance,created_at,updated_at) VALUES(?,?,?,?,?,?,?,'Claimed',1,?,?,?,?)`,
				p.OperationID, p.ExecutionID, p.ID, p.QualifiedName, p.Principal, p.AgentID, p.Digest, p.OperationID, h.instance, now, now); err != nil {
				return err
			}
		}
		opID = proposal.OperationID
		if d := h.recheck(ctx, tx, ev.grant.ID, permit, 7); d != nil {
			return errAbort{d}
		}
		// The claim is a use of the grant and of every grant it was
		// delegated from (delegation.go).
		if err := h.chargeUses(bg, tx, ev.grant, opID); err != nil {
			return err
		}
		// The contract and the agent's tool set may have changed since
		// steps 1 and 3 read them; inside the claim nothing can change.
		var fp string
		if err := h.st.row(bg, tx, sqlContractFP, ev.contract.QualifiedName).Scan(&fp); err != nil {
			return err
		}
		if fp != ev.contract.Fingerprint {
			return errAbort{deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 7, "%s was re-registered during dispatch", ev.contract.QualifiedName)}
		}
		if ag, err := h.loadAgent(ctx, tx, ev.req.AgentID); err != nil || ag.Principal != ev.req.Principal || !contains(ag.Tools, ev.req.Operation) {
			return errAbort{deny(403, "tool_not_in_toolset", "authorization_denied", 7, "agent %s lost %s during dispatch", ev.req.AgentID, ev.req.Operation)}
		}
		if permit != nil {
			res, err := h.st.exec(bg, tx, sqlConsumePermit, now, opID, permit.ID, now)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				fresh, err := h.permitByID(ctx, tx, permit.ID)
				if err != nil {
					return err
				}
				return errAbort{h.consumedDenial(ctx, tx, fresh, 7)}
			}
			res, err = h.st.exec(bg, tx, sqlClaimOperation, permit.ID, h.instance, now, opID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return errAbort{deny(409, "permit_consumed", "permit_claimed", 7, "operation %s was already claimed", opID)}
			}
		}
		// Compare-and-swap on the revision: a concurrent transition of the
		// same resource loses here even under a distinct permit.
		for _, pc := range ev.contract.ProtocolPreconditions {
			rh := ev.handles[pc.Argument]
			res, err := h.st.exec(bg, tx, sqlClaimResource, opID, now, rh.ResourceID, rh.Revision, pc.State)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				var rev int64
				var st string
				tx.QueryRow(`SELECT revision, state FROM resources WHERE id=?`, rh.ResourceID).Scan(&rev, &st)
				if rev != rh.Revision {
					return errAbort{deny(409, "stale_revision", "stale_revision", 7, "resource %s moved to revision %d", rh.ResourceID, rev)}
				}
				return errAbort{deny(409, "invalid_protocol_state", "invalid_protocol_state", 7, "resource %s is %s", rh.ResourceID, st)}
			}
		}
		if err := h.charge(tx, chain); err != nil {
			return err
		}
		rec := h.opAudit("claimed", ev, proposal, permit)
		rec.Claim, rec.Attempt = msTime(now), 1
		rec.FieldDigests = h.fieldDigests(proposal.Snapshot["arguments"])
		rec.ResourceState = stateIf(proposal.ResourceID, "Dispatching")
		if err := h.audit(tx, rec); err != nil {
			return err
		}
		h.hold(ctx, boundaryClaim, ev.contract.QualifiedName)
		if err := h.fire(ctx, boundaryClaim, ev.contract.QualifiedName); err != nil {
			return err
		}
		// The claimed operation as this transaction commits it, read on
		// the transaction's own connection rather than in a second read
		// transaction after the commit.
		var err error
		if op, err = h.loadOperation(bg, tx, opID); err != nil {
			return err
		}
		// A cancellation that arrived before the commit wins: roll back.
		if f.wasCancelled() {
			return errCancelled
		}
		return nil
	})
	if err != nil {
		var ab errAbort
		if errors.As(err, &ab) {
			return nil, ab.d, nil
		}
		if errors.Is(err, errCancelled) || f.wasCancelled() {
			return nil, cancelledDenial(7, opID), nil
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			h.log.Error("agl: claim transaction failed; nothing was dispatched", "err", err)
			d := deny(500, "persistence_failure", "persistence_failure", 7, "the claim and intent could not be persisted, so nothing was dispatched")
			d.Detail = map[string]any{"effect": "none"}
			return nil, d, nil
		}
		return nil, nil, err
	}
	return op, nil, nil
}

func (h *Host) opAudit(event string, ev *evaluation, p *proposalRow, permit *permitRow) auditRecord {
	rec := auditRecord{Event: event, ExecutionID: p.ExecutionID, OperationID: p.OperationID, QualifiedName: p.QualifiedName,
		Principal: p.Principal, AgentID: p.AgentID, ContractFingerprint: p.ContractFP, PolicyFingerprint: p.PolicyFP,
		ResourceID: p.ResourceID, ResourceRevision: p.Revision, ProposalID: p.ID, ProposalDigest: p.Digest, GrantID: p.GrantID}
	if permit != nil {
		rec.PermitID, rec.DecisionActor, rec.DecisionAt = permit.ID, permit.Approver, msTime(permit.IssuedAt)
	}
	return rec
}

var outcomeState = map[string]string{outcomeSuccess: "Completed", outcomeNoEffect: "FailedNoEffect", outcomeUncertain: "Unknown"}

// execute runs steps 8 and 9.
func (h *Host) execute(ctx context.Context, ev *evaluation, op *operationRow, permit *permitRow) (*operationRow, *Denial, error) {
	// ctx ends the handler's call when the dispatch is cancelled; what the
	// host records about it is written whatever happened to the call.
	store := context.WithoutCancel(ctx)
	prop, err := h.loadProposal(store, h.st.db, op.ProposalID)
	if err != nil {
		return nil, nil, err
	}
	timeout := time.Duration(h.cfg.HandlerTimeoutMS) * time.Millisecond
	if t := ev.contract.SchedulingContract.TimeoutMS; t > 0 && time.Duration(t)*time.Millisecond < timeout {
		timeout = time.Duration(t) * time.Millisecond
	}
	// The handler gets the authorized snapshot's arguments, not the request.
	args := prop.Snapshot["arguments"]
	dest, _ := h.destination(ev.impl, &ev.contract.OperationContract)
	attempt := 1
	var res handlerResult
	for {
		// A hold armed by the seam stops the dispatch here, before the
		// handler's deadline starts; a host stopped meanwhile sends nothing
		// (invoke checks, as for a delay).
		h.hold(ctx, boundaryExternalCall, op.QualifiedName)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		res = h.invoke(hctx, ev.impl, dest, op.ID, op.QualifiedName, args, handlerContext{
			ExecutionID: prop.ExecutionID, Principal: prop.Principal, AgentID: prop.AgentID, GrantID: ev.grant.ID,
			PermitID: nullStr(permitID(permit)), ProposalID: prop.ID, SnapshotDigest: prop.Digest, Attempt: attempt})
		cancel()
		if res.Kind == outcomeAbandoned {
			return h.abandon(store, op.ID, res)
		}
		if ctx.Err() != nil && res.Kind == outcomeUncertain {
			// Cancelled while the call was in flight: whether it took
			// effect is exactly what is not known. Never retried.
			res.Failure, res.Reason = failureCancelled, "cancelled while the call was in flight"
		}
		if !contains(ev.impl.Effects, "external_write") && res.Kind == outcomeUncertain {
			// A read has no effect to be uncertain about.
			res.Kind, res.Reason = outcomeNoEffect, "read failed: "+res.Reason
		}
		if res.Kind == outcomeSuccess && ev.contract.OutputType != nil {
			if _, err := ev.contract.OutputType.materialize(toValueOrNil(res.Output), "/output", nil); err != nil {
				res = handlerResult{Kind: outcomeUncertain, Failure: failureUnreadableReceipt, HTTPCode: res.HTTPCode, Reason: "receipt failed output validation: " + err.Error()}
			}
		}
		// An uncertain write is retried only when the destination dedupes
		// by key, the contract says so, its selector names the failure,
		// attempts remain, and authority and approval are still valid after
		// the backoff.
		if res.Kind != outcomeUncertain || res.Failure == failureCancelled || ev.contract.IdempotencyContract.Kind != "destination_key" || !dest.HonoursIdempotencyKey {
			break
		}
		sc := ev.contract.SchedulingContract
		if attempt >= sc.MaxAttempts {
			if sc.MaxAttempts > 1 {
				res.Reason += fmt.Sprintf("; no retry: all %d attempts made", sc.MaxAttempts)
			}
			break
		}
		if !sc.retries(res.Failure) {
			res.Reason += "; no retry: the contract's retry selector does not name " + res.Failure
			break
		}
		if sc.BackoffMS > 0 {
			t := time.NewTimer(time.Duration(sc.BackoffMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-h.stop:
				t.Stop()
				res.Reason += "; no retry: the host stopped"
				return h.abandon(store, op.ID, res)
			case <-ctx.Done():
				t.Stop()
			}
			if ctx.Err() != nil {
				res.Failure, res.Reason = failureCancelled, res.Reason+"; no retry: the dispatch was cancelled"
				break
			}
		}
		if d := h.recheck(store, h.st.db, ev.grant.ID, permit, 8); d != nil {
			res.Reason += "; no retry: " + d.Code
			break
		}
		attempt++
		err := h.st.tx(store, func(tx *sql.Tx) error {
			if _, err := tx.Exec(`UPDATE operations SET attempt=?, updated_at=? WHERE id=? AND state='Claimed'`, attempt, h.nowMS(), op.ID); err != nil {
				return err
			}
			rec := h.opAudit("retry", ev, prop, permit)
			rec.Attempt, rec.Detail = attempt, "previous attempt uncertain; destination deduplicates by idempotency key"
			return h.audit(tx, rec)
		})
		if err != nil {
			attempt--
			res.Reason += "; no retry: attempt could not be persisted"
			break
		}
	}

	// Step 9: outcome and protocol state persisted together before the
	// caller hears anything.
	state := outcomeState[res.Kind]
	if err := h.persistOutcome(store, ev, prop, permit, op.ID, state, res, attempt, true); err != nil {
		h.log.Error("agl: outcome could not be persisted; recording Unknown", "operation", op.ID, "err", err)
		res = handlerResult{Kind: outcomeUncertain, HTTPCode: res.HTTPCode,
			Reason: "the outcome could not be persisted after the external call (" + res.Kind + ")"}
		if err2 := h.persistOutcome(store, ev, prop, permit, op.ID, "Unknown", res, attempt, false); err2 != nil {
			d := deny(500, "persistence_failure", "persistence_failure", 9,
				"the outcome could not be persisted; the operation stays Claimed and becomes Unknown on recovery")
			d.Detail = map[string]any{"operation_id": op.ID, "effect": "unknown"}
			return nil, d, nil
		}
	}
	out, err := h.loadOperation(store, h.st.db, op.ID)
	return out, nil, err
}

// abandon leaves an operation Claimed for recovery, as a crash would: the
// host is stopping, so it starts no further attempt and writes nothing more.
func (h *Host) abandon(ctx context.Context, opID string, res handlerResult) (*operationRow, *Denial, error) {
	d := deny(503, "host_stopping", "persistence_failure", 8, "the host stopped before the operation finished; recovery will settle it")
	d.Detail = map[string]any{"operation_id": opID, "effect": "unknown"}
	return nil, d, nil
}

func permitID(p *permitRow) string {
	if p == nil {
		return ""
	}
	return p.ID
}

func toValueOrNil(m map[string]any) any {
	v, err := toValue(m)
	if err != nil {
		return nil
	}
	return v
}

func (h *Host) persistOutcome(ctx context.Context, ev *evaluation, prop *proposalRow, permit *permitRow, opID, state string, res handlerResult, attempt int, faultable bool) error {
	outcome, _ := json.Marshal(res)
	return h.st.tx(ctx, func(tx *sql.Tx) error {
		now := h.nowMS()
		r, err := h.st.exec(context.Background(), tx, sqlOutcome, state, string(outcome), attempt, now, opID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			// Recovery already declared it Unknown; keep that, it is safe.
			return nil
		}
		resState := ""
		if prop.ResourceID != "" && ev.contract.ProtocolOutcomes != nil {
			resState = map[string]string{"Completed": ev.contract.ProtocolOutcomes.Success, "FailedNoEffect": ev.contract.ProtocolOutcomes.NoEffect,
				"Unknown": ev.contract.ProtocolOutcomes.Uncertain}[state]
			if _, err := h.st.exec(context.Background(), tx, sqlOutcomeRes, resState, now, prop.ResourceID, opID); err != nil {
				return err
			}
		}
		rec := h.opAudit("outcome", ev, prop, permit)
		rec.Attempt, rec.Outcome, rec.ResourceState, rec.Detail = attempt, state, resState, res.Reason
		if err := h.audit(tx, rec); err != nil {
			return err
		}
		if faultable {
			return h.fire(ctx, boundaryCompletion, ev.contract.QualifiedName)
		}
		return nil
	})
}
