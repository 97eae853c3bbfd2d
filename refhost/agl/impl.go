package agl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// implementation is a trusted handler compiled into the host. Its
// fingerprint is the digest of its descriptor; a contract registers against
// it and must quote that fingerprint, so a handler with a different contract
// cannot take over a registered name.
type implementation struct {
	Name         string   `json:"name"`
	Effects      []string `json:"effects"`
	ResourceKind string   `json:"resource_kind,omitempty"`
	Protocol     string   `json:"protocol,omitempty"`
	Wire         string   `json:"destination_protocol"`
	fingerprint  string
	dest         func(Config) Destination
	// read marks a handler that only reads from its destination: it asks
	// GET {url}/lookup?key=<arguments.message_key> and has no effect.
	read bool
}

// Outcome kinds a handler reports. Uncertain is anything after which the
// effect may or may not have happened.
const (
	outcomeSuccess   = "success"
	outcomeNoEffect  = "no_effect"
	outcomeUncertain = "uncertain"
	// outcomeAbandoned is never recorded: the host stopped before the
	// call, and the claim is left for recovery.
	outcomeAbandoned = "abandoned"
)

type handlerResult struct {
	Kind string `json:"kind"`
	// Failure names, for an uncertain outcome, what went wrong (a retry
	// selector's vocabulary).
	Failure   string         `json:"failure,omitempty"`
	Output    map[string]any `json:"output,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	HTTPCode  int            `json:"destination_status,omitempty"`
	Duplicate bool           `json:"destination_duplicate,omitempty"`
}

var implementations = func() map[string]*implementation {
	list := []*implementation{
		{Name: "email.send/v1", Effects: []string{"external_write", "email_send"}, ResourceKind: "email_draft",
			Protocol: "email/1", Wire: "parley-fake-destination/1", dest: func(c Config) Destination { return c.Email }},
		{Name: "webhook.post/v1", Effects: []string{"external_write"},
			Wire: "parley-fake-destination/1", dest: func(c Config) Destination { return c.Webhook }},
		{Name: "email.status/v1", Effects: []string{"external_read"},
			Wire: "parley-fake-destination/1", dest: func(c Config) Destination { return c.Email }, read: true},
	}
	m := map[string]*implementation{}
	for _, im := range list {
		v, err := toValue(im)
		if err != nil {
			panic(err)
		}
		fp, _, err := Digest(v)
		if err != nil {
			panic(err)
		}
		im.fingerprint = fp
		m[im.Name] = im
	}
	return m
}()

func (h *Host) hImplementations(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, name := range []string{"email.send/v1", "webhook.post/v1", "email.status/v1"} {
		im := implementations[name]
		d := im.dest(h.cfg)
		accounts := []string{}
		if d.URL != "" && d.Account != "" {
			accounts = append(accounts, d.Account)
		}
		for _, a := range d.Accounts {
			accounts = append(accounts, a.Account)
		}
		out = append(out, map[string]any{
			"name": im.Name, "fingerprint": im.fingerprint, "effects": im.Effects,
			"resource_kind": im.ResourceKind, "protocol": im.Protocol,
			"destination_configured": d.URL != "" || len(d.Accounts) > 0, "destination_idempotent": d.HonoursIdempotencyKey,
			"destination_accounts": accounts,
		})
	}
	writeJSON(w, 200, map[string]any{"implementations": out, "legacy_tools": legacyToolList()})
}

// handlerContext is what a protected handler runs with besides its
// arguments: the operation's stable identity and the authority it runs
// under (spec 2 and 7 step 8: the registry's old Invocation carried neither
// grant nor permit). It is sent to the destination with every attempt.
type handlerContext struct {
	ExecutionID    string `json:"execution_id"`
	Principal      string `json:"principal"`
	AgentID        string `json:"agent_id"`
	GrantID        string `json:"grant_id"`
	PermitID       any    `json:"permit_id"`
	ProposalID     string `json:"proposal_id"`
	SnapshotDigest string `json:"snapshot_digest"`
	Attempt        int    `json:"attempt"`
}

// destination is where a contract's operations go: the account of its
// implementation's destination that the contract names (destination_account),
// or the destination's own url and account when it names none. ok is false
// when the contract names an account this host does not configure.
func (h *Host) destination(im *implementation, c *OperationContract) (Destination, bool) {
	return im.dest(h.cfg).account(c.DestinationAccount)
}

// invoke performs the external call with the operation's stable identity.
// The idempotency key is the operation ID, so retries of one logical
// operation carry the same key.
func (h *Host) invoke(ctx context.Context, im *implementation, d Destination, opID, qname string, args any, hc handlerContext) handlerResult {
	if d.URL == "" {
		// Nothing was sent: no destination is configured.
		return handlerResult{Kind: outcomeNoEffect, Reason: "destination not configured"}
	}
	if ctx.Err() != nil {
		// Cancelled after the claim but before anything was sent.
		return handlerResult{Kind: outcomeNoEffect, Failure: failureCancelled, Reason: "cancelled before the call was made"}
	}
	if im.read {
		return h.read(ctx, d, args)
	}
	body, err := json.Marshal(map[string]any{"operation_id": opID, "operation": qname, "account": d.Account, "payload": args, "context": hc})
	if err != nil {
		return handlerResult{Kind: outcomeNoEffect, Reason: "payload not encodable"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(d.URL, "/")+"/send", bytes.NewReader(body))
	if err != nil {
		return handlerResult{Kind: outcomeNoEffect, Reason: "bad destination URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", opID)
	req.Header.Set("X-AGL-Operation-Id", opID)
	req.Header.Set("X-AGL-Attempt", fmt.Sprint(hc.Attempt))
	if err := h.fire(ctx, boundaryExternalCall, qname); err == nil && h.stopping() {
		// The host stopped while this call waited to start: a stopped
		// host sends nothing. The claim stays for recovery to settle.
		return handlerResult{Kind: outcomeAbandoned, Reason: "the host stopped before the call was made"}
	} else if err != nil {
		// Injected loss of the connection after the request may have left.
		resp, callErr := h.client.Do(req)
		if callErr == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		}
		return handlerResult{Kind: outcomeUncertain, Failure: failureConnectionLost, Reason: "connection lost after sending (injected)"}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// The connection was never established, so nothing was sent.
			return handlerResult{Kind: outcomeNoEffect, Reason: "destination unreachable: " + op.Err.Error()}
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return handlerResult{Kind: outcomeUncertain, Failure: failureTimeout, Reason: "destination timed out"}
		}
		return handlerResult{Kind: outcomeUncertain, Failure: failureConnectionLost, Reason: "transport error after sending: " + err.Error()}
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		var rc struct {
			MessageID string `json:"message_id"`
			Duplicate bool   `json:"duplicate"`
		}
		if rerr != nil || json.Unmarshal(raw, &rc) != nil || rc.MessageID == "" {
			// A success status with an unreadable receipt may still follow a
			// real send: never classify it as no effect.
			return handlerResult{Kind: outcomeUncertain, Failure: failureUnreadableReceipt, HTTPCode: resp.StatusCode, Reason: "unreadable receipt"}
		}
		return handlerResult{Kind: outcomeSuccess, HTTPCode: resp.StatusCode, Duplicate: rc.Duplicate,
			Output: map[string]any{"message_id": rc.MessageID}}
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
		// The destination protocol promises a 4xx rejection happens before
		// any effect.
		return handlerResult{Kind: outcomeNoEffect, HTTPCode: resp.StatusCode, Reason: "destination rejected the message"}
	default:
		return handlerResult{Kind: outcomeUncertain, Failure: failureDestinationError, HTTPCode: resp.StatusCode, Reason: fmt.Sprintf("destination answered %d", resp.StatusCode)}
	}
}

// lookup asks the destination whether an operation's write took effect: the
// receiver-lookup reconciliation mechanism.
func (h *Host) lookup(ctx context.Context, d Destination, opID string) (found bool, messageID string, err error) {
	if d.URL == "" {
		return false, "", errors.New("destination not configured")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(d.URL, "/")+"/lookup?key="+url.QueryEscape(opID), nil)
	if err != nil {
		return false, "", err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return false, "", fmt.Errorf("destination lookup answered %d", resp.StatusCode)
	}
	var lr struct {
		Found     bool   `json:"found"`
		MessageID string `json:"message_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&lr); err != nil {
		return false, "", err
	}
	return lr.Found, lr.MessageID, nil
}

// read performs a read handler's call: a receiver lookup of the message key
// the arguments name. Whatever goes wrong, nothing happened at the
// destination.
func (h *Host) read(ctx context.Context, d Destination, args any) handlerResult {
	m, _ := args.(map[string]any)
	key, _ := m["message_key"].(string)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(d.URL, "/")+"/lookup?key="+url.QueryEscape(key), nil)
	if err != nil {
		return handlerResult{Kind: outcomeNoEffect, Reason: "bad destination URL"}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return handlerResult{Kind: outcomeNoEffect, Failure: failureCancelled, Reason: "read cancelled"}
		}
		return handlerResult{Kind: outcomeNoEffect, Reason: "read failed: " + err.Error()}
	}
	defer resp.Body.Close()
	var lr struct {
		Found     bool   `json:"found"`
		MessageID string `json:"message_id"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&lr) != nil {
		return handlerResult{Kind: outcomeNoEffect, HTTPCode: resp.StatusCode, Reason: "read failed: unreadable lookup answer"}
	}
	out := map[string]any{"found": lr.Found}
	if lr.MessageID != "" {
		out["message_id"] = lr.MessageID
	}
	return handlerResult{Kind: outcomeSuccess, HTTPCode: resp.StatusCode, Output: out}
}
