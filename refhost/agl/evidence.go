package agl

// Evidence obligations (spec 11, 13 Stage 3; docs/agl-binding.md §13):
// a question with a revision, receipts of evidence collected from sources,
// a report citing receipts, attestations signed by trusted validators
// (DSSE envelopes carrying in-toto statements), review, and publication.
// The host records what a validator judged and who judged it; it never
// claims that a report is true.

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/parley-conformance/parley/evidence/envelope"
)

// EvidenceConfig is the configuration of the evidence runtime.
type EvidenceConfig struct {
	// Validators are the validators whose attestations the host trusts.
	Validators []Validator `json:"validators,omitempty"`
	// SourceTimeoutMS bounds one retrieval from a source; MaxSourceBytes
	// the size of a document the host retrieves.
	SourceTimeoutMS int   `json:"source_timeout_ms,omitempty"`
	MaxSourceBytes  int64 `json:"max_source_bytes,omitempty"`
}

// Validator is a trusted validator: its name, its ed25519 public key
// (standard base64 of the 32 raw bytes) and its kind, "deterministic" or
// "llm". The kind comes from this configuration, never from the
// validator's own statement.
type Validator struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
	Kind      string `json:"kind"`
}

// Attestation statements: an in-toto Statement v1 in a DSSE envelope.
const (
	AttestationPredicateType = "https://parley.dev/agl/evidence-attestation/v1"
	inTotoStatementType      = "https://in-toto.io/Statement/v1"
)

type evidenceState struct {
	keys       []ed25519.PublicKey
	validators []Validator
	timeout    time.Duration
	maxBytes   int64
}

const evidenceSchema = `
CREATE TABLE IF NOT EXISTS ev_questions (
  id TEXT PRIMARY KEY, execution_id TEXT NOT NULL, text TEXT NOT NULL,
  revision INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ev_receipts (
  id TEXT PRIMARY KEY, question_id TEXT NOT NULL REFERENCES ev_questions(id),
  question_revision INTEGER NOT NULL, source_url TEXT NOT NULL,
  content_digest TEXT NOT NULL, content_length INTEGER NOT NULL, retrieved_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ev_reports (
  id TEXT PRIMARY KEY, question_id TEXT NOT NULL REFERENCES ev_questions(id),
  question_revision INTEGER NOT NULL, body TEXT NOT NULL, evidence TEXT NOT NULL,
  digest TEXT NOT NULL, state TEXT NOT NULL, reviewer TEXT, reviewed_at INTEGER);
CREATE TABLE IF NOT EXISTS ev_attestations (
  id TEXT PRIMARY KEY, report_id TEXT NOT NULL REFERENCES ev_reports(id),
  report_digest TEXT NOT NULL, judgment TEXT NOT NULL, envelope TEXT NOT NULL, recorded_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ev_publications (
  id TEXT PRIMARY KEY, report_id TEXT NOT NULL UNIQUE REFERENCES ev_reports(id),
  attestation_id TEXT NOT NULL REFERENCES ev_attestations(id), published_at INTEGER NOT NULL);
`

// openEvidence parses the trusted validators and creates the evidence
// tables (their own, created if absent, apart from the operation store's
// versioned schema).
func (h *Host) openEvidence(ctx context.Context) error {
	c := h.cfg.Evidence
	ev := &evidenceState{timeout: 10 * time.Second, maxBytes: 4 << 20}
	if c.SourceTimeoutMS > 0 {
		ev.timeout = time.Duration(c.SourceTimeoutMS) * time.Millisecond
	}
	if c.MaxSourceBytes > 0 {
		ev.maxBytes = c.MaxSourceBytes
	}
	for _, v := range c.Validators {
		raw, err := base64.StdEncoding.DecodeString(v.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return fmt.Errorf("agl: evidence validator %q: public_key is not the base64 of a 32-byte ed25519 key", v.Name)
		}
		if v.Name == "" || (v.Kind != "deterministic" && v.Kind != "llm") {
			return fmt.Errorf("agl: evidence validator %q: a name and a kind (deterministic or llm) are required", v.Name)
		}
		ev.keys = append(ev.keys, ed25519.PublicKey(raw))
		ev.validators = append(ev.validators, v)
	}
	if _, err := h.st.db.ExecContext(ctx, evidenceSchema); err != nil {
		return fmt.Errorf("agl: create the evidence tables: %w", err)
	}
	h.ev = ev
	return nil
}

func (h *Host) evidenceRoutes(mux *http.ServeMux, p string) {
	mux.HandleFunc("POST "+p+"/evidence/questions", h.hEvQuestion)
	mux.HandleFunc("PUT "+p+"/evidence/questions/{id}", h.hEvReviseQuestion)
	mux.HandleFunc("GET "+p+"/evidence/questions/{id}", h.hEvGetQuestion)
	mux.HandleFunc("POST "+p+"/evidence/questions/{id}/receipts", h.hEvCollect)
	mux.HandleFunc("GET "+p+"/evidence/receipts/{id}", h.hEvGetReceipt)
	mux.HandleFunc("POST "+p+"/evidence/reports", h.hEvReport)
	mux.HandleFunc("GET "+p+"/evidence/reports/{id}", h.hEvGetReport)
	mux.HandleFunc("POST "+p+"/evidence/reports/{id}/review", h.hEvReview)
	mux.HandleFunc("POST "+p+"/evidence/reports/{id}/attestations", h.hEvAttest)
	mux.HandleFunc("POST "+p+"/evidence/reports/{id}/publication", h.hEvPublish)
	mux.HandleFunc("GET "+p+"/evidence/publications/{id}", h.hEvGetPublication)
}

// --- questions ---------------------------------------------------------------

type evQuestion struct {
	ID, ExecutionID, Text string
	Revision              int64
	Receipts              int
}

func (h *Host) loadQuestion(ctx context.Context, q querier, id string) (*evQuestion, error) {
	var x evQuestion
	err := q.QueryRowContext(ctx, `SELECT id, execution_id, text, revision,
		(SELECT COUNT(*) FROM ev_receipts r WHERE r.question_id=q.id AND r.question_revision=q.revision)
		FROM ev_questions q WHERE id=?`, id).Scan(&x.ID, &x.ExecutionID, &x.Text, &x.Revision, &x.Receipts)
	if isNoRows(err) {
		return nil, deny(404, "unknown_question", "schema_error", 0, "no question %s", id)
	}
	return &x, err
}

func (x *evQuestion) view() map[string]any {
	state := "Unresearched"
	if x.Receipts > 0 {
		state = "Collected"
	}
	return map[string]any{"question_id": x.ID, "execution_id": x.ExecutionID, "text": x.Text, "revision": x.Revision, "state": state}
}

func (h *Host) hEvQuestion(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		ExecutionID string `json:"execution_id"`
		Text        string `json:"text"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.ExecutionID == "" || req.Text == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "execution_id and text are required"))
		return
	}
	x := &evQuestion{ID: newID("q_"), ExecutionID: req.ExecutionID, Text: req.Text, Revision: 1}
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO ev_questions(id,execution_id,text,revision,created_at) VALUES(?,?,?,?,?)`,
			x.ID, x.ExecutionID, x.Text, x.Revision, h.nowMS()); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "evidence_question_opened", ExecutionID: x.ExecutionID, ResourceID: x.ID, ResourceRevision: x.Revision, ResourceState: "Unresearched"})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, x.view())
}

func (h *Host) hEvReviseQuestion(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		Text             string `json:"text"`
		ExpectedRevision int64  `json:"expected_revision"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.Text == "" || req.ExpectedRevision < 1 {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "text and expected_revision are required"))
		return
	}
	var x *evQuestion
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if x, err = h.loadQuestion(r.Context(), tx, r.PathValue("id")); err != nil {
			return err
		}
		if x.Revision != req.ExpectedRevision {
			return deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d, not %d", x.Revision, req.ExpectedRevision)
		}
		x.Revision++
		x.Text, x.Receipts = req.Text, 0
		if _, err := tx.ExecContext(r.Context(), `UPDATE ev_questions SET text=?, revision=? WHERE id=?`, x.Text, x.Revision, x.ID); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "evidence_question_revised", ExecutionID: x.ExecutionID, ResourceID: x.ID, ResourceRevision: x.Revision, ResourceState: "Unresearched"})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, x.view())
}

func (h *Host) hEvGetQuestion(w http.ResponseWriter, r *http.Request) {
	x, err := h.loadQuestion(r.Context(), h.st.db, r.PathValue("id"))
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, x.view())
}

// --- receipts ----------------------------------------------------------------

type evReceipt struct {
	ID, QuestionID, SourceURL, Digest string
	QuestionRevision, Length, At      int64
}

func (x *evReceipt) view() map[string]any {
	return map[string]any{"receipt_id": x.ID, "question_id": x.QuestionID, "question_revision": x.QuestionRevision,
		"source": map[string]any{"url": x.SourceURL}, "content_digest": x.Digest, "content_length": x.Length,
		"retrieved_at": msTime(x.At), "state": "Collected"}
}

func (h *Host) loadReceipt(ctx context.Context, q querier, id string) (*evReceipt, error) {
	var x evReceipt
	err := q.QueryRowContext(ctx, `SELECT id, question_id, question_revision, source_url, content_digest, content_length, retrieved_at
		FROM ev_receipts WHERE id=?`, id).Scan(&x.ID, &x.QuestionID, &x.QuestionRevision, &x.SourceURL, &x.Digest, &x.Length, &x.At)
	if isNoRows(err) {
		return nil, deny(422, "unknown_receipt", "schema_error", 0, "no receipt %s", id)
	}
	return &x, err
}

// publicURL is the source's address as receipts and the audit trail keep
// it: without credentials in its user info or its query.
func publicURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

func (h *Host) hEvCollect(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		QuestionRevision int64 `json:"question_revision"`
		Source           struct {
			URL        string `json:"url"`
			Credential string `json:"credential,omitempty"`
		} `json:"source"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	u, err := url.Parse(req.Source.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || req.QuestionRevision < 1 {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "question_revision and an http(s) source.url are required"))
		return
	}
	x, err := h.loadQuestion(r.Context(), h.st.db, r.PathValue("id"))
	if err != nil {
		h.fail(w, err)
		return
	}
	if x.Revision != req.QuestionRevision {
		writeDenial(w, deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d; evidence for revision %d is not collected", x.Revision, req.QuestionRevision))
		return
	}
	// Retrieve under a deadline and a size limit; the credential goes to
	// the source and nowhere else.
	ctx, cancel := context.WithTimeout(r.Context(), h.ev.timeout)
	defer cancel()
	greq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.Source.URL, nil)
	if err != nil {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "source.url: %v", err))
		return
	}
	if req.Source.Credential != "" {
		greq.Header.Set("Authorization", "Bearer "+req.Source.Credential)
	}
	resp, err := h.client.Do(greq)
	if err != nil {
		d := deny(502, "source_unavailable", "source", 0, "the source could not be retrieved")
		d.Retryable = true
		writeDenial(w, d)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.ev.maxBytes+1))
	if err != nil || resp.StatusCode != http.StatusOK || int64(len(body)) > h.ev.maxBytes {
		d := deny(502, "source_unavailable", "source", 0, "the source answered %d (or more than %d bytes)", resp.StatusCode, h.ev.maxBytes)
		d.Retryable = true
		writeDenial(w, d)
		return
	}
	sum := sha256.Sum256(body)
	rc := &evReceipt{ID: newID("rcp_"), QuestionID: x.ID, QuestionRevision: x.Revision, SourceURL: publicURL(u),
		Digest: "sha256:" + hex.EncodeToString(sum[:]), Length: int64(len(body)), At: h.nowMS()}
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var rev int64
		if err := tx.QueryRowContext(r.Context(), `SELECT revision FROM ev_questions WHERE id=?`, x.ID).Scan(&rev); err != nil {
			return err
		}
		if rev != rc.QuestionRevision {
			return deny(409, "stale_revision", "stale_revision", 0, "the question was revised while the source was read")
		}
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO ev_receipts(id,question_id,question_revision,source_url,content_digest,content_length,retrieved_at) VALUES(?,?,?,?,?,?,?)`,
			rc.ID, rc.QuestionID, rc.QuestionRevision, rc.SourceURL, rc.Digest, rc.Length, rc.At); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "evidence_collected", ExecutionID: x.ExecutionID, ResourceID: x.ID, ResourceRevision: x.Revision,
			ResourceState: "Collected", Detail: "receipt " + rc.ID + " of " + rc.SourceURL + " content " + rc.Digest})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, rc.view())
}

func (h *Host) hEvGetReceipt(w http.ResponseWriter, r *http.Request) {
	x, err := h.loadReceipt(r.Context(), h.st.db, r.PathValue("id"))
	if err != nil {
		var d *Denial
		if errors.As(err, &d) {
			d.Status = 404
		}
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, x.view())
}

// --- reports -------------------------------------------------------------------

type evItem struct {
	ReceiptID     string `json:"receipt_id"`
	ContentDigest string `json:"content_digest"`
}

type evReport struct {
	ID, QuestionID, Digest, State, Reviewer string
	QuestionRevision                        int64
	Body                                    json.RawMessage
	Evidence                                []evItem
	Published                               string
}

func (x *evReport) view(currentRevision int64) map[string]any {
	m := map[string]any{"report_id": x.ID, "question_id": x.QuestionID, "question_revision": x.QuestionRevision,
		"body": x.Body, "evidence": x.Evidence, "report_digest": x.Digest, "state": x.State}
	if x.Reviewer != "" {
		m["reviewer"] = x.Reviewer
	}
	if x.Published != "" {
		m["publication_id"] = x.Published
	}
	if currentRevision != x.QuestionRevision {
		m["question_current_revision"] = currentRevision
	}
	return m
}

func (h *Host) loadReport(ctx context.Context, q querier, id string) (*evReport, error) {
	var x evReport
	var body, ev string
	var reviewer, pub sql.NullString
	err := q.QueryRowContext(ctx, `SELECT id, question_id, question_revision, body, evidence, digest, state, reviewer,
		(SELECT id FROM ev_publications p WHERE p.report_id=ev_reports.id) FROM ev_reports WHERE id=?`, id).
		Scan(&x.ID, &x.QuestionID, &x.QuestionRevision, &body, &ev, &x.Digest, &x.State, &reviewer, &pub)
	if isNoRows(err) {
		return nil, deny(404, "unknown_report", "schema_error", 0, "no report %s", id)
	}
	if err != nil {
		return nil, err
	}
	x.Body, x.Reviewer, x.Published = json.RawMessage(body), reviewer.String, pub.String
	return &x, json.Unmarshal([]byte(ev), &x.Evidence)
}

// reportDigest is the digest a validator's attestation and a publication
// bind: of the question and revision, the body, and the evidence cited with
// the content digests its receipts recorded.
func reportDigest(questionID string, revision int64, body json.RawMessage, items []evItem) (string, error) {
	bv, err := ParseJSON(body)
	if err != nil {
		return "", err
	}
	ev, err := toValue(items)
	if err != nil {
		return "", err
	}
	rv, err := toValue(map[string]any{"question_id": questionID, "question_revision": revision})
	if err != nil {
		return "", err
	}
	m := rv.(map[string]any)
	m["body"], m["evidence"] = bv, ev
	d, _, err := Digest(m)
	return d, err
}

func (h *Host) hEvReport(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		QuestionID       string          `json:"question_id"`
		QuestionRevision int64           `json:"question_revision"`
		ReceiptIDs       []string        `json:"receipt_ids"`
		Body             json.RawMessage `json:"body"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.QuestionID == "" || req.QuestionRevision < 1 || len(req.ReceiptIDs) == 0 || len(req.Body) == 0 || req.Body[0] != '{' {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "question_id, question_revision, receipt_ids (at least one) and an object body are required"))
		return
	}
	var x *evReport
	var execID string
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		q, err := h.loadQuestion(r.Context(), tx, req.QuestionID)
		if err != nil {
			return err
		}
		execID = q.ExecutionID
		if q.Revision != req.QuestionRevision {
			return deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d, not %d", q.Revision, req.QuestionRevision)
		}
		seen := map[string]bool{}
		var items []evItem
		for _, id := range req.ReceiptIDs {
			if seen[id] {
				return deny(422, "schema_error", "schema_error", 0, "receipt %s is cited twice", id)
			}
			seen[id] = true
			rc, err := h.loadReceipt(r.Context(), tx, id)
			if err != nil {
				return err
			}
			if rc.QuestionID != q.ID {
				d := deny(409, "other_question", "invalid_protocol_state", 0, "receipt %s concerns another question", id)
				d.Detail = map[string]any{"receipt_id": id}
				return d
			}
			if rc.QuestionRevision != q.Revision {
				d := deny(409, "stale_revision", "stale_revision", 0, "receipt %s concerns revision %d of the question, which is at %d", id, rc.QuestionRevision, q.Revision)
				d.Detail = map[string]any{"receipt_id": id}
				return d
			}
			items = append(items, evItem{ReceiptID: rc.ID, ContentDigest: rc.Digest})
		}
		digest, err := reportDigest(q.ID, q.Revision, req.Body, items)
		if err != nil {
			return deny(422, "schema_error", "schema_error", 0, "body: %v", err)
		}
		x = &evReport{ID: newID("rpt_"), QuestionID: q.ID, QuestionRevision: q.Revision, Body: req.Body, Evidence: items, Digest: digest, State: "Drafted"}
		evb, _ := json.Marshal(items)
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO ev_reports(id,question_id,question_revision,body,evidence,digest,state) VALUES(?,?,?,?,?,?,?)`,
			x.ID, x.QuestionID, x.QuestionRevision, string(req.Body), string(evb), x.Digest, x.State); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "evidence_report_drafted", ExecutionID: execID, ResourceID: x.ID, ResourceRevision: x.QuestionRevision,
			ResourceState: x.State, ProposalDigest: x.Digest})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, x.view(x.QuestionRevision))
}

func (h *Host) hEvGetReport(w http.ResponseWriter, r *http.Request) {
	x, err := h.loadReport(r.Context(), h.st.db, r.PathValue("id"))
	if err != nil {
		h.fail(w, err)
		return
	}
	q, err := h.loadQuestion(r.Context(), h.st.db, x.QuestionID)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, x.view(q.Revision))
}

func (h *Host) hEvReview(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		Reviewer string `json:"reviewer"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.Reviewer == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "reviewer is required"))
		return
	}
	var x *evReport
	var q *evQuestion
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if x, err = h.loadReport(r.Context(), tx, r.PathValue("id")); err != nil {
			return err
		}
		if x.State != "Drafted" {
			return deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "the report is %s, not Drafted", x.State)
		}
		if q, err = h.loadQuestion(r.Context(), tx, x.QuestionID); err != nil {
			return err
		}
		x.State, x.Reviewer = "Reviewed", req.Reviewer
		if _, err := tx.ExecContext(r.Context(), `UPDATE ev_reports SET state=?, reviewer=?, reviewed_at=? WHERE id=?`, x.State, x.Reviewer, h.nowMS(), x.ID); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "evidence_report_reviewed", ExecutionID: q.ExecutionID, ResourceID: x.ID, ResourceState: x.State,
			ProposalDigest: x.Digest, DecisionActor: x.Reviewer})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, x.view(q.Revision))
}

// --- attestations --------------------------------------------------------------

type attestationStatement struct {
	Type          string `json:"_type"`
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate struct {
		Validator string `json:"validator"`
		Policy    struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"policy"`
		Evidence     []evItem `json:"evidence"`
		ReportDigest string   `json:"report_digest"`
		Result       string   `json:"result"`
		Method       string   `json:"method,omitempty"`
		Rationale    string   `json:"rationale,omitempty"`
	} `json:"predicate"`
}

func (h *Host) hEvAttest(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	payload, idx, err := envelope.VerifyTrusted(req.Envelope, envelope.InTotoPayloadType, h.ev.keys)
	if err != nil {
		if errors.Is(err, envelope.ErrUntrustedSigner) {
			writeDenial(w, deny(403, "untrusted_validator", "authorization_denied", 0, "%v", err))
		} else {
			writeDenial(w, deny(400, "malformed_attestation", "schema_error", 0, "%v", err))
		}
		return
	}
	var st attestationStatement
	if err := json.Unmarshal(payload, &st); err != nil || st.Type != inTotoStatementType || st.PredicateType != AttestationPredicateType ||
		st.Predicate.Policy.Name == "" || st.Predicate.Policy.Version == "" || (st.Predicate.Result != "pass" && st.Predicate.Result != "fail") {
		writeDenial(w, deny(400, "malformed_attestation", "schema_error", 0, "the payload is not an evidence attestation statement with a policy, a version and a result (pass or fail)"))
		return
	}
	v := h.ev.validators[idx]
	var att map[string]any
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		x, err := h.loadReport(r.Context(), tx, r.PathValue("id"))
		if err != nil {
			return err
		}
		q, err := h.loadQuestion(r.Context(), tx, x.QuestionID)
		if err != nil {
			return err
		}
		bound := st.Predicate.ReportDigest == x.Digest
		for _, s := range st.Subject {
			if "sha256:"+s.Digest["sha256"] != x.Digest {
				bound = false
			}
		}
		if !bound || len(st.Subject) == 0 {
			d := deny(409, "attestation_unbound", "proposal_mismatch", 0, "the attestation is about another report digest than this report's %s", x.Digest)
			d.Detail = map[string]any{"report_digest": x.Digest}
			return d
		}
		if !sameEvidence(st.Predicate.Evidence, x.Evidence) {
			d := deny(409, "evidence_mismatch", "proposal_mismatch", 0, "the evidence the validator inspected is not the evidence the report cites, with the content digests its receipts recorded")
			d.Detail = map[string]any{"evidence": x.Evidence}
			return d
		}
		if x.QuestionRevision != q.Revision {
			return deny(409, "stale_revision", "stale_revision", 0, "the question was revised after the report was drafted")
		}
		judgment := map[string]any{
			"validator": v.Name, "validator_kind": v.Kind, "key_id": envelope.KeyID(h.ev.keys[idx]),
			"policy": st.Predicate.Policy.Name, "policy_version": st.Predicate.Policy.Version,
			"result": st.Predicate.Result, "evidence": st.Predicate.Evidence, "report_digest": x.Digest,
			"kind": "judgment",
		}
		att = map[string]any{"attestation_id": newID("att_"), "report_id": x.ID, "report_digest": x.Digest, "judgment": judgment}
		jb, _ := json.Marshal(judgment)
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO ev_attestations(id,report_id,report_digest,judgment,envelope,recorded_at) VALUES(?,?,?,?,?,?)`,
			att["attestation_id"], x.ID, x.Digest, string(jb), string(req.Envelope), h.nowMS()); err != nil {
			return err
		}
		state := "CheckedAgainstPolicy"
		if st.Predicate.Result != "pass" {
			state = "Collected"
		}
		att["evidence_state"] = state
		return h.audit(tx, auditRecord{Event: "evidence_attested", ExecutionID: q.ExecutionID, ResourceID: x.ID, ResourceState: state,
			ProposalDigest: x.Digest, DecisionActor: "validator:" + v.Name,
			Detail: fmt.Sprintf("%s judgment by %s under %s %s: %s", v.Kind, v.Name, st.Predicate.Policy.Name, st.Predicate.Policy.Version, st.Predicate.Result)})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, att)
}

func sameEvidence(a, b []evItem) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(l []evItem) []string {
		out := make([]string, len(l))
		for i, e := range l {
			out[i] = e.ReceiptID + "\x00" + e.ContentDigest
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// --- publication ---------------------------------------------------------------

func (h *Host) publicationView(ctx context.Context, q querier, id string) (map[string]any, error) {
	var reportID, attID, judgment, digest string
	var at int64
	err := q.QueryRowContext(ctx, `SELECT p.report_id, p.attestation_id, a.judgment, a.report_digest, p.published_at
		FROM ev_publications p JOIN ev_attestations a ON a.id=p.attestation_id WHERE p.id=?`, id).Scan(&reportID, &attID, &judgment, &digest, &at)
	if isNoRows(err) {
		return nil, deny(404, "unknown_publication", "schema_error", 0, "no publication %s", id)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"publication_id": id, "report_id": reportID, "report_digest": digest, "attestation_id": attID,
		"judgment": json.RawMessage(judgment), "published_at": msTime(at), "state": "Published"}, nil
}

func (h *Host) hEvPublish(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var req struct {
		AttestationID string `json:"attestation_id"`
	}
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	var pub map[string]any
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		x, err := h.loadReport(r.Context(), tx, r.PathValue("id"))
		if err != nil {
			return err
		}
		q, err := h.loadQuestion(r.Context(), tx, x.QuestionID)
		if err != nil {
			return err
		}
		if x.Published != "" {
			return deny(409, "already_published", "invalid_protocol_state", 0, "the report is already published as %s", x.Published)
		}
		if x.State != "Reviewed" {
			return deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "the report is %s; publication needs Reviewed", x.State)
		}
		if x.QuestionRevision != q.Revision {
			return deny(409, "stale_revision", "stale_revision", 0, "the report answers revision %d of the question, which is at %d", x.QuestionRevision, q.Revision)
		}
		if req.AttestationID == "" {
			return deny(409, "attestation_required", "invalid_protocol_state", 0, "publication needs an attestation of this report by a trusted validator")
		}
		var attReport, attDigest, judgment string
		err = tx.QueryRowContext(r.Context(), `SELECT report_id, report_digest, judgment FROM ev_attestations WHERE id=?`, req.AttestationID).Scan(&attReport, &attDigest, &judgment)
		if isNoRows(err) {
			return deny(409, "attestation_required", "invalid_protocol_state", 0, "no attestation %s was recorded", req.AttestationID)
		}
		if err != nil {
			return err
		}
		if attReport != x.ID || attDigest != x.Digest {
			d := deny(409, "attestation_unbound", "proposal_mismatch", 0, "attestation %s is about another report", req.AttestationID)
			d.Detail = map[string]any{"report_digest": x.Digest, "attested_digest": attDigest}
			return d
		}
		var j struct {
			Result string `json:"result"`
		}
		json.Unmarshal([]byte(judgment), &j)
		if j.Result != "pass" {
			return deny(409, "attestation_required", "invalid_protocol_state", 0, "the validator's judgment was %q; publication needs a passing one", j.Result)
		}
		id := newID("pub_")
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO ev_publications(id,report_id,attestation_id,published_at) VALUES(?,?,?,?)`, id, x.ID, req.AttestationID, h.nowMS()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(r.Context(), `UPDATE ev_reports SET state='Published' WHERE id=?`, x.ID); err != nil {
			return err
		}
		if err := h.audit(tx, auditRecord{Event: "evidence_published", ExecutionID: q.ExecutionID, ResourceID: x.ID, ResourceState: "Published",
			ProposalDigest: x.Digest, Detail: "publication " + id + " bound to attestation " + req.AttestationID}); err != nil {
			return err
		}
		pub, err = h.publicationView(r.Context(), tx, id)
		return err
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 201, pub)
}

func (h *Host) hEvGetPublication(w http.ResponseWriter, r *http.Request) {
	p, err := h.publicationView(r.Context(), h.st.db, r.PathValue("id"))
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, p)
}
