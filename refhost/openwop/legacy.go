package openwop

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
)

// The legacy-record seams import a negotiation.decided record as a host
// version from before RFC 0242 wrote it: a payload without requested. An
// operator meets such records after an upgrade; RFC 0242's Compatibility
// section keeps them valid on replay and poll, so the host serves them as
// they were written, like any other record.
//
//	POST /conformance/seams/sample/legacy/host-event {"workspaceId", "payload"}: a durable host event of the caller's tenant -> {"eventId"}
//	POST /conformance/seams/sample/legacy/run        {"payload"}: a run of the caller's tenant whose log holds the record -> {"runId"}

type legacyRecord struct {
	WorkspaceID string          `json:"workspaceId"`
	Payload     json.RawMessage `json:"payload"`
}

// legacyPayload reads the record's payload: a JSON object naming its
// protocol, outcome and at, and no requested (else it is no legacy record).
func (h *Host) legacyPayload(w http.ResponseWriter, r *http.Request) (legacyRecord, string, bool) {
	var in legacyRecord
	if !h.readBody(w, r, &in) {
		return in, "", false
	}
	var p map[string]any
	dec := json.NewDecoder(bytes.NewReader(in.Payload))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil || p == nil {
		writeError(w, http.StatusBadRequest, "bad_request", "payload must be a JSON object")
		return in, "", false
	}
	at, _ := p["at"].(string)
	if _, ok := p["protocol"].(string); !ok || at == "" || p["outcome"] == nil {
		writeError(w, http.StatusBadRequest, "bad_request", "payload must name protocol, outcome and at")
		return in, "", false
	}
	if _, ok := p["requested"]; ok {
		writeError(w, http.StatusBadRequest, "bad_request", "a legacy record has no requested")
		return in, "", false
	}
	return in, at, true
}

func (h *Host) seamLegacyHostEvent(w http.ResponseWriter, r *http.Request) {
	tenant, err := h.authenticate(r)
	if err != nil || tenant == "" {
		unauthorized(w)
		return
	}
	in, at, ok := h.legacyPayload(w, r)
	if !ok {
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "id_error", "cannot make an eventId")
		return
	}
	env := hostEnvelope{EventID: id.String(), Type: typeNegotiationDecided, Timestamp: at,
		Delivery: "durable", Payload: in.Payload, WorkspaceID: in.WorkspaceID}
	b, err := json.Marshal(env)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode_error", "cannot encode the record")
		return
	}
	ctx, cancel := recordContext(r.Context())
	defer cancel()
	if err := h.store.appendHostEvent(ctx, env.EventID, tenant, in.WorkspaceID, env.Type, b); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_error", "cannot store the record")
		return
	}
	h.log.Warn("openwop seam: legacy host event imported", "tenant", tenant, "eventId", env.EventID)
	writeJSON(w, http.StatusOK, map[string]string{"eventId": env.EventID})
}

func (h *Host) seamLegacyRun(w http.ResponseWriter, r *http.Request) {
	tenant, err := h.authenticate(r)
	if err != nil || tenant == "" {
		unauthorized(w)
		return
	}
	in, at, ok := h.legacyPayload(w, r)
	if !ok {
		return
	}
	runID := uuid.NewString()
	ctx, cancel := recordContext(r.Context())
	defer cancel()
	if err := h.store.createRun(ctx, runID, tenant, h.now()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_error", "cannot create run")
		return
	}
	err = h.store.appendRunEvent(ctx, runID, func(seq int64) ([]byte, error) {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		return json.Marshal(runEvent{EventID: id.String(), RunID: runID, Sequence: seq,
			Type: typeNegotiationDecided, Timestamp: at, Payload: in.Payload})
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_error", "cannot store the record")
		return
	}
	h.log.Warn("openwop seam: legacy run record imported", "tenant", tenant, "runId", runID)
	writeJSON(w, http.StatusOK, map[string]string{"runId": runID})
}
