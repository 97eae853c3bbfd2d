package agl

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	// FieldDigests are keyed digests (HMAC-SHA256 under the store's audit
	// key) of the snapshot's argument values, by JSON pointer: an auditor
	// holding the key can ask "was this sent to X?", while a reader of the
	// trail cannot recover a recipient or an amount by hashing guesses.
	FieldDigests map[string]string `json:"field_digests,omitempty"`
	DenialCode   string            `json:"denial_code,omitempty"`
	DenialStep   int               `json:"denial_step,omitempty"`
	Detail       string            `json:"detail,omitempty"`
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
	_, err = h.st.exec(context.Background(), tx, sqlAuditInsert,
		h.nowMS(), rec.Event, string(b), nullStr(rec.OperationID), nullStr(rec.ExecutionID))
	return err
}

var sqlAuditInsert = hot(`INSERT INTO audit(at,event,record,operation_id,execution_id) VALUES(?,?,?,?,?)`)

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

// loadAuditKey reads the store's audit key, creating it on first use. Hosts
// sharing a store share the key, so their keyed digests agree.
func (s *store) loadAuditKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var key string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT OR IGNORE INTO meta(k,v) VALUES('audit_key',?)`, hex.EncodeToString(fresh)); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT v FROM meta WHERE k='audit_key'`).Scan(&key)
	})
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(key)
}

// fieldDigests keys a digest of every scalar value in a snapshot's
// arguments. A resolved handle contributes its payload's values, not its
// resource metadata. The value digested is its agl-canon/1 encoding.
func (h *Host) fieldDigests(args any) map[string]string {
	out := map[string]string{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch t := v.(type) {
		case map[string]any:
			if p, ok := t["payload"]; ok && t["resource_id"] != nil && t["payload_digest"] != nil {
				walk(p, path+"/payload")
				return
			}
			for k, e := range t {
				walk(e, path+"/"+escapePointer(k))
			}
		case []any:
			for i, e := range t {
				walk(e, fmt.Sprintf("%s/%d", path, i))
			}
		default:
			enc, err := Canonicalize(t)
			if err != nil {
				return
			}
			m := hmac.New(sha256.New, h.auditKey)
			m.Write(enc)
			out[path] = "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
		}
	}
	walk(args, "/arguments")
	return out
}
