package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
)

// OperationContract is the binding's form of the spec's shared contract IR.
type OperationContract struct {
	QualifiedName             string                 `json:"qualified_name"`
	ContractVersion           string                 `json:"contract_version"`
	Implementation            string                 `json:"implementation"`
	ImplementationFingerprint string                 `json:"implementation_fingerprint"`
	InputType                 *TypeSpec              `json:"input_type"`
	OutputType                *TypeSpec              `json:"output_type,omitempty"`
	AuthorityRequirements     []AuthorityRequirement `json:"authority_requirements"`
	PossibleEffects           []string               `json:"possible_effects"`
	ProtocolPreconditions     []ProtocolCondition    `json:"protocol_preconditions"`
	ProtocolOutcomes          *ProtocolOutcomes      `json:"protocol_outcomes,omitempty"`
	ApprovalRequirement       ApprovalRequirement    `json:"approval_requirement"`
	IdempotencyContract       IdempotencyContract    `json:"idempotency_contract"`
	SchedulingContract        SchedulingContract     `json:"scheduling_contract"`
	// DestinationAccount names the configured account of the
	// implementation's destination this contract's operations write to
	// (absent: the destination's own account). It is deployment binding,
	// effect-relevant, and so bound into every snapshot.
	DestinationAccount string `json:"destination_account,omitempty"`
}

// AuthorityRequirement selects, by JSON pointer into the resolved arguments,
// the resource IDs of a kind that the caller's grant must cover.
type AuthorityRequirement struct {
	Kind   string `json:"kind"`
	Select string `json:"select"`
}

// ProtocolCondition names a handle argument and the state its resource must
// be in at dispatch.
type ProtocolCondition struct {
	Argument string `json:"argument"`
	State    string `json:"state"`
}

// ProtocolOutcomes names the resource state for each outcome class.
type ProtocolOutcomes struct {
	Success   string `json:"success"`
	NoEffect  string `json:"no_effect"`
	Uncertain string `json:"uncertain"`
}

type ApprovalRequirement struct {
	Required bool   `json:"required"`
	Role     string `json:"role,omitempty"`
}

// IdempotencyContract: "none" or "destination_key" (the destination
// deduplicates by the operation's idempotency key).
type IdempotencyContract struct {
	Kind string `json:"kind"`
}

// SchedulingContract bounds a logical operation's attempts. Retries happen
// only for an uncertain write whose destination deduplicates by key; of
// those, RetryOn selects the failure kinds that may be retried (absent: every
// kind; empty: none), and BackoffMS is the wait before each retry.
type SchedulingContract struct {
	MaxAttempts int      `json:"max_attempts"`
	TimeoutMS   int      `json:"timeout_ms,omitempty"`
	BackoffMS   int      `json:"backoff_ms,omitempty"`
	RetryOn     []string `json:"retry_on,omitempty"`
}

// Failure kinds of an uncertain outcome, as a retry selector names them.
const (
	failureDestinationError  = "destination_error"  // a 5xx, 408 or 429 answer
	failureTimeout           = "timeout"            // no answer before the deadline
	failureConnectionLost    = "connection_lost"    // the connection broke after the request was sent
	failureUnreadableReceipt = "unreadable_receipt" // a success status whose receipt cannot be read
	// failureCancelled: the dispatch was cancelled while the call was in
	// flight. Not a selector kind: a cancelled call is never retried.
	failureCancelled = "cancelled"
)

var failureKinds = []string{failureDestinationError, failureTimeout, failureConnectionLost, failureUnreadableReceipt}

// retries reports whether the selector lets a failure of this kind be retried.
func (s SchedulingContract) retries(failure string) bool {
	if s.RetryOn == nil {
		return true
	}
	return contains(s.RetryOn, failure)
}

type contractRow struct {
	OperationContract
	Fingerprint  string
	RegisteredAt int64
}

func (c *OperationContract) normalize() *Denial {
	bad := func(f string, a ...any) *Denial {
		return deny(422, "invalid_contract", "schema_error", 0, f, a...)
	}
	if c.QualifiedName == "" || strings.ContainsAny(c.QualifiedName, "/ ") {
		return bad("qualified_name must be a non-empty dotted name")
	}
	if c.ContractVersion == "" {
		return bad("contract_version is required")
	}
	im := implementations[c.Implementation]
	if im == nil {
		return deny(422, "unknown_implementation", "schema_error", 0, "no trusted implementation %q in this host", c.Implementation)
	}
	if c.ImplementationFingerprint != im.fingerprint {
		return deny(409, "implementation_fingerprint_mismatch", "proposal_mismatch", 0,
			"implementation %s has fingerprint %s, the contract declares %s", im.Name, im.fingerprint, c.ImplementationFingerprint)
	}
	if c.InputType == nil || c.InputType.Type != "object" {
		return bad("input_type must be an object type")
	}
	if err := c.InputType.check(""); err != nil {
		return bad("input_type %v", err)
	}
	if c.OutputType != nil {
		if err := c.OutputType.check(""); err != nil {
			return bad("output_type %v", err)
		}
	}
	for _, e := range im.Effects {
		if !contains(c.PossibleEffects, e) {
			return bad("possible_effects omit %q, which implementation %s can perform", e, im.Name)
		}
	}
	// An application effect such as financial_write refines external_write;
	// it may never replace it.
	if contains(c.PossibleEffects, "financial_write") && !contains(c.PossibleEffects, "external_write") {
		return bad("financial_write requires external_write as well")
	}
	for _, a := range c.AuthorityRequirements {
		if a.Kind == "" || !strings.HasPrefix(a.Select, "/") {
			return bad("authority requirement needs a kind and a JSON pointer select")
		}
	}
	if im.ResourceKind != "" {
		handles := handleArgs(c.InputType)
		if len(c.ProtocolPreconditions) != 1 || c.ProtocolPreconditions[0].State != "Authorized" ||
			handles[c.ProtocolPreconditions[0].Argument] != im.ResourceKind {
			return bad("%s requires one precondition: a %s handle argument in state Authorized", im.Name, im.ResourceKind)
		}
		want := ProtocolOutcomes{Success: "Sent", NoEffect: "FailedNoEffect", Uncertain: "Unknown"}
		if c.ProtocolOutcomes == nil || *c.ProtocolOutcomes != want {
			return bad("%s requires protocol_outcomes success=Sent no_effect=FailedNoEffect uncertain=Unknown", im.Name)
		}
		if !c.ApprovalRequirement.Required {
			return bad("%s is an approval-protected operation", im.Name)
		}
	} else if len(c.ProtocolPreconditions) > 0 || c.ProtocolOutcomes != nil {
		return bad("implementation %s has no resource protocol", im.Name)
	}
	if c.ApprovalRequirement.Required && c.ApprovalRequirement.Role == "" {
		c.ApprovalRequirement.Role = "operator"
	}
	switch c.IdempotencyContract.Kind {
	case "":
		c.IdempotencyContract.Kind = "none"
	case "none", "destination_key":
	default:
		return bad("idempotency_contract.kind must be none or destination_key")
	}
	if c.SchedulingContract.MaxAttempts <= 0 {
		c.SchedulingContract.MaxAttempts = 1
	}
	if c.SchedulingContract.MaxAttempts > 10 {
		return bad("scheduling_contract.max_attempts above 10")
	}
	if c.SchedulingContract.BackoffMS < 0 || c.SchedulingContract.BackoffMS > 60000 {
		return bad("scheduling_contract.backoff_ms must be between 0 and 60000")
	}
	for _, f := range c.SchedulingContract.RetryOn {
		if !contains(failureKinds, f) {
			return bad("scheduling_contract.retry_on: unknown failure kind %q (known: %s)", f, strings.Join(failureKinds, ", "))
		}
	}
	if c.AuthorityRequirements == nil {
		c.AuthorityRequirements = []AuthorityRequirement{}
	}
	if c.ProtocolPreconditions == nil {
		c.ProtocolPreconditions = []ProtocolCondition{}
	}
	return nil
}

// handleArgs maps top-level handle arguments ("/name") to their kind.
func handleArgs(t *TypeSpec) map[string]string {
	out := map[string]string{}
	for k, p := range t.Properties {
		if p.Handle != "" {
			out["/"+escapePointer(k)] = p.Handle
		}
	}
	return out
}

func contractFingerprint(c *OperationContract) (string, error) {
	v, err := toValue(c)
	if err != nil {
		return "", err
	}
	fp, _, err := Digest(v)
	return fp, err
}

func (h *Host) hRegisterContract(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var c OperationContract
	if d := decode(r, &c); d != nil {
		writeDenial(w, d)
		return
	}
	if d := c.normalize(); d != nil {
		writeDenial(w, d)
		return
	}
	if _, ok := h.destination(implementations[c.Implementation], &c); !ok {
		writeDenial(w, deny(422, "invalid_contract", "schema_error", 0, "destination_account %q is not an account of %s's destination on this host", c.DestinationAccount, c.Implementation))
		return
	}
	fp, err := contractFingerprint(&c)
	if err != nil {
		writeDenial(w, deny(422, "invalid_contract", "schema_error", 0, "%v", err))
		return
	}
	doc, _ := json.Marshal(c)
	status := 201
	err = h.st.tx(r.Context(), func(tx *sql.Tx) error {
		var ver, oldFP, oldDoc string
		err := tx.QueryRow(`SELECT contract_version, contract_fp, doc FROM contracts WHERE qualified_name=?`, c.QualifiedName).Scan(&ver, &oldFP, &oldDoc)
		switch {
		case err == nil && oldFP == fp:
			status = 200
			return nil
		case err == nil && ver == c.ContractVersion:
			return errAbort{deny(409, "contract_conflict", "proposal_mismatch", 0,
				"%s version %s is registered with fingerprint %s; a changed contract needs a new contract_version", c.QualifiedName, ver, oldFP)}
		case err == nil:
			// Section 10: an incompatible interface change needs a new major version (compat.go).
			if d := checkCompatibility(ver, oldDoc, &c); d != nil {
				return errAbort{d}
			}
		case !isNoRows(err):
			return err
		}
		var n int
		tx.QueryRow(`SELECT count(*) FROM contract_history WHERE qualified_name=? AND contract_version=?`, c.QualifiedName, c.ContractVersion).Scan(&n)
		if n > 0 {
			return errAbort{deny(409, "contract_conflict", "proposal_mismatch", 0, "%s version %s was registered before with other content", c.QualifiedName, c.ContractVersion)}
		}
		now := h.nowMS()
		if _, err := tx.Exec(`INSERT INTO contracts(qualified_name,contract_version,contract_fp,implementation,implementation_fp,doc,registered_at)
			VALUES(?,?,?,?,?,?,?) ON CONFLICT(qualified_name) DO UPDATE SET contract_version=excluded.contract_version,
			contract_fp=excluded.contract_fp, implementation=excluded.implementation, implementation_fp=excluded.implementation_fp,
			doc=excluded.doc, registered_at=excluded.registered_at`,
			c.QualifiedName, c.ContractVersion, fp, c.Implementation, c.ImplementationFingerprint, string(doc), now); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO contract_history VALUES(?,?,?,?,?)`, c.QualifiedName, c.ContractVersion, fp, string(doc), now); err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "contract_registered", QualifiedName: c.QualifiedName, ContractFingerprint: fp})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, status, map[string]any{"qualified_name": c.QualifiedName, "contract_version": c.ContractVersion,
		"contract_fingerprint": fp, "implementation_fingerprint": c.ImplementationFingerprint, "contract": c})
}

var sqlLoadContract = hot(`SELECT doc, contract_fp, registered_at FROM contracts WHERE qualified_name=?`)

func (h *Host) loadContract(ctx context.Context, q querier, name string) (*contractRow, error) {
	var doc string
	row := &contractRow{}
	err := h.st.row(ctx, q, sqlLoadContract, name).Scan(&doc, &row.Fingerprint, &row.RegisteredAt)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(doc), &row.OperationContract); err != nil {
		return nil, err
	}
	return row, nil
}

func (h *Host) hGetContract(w http.ResponseWriter, r *http.Request) {
	c, err := h.loadContract(r.Context(), h.st.db, r.PathValue("name"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "unknown_operation", "schema_error", 0, "no contract named %q", r.PathValue("name")))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"qualified_name": c.QualifiedName, "contract_version": c.ContractVersion,
		"contract_fingerprint": c.Fingerprint, "implementation_fingerprint": c.ImplementationFingerprint, "contract": c.OperationContract})
}

// Agent is an agent's tool set and effect ceiling, set by the operator.
type Agent struct {
	Principal     string   `json:"principal"`
	Tools         []string `json:"tools"`
	EffectCeiling []string `json:"effect_ceiling"`
}

func (h *Host) hPutAgent(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "operator", h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	var a Agent
	if d := decode(r, &a); d != nil {
		writeDenial(w, d)
		return
	}
	if a.Principal == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "principal is required"))
		return
	}
	if a.Tools == nil {
		a.Tools = []string{}
	}
	if a.EffectCeiling == nil {
		a.EffectCeiling = []string{}
	}
	id := r.PathValue("id")
	tools, _ := json.Marshal(a.Tools)
	ceil, _ := json.Marshal(a.EffectCeiling)
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO agents VALUES(?,?,?,?,?) ON CONFLICT(agent_id) DO UPDATE SET principal=excluded.principal,
			tools=excluded.tools, effect_ceiling=excluded.effect_ceiling, updated_at=excluded.updated_at`,
			id, a.Principal, string(tools), string(ceil), h.nowMS())
		if err != nil {
			return err
		}
		return h.audit(tx, auditRecord{Event: "agent_configured", AgentID: id, Principal: a.Principal})
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"agent_id": id, "principal": a.Principal, "tools": a.Tools, "effect_ceiling": a.EffectCeiling})
}

var sqlLoadAgent = hot(`SELECT principal, tools, effect_ceiling FROM agents WHERE agent_id=?`)

func (h *Host) loadAgent(ctx context.Context, q querier, id string) (*Agent, error) {
	var a Agent
	var tools, ceil string
	if err := h.st.row(ctx, q, sqlLoadAgent, id).Scan(&a.Principal, &tools, &ceil); err != nil {
		return nil, err
	}
	json.Unmarshal([]byte(tools), &a.Tools)
	json.Unmarshal([]byte(ceil), &a.EffectCeiling)
	return &a, nil
}

func (h *Host) hGetAgent(w http.ResponseWriter, r *http.Request) {
	a, err := h.loadAgent(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such agent"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"agent_id": r.PathValue("id"), "principal": a.Principal, "tools": a.Tools, "effect_ceiling": a.EffectCeiling})
}
