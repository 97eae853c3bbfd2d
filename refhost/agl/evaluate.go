package agl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// actionRequest names an action the way a model or workflow proposes it.
type actionRequest struct {
	ExecutionID string          `json:"execution_id"`
	Principal   string          `json:"principal"`
	AgentID     string          `json:"agent_id"`
	Operation   string          `json:"operation"`
	Arguments   json.RawMessage `json:"arguments"`
	GrantToken  string          `json:"grant_token"`
}

// evaluation is the result of dispatcher steps 1 to 4 (shared by propose
// and dispatch) plus the snapshot whose digest an approval binds.
type evaluation struct {
	req       *actionRequest
	contract  *contractRow
	impl      *implementation
	agent     *Agent
	grant     *grantRow
	args      any
	handles   map[string]*resolvedHandle // by top-level argument pointer
	snapshot  map[string]any
	digest    string
	canonical []byte
}

// resourceID is the resource the action is about (its one handle
// argument's), or "" for an action on no resource.
func (ev *evaluation) resourceID() string {
	for _, rh := range ev.handles {
		return rh.ResourceID
	}
	return ""
}

// evaluate runs steps 1-4. wantState is the protocol state a handle's
// resource must be in: Draft when proposing, the contract's precondition
// state when dispatching. onStateMismatch lets dispatch explain a resource
// that has already left Authorized because this very permit was used.
func (h *Host) evaluate(ctx context.Context, req *actionRequest, proposing bool, onStateMismatch func(res *resourceRow) *Denial) (*evaluation, *Denial, error) {
	ev := &evaluation{req: req, handles: map[string]*resolvedHandle{}}
	if req.ExecutionID == "" || req.Principal == "" || req.AgentID == "" || req.Operation == "" {
		return nil, deny(422, "schema_error", "schema_error", 2, "execution_id, principal, agent_id and operation are required"), nil
	}

	// Step 1: the qualified contract, and its fingerprints against the
	// trusted implementation compiled into this host.
	c, err := h.loadContract(ctx, h.st.db, req.Operation)
	if isNoRows(err) {
		return nil, deny(422, "unknown_operation", "schema_error", 1, "no contract is registered for %q", req.Operation), nil
	} else if err != nil {
		return nil, nil, err
	}
	ev.contract, ev.impl = c, implementations[c.Implementation]
	if ev.impl == nil || ev.impl.fingerprint != c.ImplementationFingerprint {
		return nil, deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 1,
			"the registered contract for %s does not match the trusted implementation in this host", req.Operation), nil
	}

	// Step 2: arguments against the input type, defaults materialized, and
	// every handle resolved through the store (never trusted as data).
	raw := req.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	v, err := ParseJSON(raw)
	if err != nil {
		return nil, deny(422, "schema_error", "schema_error", 2, "arguments: %v", err), nil
	}
	var refs []handleRef
	args, err := c.InputType.materialize(v, "/arguments", &refs)
	if err != nil {
		return nil, deny(422, "schema_error", "schema_error", 2, "%v", err), nil
	}
	for _, ref := range refs {
		rh, err := h.resolveHandle(ctx, h.st.db, ref.Value)
		if isNoRows(err) || (err == nil && rh.Kind != ref.Kind) {
			return nil, deny(422, "unknown_handle", "schema_error", 2, "argument /%s is not a %s handle issued by this host", strings.Join(ref.Path, "/"), ref.Kind), nil
		} else if err != nil {
			return nil, nil, err
		}
		args = setPath(args, ref.Path, map[string]any{
			"resource_id": rh.ResourceID, "kind": rh.Kind, "revision": json.Number(fmt.Sprint(rh.Revision)),
			"payload_digest": rh.PayloadDigest, "payload": rh.Payload,
		})
		ev.handles["/"+strings.Join(ref.Path, "/")] = rh
	}
	ev.args = args

	// Step 3: tool set, concrete authority scope, deployment restrictions.
	ag, err := h.loadAgent(ctx, h.st.db, req.AgentID)
	if isNoRows(err) {
		return nil, deny(403, "unknown_agent", "authorization_denied", 3, "agent %q is not configured on this host", req.AgentID), nil
	} else if err != nil {
		return nil, nil, err
	}
	ev.agent = ag
	if ag.Principal != req.Principal {
		return nil, deny(403, "principal_mismatch", "authorization_denied", 3, "agent %s acts for another principal", req.AgentID), nil
	}
	if !contains(ag.Tools, req.Operation) {
		return nil, deny(403, "tool_not_in_toolset", "authorization_denied", 3, "%s is not in agent %s's tool set", req.Operation, req.AgentID), nil
	}
	if contains(h.cfg.Deployment.DisabledOperations, req.Operation) {
		return nil, deny(403, "deployment_restricted", "authorization_denied", 3, "%s is disabled by deployment policy", req.Operation), nil
	}
	if req.GrantToken == "" {
		return nil, deny(403, "authority_missing", "authorization_denied", 3, "no grant was presented"), nil
	}
	g, err := h.grantByToken(ctx, h.st.db, req.GrantToken)
	if isNoRows(err) {
		return nil, deny(403, "authority_missing", "authorization_denied", 3, "the presented grant is not one this host issued"), nil
	} else if err != nil {
		return nil, nil, err
	}
	ev.grant = g
	if g.Subject != req.Principal {
		return nil, deny(403, "authority_missing", "authorization_denied", 3, "grant %s is for another principal", g.ID), nil
	}
	if d := h.checkGrantChain(ctx, h.st.db, g, 3); d != nil {
		return nil, d, nil
	}
	if !g.coversOperation(req.Operation) {
		return nil, deny(403, "authority_missing", "authorization_denied", 3, "grant %s does not cover %s", g.ID, req.Operation), nil
	}
	for _, ar := range c.AuthorityRequirements {
		sel, ok := lookupPointer(args, ar.Select)
		if !ok {
			return nil, deny(422, "schema_error", "schema_error", 3, "authority selector %s finds nothing in the arguments", ar.Select), nil
		}
		ids, ok := stringsOf(sel)
		if !ok {
			return nil, deny(422, "schema_error", "schema_error", 3, "authority selector %s does not select resource ids", ar.Select), nil
		}
		for _, id := range ids {
			if !g.coversResource(ar.Kind, id) {
				return nil, deny(403, "authority_missing", "authorization_denied", 3, "grant %s does not cover %s %q", g.ID, ar.Kind, id), nil
			}
		}
	}
	for p, rh := range ev.handles {
		if rh.Owner != req.Principal {
			return nil, deny(403, "authority_missing", "authorization_denied", 3, "the resource behind %s belongs to another principal", p), nil
		}
		if rh.Kind == "email_draft" && len(h.cfg.Deployment.AllowedRecipientDomains) > 0 {
			m, _ := rh.Payload.(map[string]any)
			rcpts, _ := stringsOf(m["to"])
			cc, _ := stringsOf(m["cc"])
			for _, rc := range append(rcpts, cc...) {
				at := strings.LastIndexByte(rc, '@')
				if at < 0 || !contains(h.cfg.Deployment.AllowedRecipientDomains, strings.ToLower(rc[at+1:])) {
					return nil, deny(403, "deployment_restricted", "authorization_denied", 3, "recipient %q is outside the allowed domains", rc), nil
				}
			}
		}
	}

	// Step 4: effect ceiling, then protocol preconditions on current state.
	for _, e := range c.PossibleEffects {
		if !contains(ag.EffectCeiling, e) {
			return nil, deny(403, "effect_ceiling_exceeded", "authorization_denied", 4, "effect %s exceeds agent %s's ceiling", e, req.AgentID), nil
		}
	}
	for _, pc := range c.ProtocolPreconditions {
		rh := ev.handles[pc.Argument]
		if rh == nil {
			return nil, deny(422, "schema_error", "schema_error", 4, "precondition argument %s is not a handle", pc.Argument), nil
		}
		cur, err := h.loadResource(ctx, h.st.db, rh.ResourceID)
		if err != nil {
			return nil, nil, err
		}
		want := pc.State
		if proposing {
			want = "Draft"
		}
		if cur.Revision != rh.Revision {
			return nil, deny(409, "stale_revision", "stale_revision", 4, "the handle names revision %d of %s; the current revision is %d", rh.Revision, rh.ResourceID, cur.Revision), nil
		}
		if cur.State != want {
			if onStateMismatch != nil {
				if d := onStateMismatch(cur); d != nil {
					return nil, d, nil
				}
			}
			return nil, deny(409, "invalid_protocol_state", "invalid_protocol_state", 4, "%s is %s; this step needs %s", rh.ResourceID, cur.State, want), nil
		}
	}

	// The snapshot: every effect-relevant input, materialized, in one value.
	dest, _ := h.destination(ev.impl, &c.OperationContract)
	snap := map[string]any{
		"canon_version":              CanonVersion,
		"operation":                  c.QualifiedName,
		"contract_version":           c.ContractVersion,
		"contract_fingerprint":       c.Fingerprint,
		"implementation_fingerprint": c.ImplementationFingerprint,
		"policy_fingerprint":         h.policyFP,
		"execution_id":               req.ExecutionID,
		"principal":                  req.Principal,
		"agent_id":                   req.AgentID,
		"grant_id":                   g.ID,
		"arguments":                  args,
		"deployment": map[string]any{
			"destination": dest.URL, "account": dest.Account, "destination_idempotent": dest.HonoursIdempotencyKey,
		},
	}
	sv, err := toValue(snap)
	if err != nil {
		return nil, nil, err
	}
	ev.snapshot = sv.(map[string]any)
	ev.digest, ev.canonical, err = Digest(ev.snapshot)
	if err != nil {
		return nil, deny(422, "schema_error", "schema_error", 2, "%v", err), nil
	}
	return ev, nil, nil
}

func stringsOf(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case nil:
		return nil, true
	}
	return nil, false
}

// snapshotDiff lists the snapshot members whose canonical encodings differ,
// as structured feedback for a proposal mismatch.
func snapshotDiff(a, b map[string]any) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		ea, _ := Canonicalize(a[k])
		eb, _ := Canonicalize(b[k])
		if string(ea) != string(eb) {
			if k == "arguments" {
				am, _ := a[k].(map[string]any)
				bm, _ := b[k].(map[string]any)
				for _, sub := range snapshotDiff(am, bm) {
					out = append(out, "arguments/"+sub)
				}
				continue
			}
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (h *Host) writeEvalErr(w http.ResponseWriter, d *Denial, err error) {
	if d != nil {
		writeDenial(w, d)
		return
	}
	h.fail(w, err)
}
