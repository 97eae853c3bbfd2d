package contractrefine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Stages of a /v1/tool decision.
const (
	stageBinding = "binding"
	stagePolicy  = "policy"
)

// toolWritesFile receives tool.write's appends inside DataDir.
const toolWritesFile = "tool-writes.jsonl"

// executor runs an allowed tool and returns its result object.
type executor func(h *Host, auditID string, params map[string]json.RawMessage, now time.Time) (any, error)

// executors are the tools this host implements; a policy may allow no others.
var executors = map[string]executor{
	"tool.echo":    execEcho,
	"tool.write":   execWrite,
	"tool.deliver": execDeliver,
}

// deliverTimeout bounds tool.deliver's call to its destination.
const deliverTimeout = 10 * time.Second

// execDeliver posts the call's params to the configured destination: an
// effect outside the host, the kind a binding in enforce mode must prevent.
// It succeeds only when the destination took the delivery.
func execDeliver(h *Host, auditID string, params map[string]json.RawMessage, _ time.Time) (any, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	dest, err := mailboxURL(h.s.deliverURL, params["mailbox"])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Autonomy-Audit-Id", auditID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("the destination answered %d", resp.StatusCode)
	}
	return map[string]bool{"delivered": true}, nil
}

// mailboxPattern is what a mailbox may be named: one path segment, so that
// a call can never address anything outside the configured destination.
var mailboxPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// mailboxURL is where a delivery goes: deliver_url itself, or, when the
// call's params name a mailbox, that mailbox under it (deliver_url with
// the mailbox appended as one more path segment).
func mailboxURL(base string, raw json.RawMessage) (string, error) {
	if raw == nil {
		return base, nil
	}
	var box string
	if err := json.Unmarshal(raw, &box); err != nil || !mailboxPattern.MatchString(box) {
		return "", fmt.Errorf("params.mailbox must be one path segment of letters, digits, '.', '_' or '-'")
	}
	return strings.TrimSuffix(base, "/") + "/" + box, nil
}

func (h *Host) postTool(w http.ResponseWriter, r *http.Request) {
	var req ToolRequest
	if status, err := readObject(w, r, &req); err != nil {
		writeError(w, status, err.Error())
		return
	}
	if req.Kind == "" {
		writeError(w, http.StatusBadRequest, "kind is required")
		return
	}
	// A delivery's mailbox is checked before anything is decided or
	// recorded: a malformed one is the caller's mistake, not a tool failure.
	if req.Kind == "tool.deliver" {
		if _, err := mailboxURL(h.s.deliverURL, req.Params["mailbox"]); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	now := h.now()

	// Binding stage. Disabled mode ignores the header entirely: no lookup and
	// no preflight_id in the frame.
	var bindingReason, auditID, preflightID string
	headerGiven := len(r.Header.Values(PreflightIDHeader)) > 0
	if h.s.mode != ModeDisabled {
		switch {
		case headerGiven:
			preflightID = r.Header.Get(PreflightIDHeader)
			var err error
			bindingReason, auditID, err = h.checkBinding(preflightID, req.Kind, now)
			if err != nil {
				h.log.Error("binding lookup failed", slog.String("preflight_id", preflightID), slog.String("error", err.Error()))
				writeError(w, http.StatusInternalServerError, "WAL read failed")
				return
			}
		case h.s.requiresPreflight[req.Kind]:
			bindingReason = reasonPreflightRequired
		}
	}
	if auditID == "" {
		var err error
		if auditID, err = newID(); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	decision := func(outcome, reason, stage string) error {
		attrs := map[string]any{
			"audit_id": auditID, "tool_kind": req.Kind, "outcome": outcome,
			"reason": reason, "stage": stage, "mode": string(h.s.mode),
		}
		setIf(attrs, "preflight_id", preflightID)
		setIf(attrs, "actor_agent_id", req.Actor.AgentID)
		return h.emitDecision(now, attrs)
	}

	if bindingReason != "" {
		if err := decision("deny", bindingReason, stageBinding); err != nil {
			writeError(w, http.StatusInternalServerError, "decision could not be recorded in the WAL")
			return
		}
		// Advisory records the failure and lets policy decide; only enforce
		// refuses on binding.
		if h.s.mode == ModeEnforce {
			writeValue(w, http.StatusForbidden, ToolResponse{Outcome: "deny", Reason: bindingReason, AuditID: auditID})
			return
		}
	}

	if !h.s.allowedTools[req.Kind] {
		if err := decision("deny", reasonToolNotAllowed, stagePolicy); err != nil {
			writeError(w, http.StatusInternalServerError, "decision could not be recorded in the WAL")
			return
		}
		writeValue(w, http.StatusForbidden, ToolResponse{Outcome: "deny", Reason: reasonToolNotAllowed, AuditID: auditID})
		return
	}
	// The allow is recorded before the tool runs, so no execution is ever
	// unaudited.
	if err := decision("allow", reasonToolAllowed, stagePolicy); err != nil {
		writeError(w, http.StatusInternalServerError, "decision could not be recorded in the WAL")
		return
	}
	result, err := executors[req.Kind](h, auditID, req.Params, now)
	if err != nil {
		h.log.Error("tool execution failed", slog.String("tool_kind", req.Kind), slog.String("audit_id", auditID), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "tool execution failed")
		return
	}
	res, err := json.Marshal(result)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode result: "+err.Error())
		return
	}
	writeValue(w, http.StatusOK, ToolResponse{Outcome: "allow", AuditID: auditID, Result: res})
}

// emitDecision records an autonomy.decision frame. With no emitter wired
// there is nowhere to record it, and the tool surface proceeds unaudited.
func (h *Host) emitDecision(now time.Time, attrs map[string]any) error {
	if h.wal == nil {
		return nil
	}
	if err := h.wal.append(KindDecision, now, attrs, ""); err != nil {
		h.log.Error("autonomy.decision emit failed", slog.String("error", err.Error()))
		return err
	}
	return nil
}

// checkBinding validates the preflight named by id for a call of kind. It
// returns the failure reason ("" when bound) and, when id names a stored
// preflight, that preflight's audit_id: the key joining both frames.
func (h *Host) checkBinding(id, kind string, now time.Time) (reason, auditID string, err error) {
	if h.wal == nil || id == "" {
		return reasonBindingNotFound, "", nil
	}
	fr, ok, err := h.wal.lookup(id)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return reasonBindingNotFound, "", nil
	}
	var d PreflightDecision
	if err := json.Unmarshal([]byte(fr.stringAttr("decision_json")), &d); err != nil {
		return "", "", fmt.Errorf("decode stored decision %s: %w", id, err)
	}
	el := d.ExecutionEligibility
	if d.Outcome != OutcomePass || !el.Allowed {
		return reasonBindingNotPass, d.AuditID, nil
	}
	exp, err := time.Parse(time.RFC3339, el.ExpiresAt)
	if err != nil || !now.Before(exp) {
		return reasonBindingExpired, d.AuditID, nil
	}
	if !slices.Contains(el.BoundToolKinds, kind) {
		return reasonBindingKindMismatch, d.AuditID, nil
	}
	return "", d.AuditID, nil
}

func execEcho(_ *Host, _ string, params map[string]json.RawMessage, _ time.Time) (any, error) {
	text, ok := params["text"]
	if !ok {
		text = json.RawMessage("null")
	}
	return map[string]json.RawMessage{"text": text}, nil
}

// execWrite appends the call's params to an fsync'd JSON-lines file.
func execWrite(h *Host, auditID string, params map[string]json.RawMessage, now time.Time) (any, error) {
	line, err := json.Marshal(struct {
		Time    string                     `json:"time"`
		AuditID string                     `json:"audit_id"`
		Params  map[string]json.RawMessage `json:"params"`
	}{now.UTC().Format(time.RFC3339Nano), auditID, params})
	if err != nil {
		return nil, err
	}
	line = append(line, '\n')
	h.toolMu.Lock()
	defer h.toolMu.Unlock()
	f, err := os.OpenFile(filepath.Join(h.env.DataDir, toolWritesFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	_, werr := f.Write(line)
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, err
	}
	return map[string]bool{"written": true}, nil
}
