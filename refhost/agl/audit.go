package agl

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"strconv"
)

// auditRecord is what the audit trail keeps. It names grants and permits by
// their public IDs only: bearer tokens never reach this struct (the store
// keeps only their hashes, in other tables), and payloads are referenced by
// proposal ID and digest rather than copied.
type auditRecord struct {
	Seq                 int64          `json:"seq"`
	At                  string         `json:"at"`
	Event               string         `json:"event"`
	Instance            string         `json:"host_instance,omitempty"`
	ExecutionID         string         `json:"execution_id,omitempty"`
	OperationID         string         `json:"operation_id,omitempty"`
	QualifiedName       string         `json:"qualified_name,omitempty"`
	Principal           string         `json:"principal,omitempty"`
	AgentID             string         `json:"agent_id,omitempty"`
	ContractFingerprint string         `json:"contract_fingerprint,omitempty"`
	PolicyFingerprint   string         `json:"policy_fingerprint,omitempty"`
	ResourceID          string         `json:"resource_id,omitempty"`
	ResourceRevision    int64          `json:"resource_revision,omitempty"`
	ResourceState       string         `json:"resource_state,omitempty"`
	ProposalID          string         `json:"proposal_id,omitempty"`
	ProposalDigest      string         `json:"proposal_digest,omitempty"`
	DecisionActor       string         `json:"decision_actor,omitempty"`
	DecisionAt          string         `json:"decision_at,omitempty"`
	Decision            string         `json:"decision,omitempty"`
	PermitID            string         `json:"permit_id,omitempty"`
	GrantID             string         `json:"grant_id,omitempty"`
	Claim               string         `json:"claim,omitempty"`
	Attempt             int            `json:"attempt,omitempty"`
	Outcome             string         `json:"outcome,omitempty"`
	Reconciliation      map[string]any `json:"reconciliation,omitempty"`
	DenialCode          string         `json:"denial_code,omitempty"`
	DenialStep          int            `json:"denial_step,omitempty"`
	Detail              string         `json:"detail,omitempty"`
}

// audit appends a record inside the caller's transaction, so the record
// commits or rolls back with the state change it describes.
func (h *Host) audit(tx *sql.Tx, rec auditRecord) error {
	rec.At = msTime(h.nowMS())
	rec.Instance = h.instance
	rec.Seq = 0
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = tx.Exec(`INSERT INTO audit(at,event,record,operation_id,execution_id) VALUES(?,?,?,?,?)`,
		h.nowMS(), rec.Event, string(b), nullStr(rec.OperationID), nullStr(rec.ExecutionID))
	return err
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (h *Host) hAudit(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator, h.cfg.Keys.Resolver); d != nil {
		writeDenial(w, d)
		return
	}
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	sqlq := `SELECT seq, record FROM audit WHERE seq > ?`
	args := []any{after}
	if v := q.Get("operation_id"); v != "" {
		sqlq += ` AND operation_id = ?`
		args = append(args, v)
	}
	if v := q.Get("execution_id"); v != "" {
		sqlq += ` AND execution_id = ?`
		args = append(args, v)
	}
	sqlq += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := h.st.db.QueryContext(r.Context(), sqlq, args...)
	if err != nil {
		h.fail(w, err)
		return
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var seq int64
		var rec string
		if err := rows.Scan(&seq, &rec); err != nil {
			h.fail(w, err)
			return
		}
		var m map[string]any
		json.Unmarshal([]byte(rec), &m)
		m["seq"] = seq
		b, _ := json.Marshal(m)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"records": out})
}
