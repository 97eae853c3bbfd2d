package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
)

func ptr[T any](v T) *T { return &v }

// draftType is the payload type of an email draft. Defaults (cc, priority)
// are materialized at every revision, so approvers see them.
var draftType = &TypeSpec{Type: "object", Required: []string{"from", "to", "subject", "body"}, Properties: map[string]*TypeSpec{
	"from":     {Type: "string", MinLength: ptr(3), MaxLength: ptr(320)},
	"to":       {Type: "array", MinItems: ptr(1), MaxItems: ptr(100), Items: &TypeSpec{Type: "string", MinLength: ptr(3), MaxLength: ptr(320)}},
	"cc":       {Type: "array", MaxItems: ptr(100), Items: &TypeSpec{Type: "string", MinLength: ptr(3), MaxLength: ptr(320)}, Default: json.RawMessage(`[]`)},
	"subject":  {Type: "string", MaxLength: ptr(998)},
	"body":     {Type: "string", MaxLength: ptr(262144)},
	"priority": {Type: "string", Enum: []string{"low", "normal", "high"}, Default: json.RawMessage(`"normal"`)},
}}

type resourceRow struct {
	ID            string
	Kind          string
	Owner         string
	Revision      int64
	State         string
	Payload       any
	PayloadDigest string
	LastOperation string
	Handle        string
}

func (r *resourceRow) view() map[string]any {
	return map[string]any{
		"resource_id": r.ID, "kind": r.Kind, "owner": r.Owner, "revision": r.Revision, "state": r.State,
		"payload": r.Payload, "payload_digest": r.PayloadDigest, "handle": r.Handle,
		"last_operation_id": nullStr(r.LastOperation),
	}
}

var sqlLoadResource = hot(`SELECT r.id, r.kind, r.owner, r.revision, r.state, r.payload, r.payload_digest,
		COALESCE(r.last_operation,''), v.handle FROM resources r JOIN resource_revisions v ON v.resource_id=r.id AND v.revision=r.revision
		WHERE r.id=?`)

func (h *Host) loadResource(ctx context.Context, q querier, id string) (*resourceRow, error) {
	r := &resourceRow{}
	var payload string
	err := h.st.row(ctx, q, sqlLoadResource, id).Scan(&r.ID, &r.Kind, &r.Owner, &r.Revision, &r.State, &payload, &r.PayloadDigest, &r.LastOperation, &r.Handle)
	if err != nil {
		return nil, err
	}
	r.Payload, err = ParseJSON([]byte(payload))
	return r, err
}

// resolvedHandle is what trusted lookup of an opaque handle yields: an
// immutable revision of a resource and that revision's payload.
type resolvedHandle struct {
	ResourceID    string
	Kind          string
	Owner         string
	Revision      int64
	Payload       any
	PayloadDigest string
}

var sqlResolveHandle = hot(`SELECT v.resource_id, r.kind, r.owner, v.revision, v.payload, v.payload_digest
		FROM resource_revisions v JOIN resources r ON r.id=v.resource_id WHERE v.handle=?`)

func (h *Host) resolveHandle(ctx context.Context, q querier, handle string) (*resolvedHandle, error) {
	rh := &resolvedHandle{}
	var payload string
	err := h.st.row(ctx, q, sqlResolveHandle, handle).
		Scan(&rh.ResourceID, &rh.Kind, &rh.Owner, &rh.Revision, &payload, &rh.PayloadDigest)
	if err != nil {
		return nil, err
	}
	rh.Payload, err = ParseJSON([]byte(payload))
	return rh, err
}

type draftRequest struct {
	Owner            string          `json:"owner"`
	ExpectedRevision int64           `json:"expected_revision,omitempty"`
	Payload          json.RawMessage `json:"payload"`
}

func (h *Host) draftPayload(raw json.RawMessage) (any, string, string, *Denial) {
	v, err := ParseJSON(raw)
	if err != nil {
		return nil, "", "", deny(422, "schema_error", "schema_error", 0, "payload: %v", err)
	}
	m, err := draftType.materialize(v, "/payload", nil)
	if err != nil {
		return nil, "", "", deny(422, "schema_error", "schema_error", 0, "%v", err)
	}
	dg, _, err := Digest(m)
	if err != nil {
		return nil, "", "", deny(422, "schema_error", "schema_error", 0, "%v", err)
	}
	js, _ := json.Marshal(m)
	return m, dg, string(js), nil
}

func (h *Host) hCreateDraft(w http.ResponseWriter, r *http.Request) {
	var req draftRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.Owner == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "owner is required"))
		return
	}
	m, dg, js, d := h.draftPayload(req.Payload)
	if d != nil {
		writeDenial(w, d)
		return
	}
	res := &resourceRow{ID: newID("res_"), Kind: "email_draft", Owner: req.Owner, Revision: 1, State: "Draft",
		Payload: m, PayloadDigest: dg, Handle: randomToken("hdl_")}
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		now := h.nowMS()
		if _, err := tx.Exec(`INSERT INTO resources(id,kind,owner,revision,state,payload,payload_digest,updated_at) VALUES(?,?,?,?,?,?,?,?)`,
			res.ID, res.Kind, res.Owner, 1, "Draft", js, dg, now); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO resource_revisions VALUES(?,?,?,?,?,?)`, res.ID, 1, js, dg, res.Handle, now); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "resource_created", ResourceID: res.ID, ResourceRevision: 1, ResourceState: "Draft", Principal: req.Owner})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, res.view())
}

// editableStates: an edit makes a new revision back in Draft. It never
// changes an authorized snapshot in place; approvals of the old revision
// stop working because their revision is no longer current.
var editableStates = map[string]bool{"Draft": true, "Proposed": true, "Authorized": true, "Denied": true}

func (h *Host) hEditDraft(w http.ResponseWriter, r *http.Request) {
	var req draftRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	m, dg, js, d := h.draftPayload(req.Payload)
	if d != nil {
		writeDenial(w, d)
		return
	}
	id := r.PathValue("id")
	h.meet(r.Context(), pointEdit, id)
	var res *resourceRow
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		cur, err := h.loadResource(r.Context(), tx, id)
		if err != nil {
			return err
		}
		switch {
		case cur.Owner != req.Owner:
			return errAbort{deny(403, "not_resource_owner", "authorization_denied", 0, "resource %s belongs to another principal", id)}
		case req.ExpectedRevision != cur.Revision:
			return errAbort{deny(409, "stale_revision", "stale_revision", 0, "resource %s is at revision %d, not %d", id, cur.Revision, req.ExpectedRevision)}
		case !editableStates[cur.State]:
			return errAbort{deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "a resource in state %s cannot be edited", cur.State)}
		}
		rev, now := cur.Revision+1, h.nowMS()
		handle := randomToken("hdl_")
		if _, err := tx.Exec(`UPDATE resources SET revision=?, state='Draft', payload=?, payload_digest=?, updated_at=? WHERE id=? AND revision=?`,
			rev, js, dg, now, id, cur.Revision); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO resource_revisions VALUES(?,?,?,?,?,?)`, id, rev, js, dg, handle, now); err != nil {
			return err
		}
		// Pending approval requests for older revisions can no longer be decided.
		if _, err := tx.Exec(`UPDATE approval_requests SET status='invalidated', decided_at=? WHERE status='pending'
			AND proposal_id IN (SELECT id FROM proposals WHERE resource_id=? AND revision<?)`, now, id, rev); err != nil {
			return err
		}
		res = &resourceRow{ID: id, Kind: cur.Kind, Owner: cur.Owner, Revision: rev, State: "Draft", Payload: m, PayloadDigest: dg, Handle: handle}
		return h.audit(tx, auditRecord{Event: "resource_revised", ResourceID: id, ResourceRevision: rev, ResourceState: "Draft", Principal: req.Owner})
	})
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such resource"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, res.view())
}

func (h *Host) hGetResource(w http.ResponseWriter, r *http.Request) {
	res, err := h.loadResource(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such resource"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, res.view())
}
