package agl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

// Receipts, repeats and contract interfaces (spec 8, 10): a receipt that
// is JSON but not the contract's output type, a deduplicating destination
// under a contract that forbids repeats, and what a registration may not
// change or claim.

func registerInterfaces(c *steps.Catalog) {
	// The output type the email contract declares: a receipt naming a
	// message id of at least 8 characters. The fake destination's own ids
	// are 28 characters long.
	c.Given(`^the email contract declares its output as a message id of at least (\d+) characters$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if s.ready {
			return steps.Fault("the contracts are already registered")
		}
		s.emailOutput = map[string]any{"type": "object", "required": []string{"message_id"},
			"properties": map[string]any{"message_id": map[string]any{"type": "string", "minLength": n}}}
		return nil
	})
	c.Given(`^the destination will take effect on the next message and answer 200 with the receipt (.+)$`, func(ctx context.Context, receipt string) error {
		s := st(ctx)
		if s.mail == nil {
			return steps.Fault("describe the AGL host before its destination")
		}
		if !json.Valid([]byte(receipt)) {
			return steps.Fault("the receipt %s is not JSON", receipt)
		}
		s.mail.fake.Inject(fakemail.Fault{Mode: fakemail.FaultReceipt, Count: 1, Receipt: json.RawMessage(receipt)})
		return nil
	})

	// A contract that forbids repeats, at a destination that would
	// deduplicate them.
	c.Given(`^the email contract is registered as not idempotent with up to (\d+) attempts$`, func(ctx context.Context, n int) error {
		s := st(ctx)
		if s.ready {
			return steps.Fault("the contracts are already registered")
		}
		s.emailIdem, s.emailAttempts = "none", n
		return nil
	})

	// A legacy handler offered as a protected operation.
	c.When(`^the operator registers a contract "([^"]*)" whose implementation is the legacy tool "([^"]*)" (requiring approval|without approval|quoting the email implementation's fingerprint)$`, func(ctx context.Context, name, tool, how string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		ct := s.emailContract(ctx, s.opName(name), "1", 1)
		ct["implementation"] = tool
		delete(ct, "destination_account")
		ct["implementation_fingerprint"] = legacyFingerprint(tool)
		switch how {
		case "without approval":
			// An unprotected-looking declaration: no resource protocol,
			// no approval, the effects the legacy tool declares (none)
			// plus external_write, which makes it a protected write.
			delete(ct, "protocol_preconditions")
			delete(ct, "protocol_outcomes")
			ct["approval_requirement"] = map[string]any{"required": false}
			ct["input_type"] = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
			ct["authority_requirements"] = []any{}
			ct["possible_effects"] = []string{"external_write"}
		case "quoting the email implementation's fingerprint":
			ct["implementation_fingerprint"] = s.implementationFingerprint(ctx, "email.send/v1")
		}
		_, err := s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, ct)
		return err
	})
	// Recovery under changed conditions: the approval is made, and the
	// dispatch crashes, at a host of the scenario's own on the fixture's
	// store that runs under another deployment policy or sends email to
	// another destination; the fixture's host, which survives, recovers the
	// claim under its own.
	c.Given(`^the principal works at a host of its own on that store (whose deployment policy allows recipients only in "[^"]*"|that sends email to another destination)$`, func(ctx context.Context, how string) error {
		s, w := st(ctx), steps.From(ctx)
		if !s.shared {
			return steps.Fault("a host of the scenario's own on the store needs the store shared (a Given step describes it)")
		}
		if s.ready || s.crasher != nil {
			return steps.Fault("the principal's host must be described before anything is sent")
		}
		var deployment []string
		var moved *destination
		if m := quoted.FindStringSubmatch(how); m != nil {
			deployment = csv(m[1])
		} else {
			roster := fixtures.AGLRosterEmail
			if s.dedup {
				roster = fixtures.AGLRosterEmailDedup
			}
			var err error
			if s.mail2, err = leaseDestination(w, roster); err != nil {
				return err
			}
			moved = s.mail2
		}
		h, err := s.storeHost(ctx, "crashing", moved, deployment)
		if err != nil {
			return err
		}
		// From here on it is "the first host" (state is read back at the
		// fixture's host, "the second", once it has crashed).
		s.crasher = h
		return nil
	})
	c.When(`^the principal's host will crash at the external call, before sending$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if s.crasher == nil {
			return steps.Fault("no host of the principal's own was described")
		}
		if err := s.ensure(ctx); err != nil {
			return err
		}
		raw := mustJSON(map[string]any{"boundary": "external_call", "action": "halt", "operation": s.sendOp, "count": 1})
		r, err := w.Exchange(ctx, s.crasher.HTTP, http.MethodPost, seamPath+"/faults", raw, http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return err
		}
		switch r.Status {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			return steps.Block(verdict.CauseSeamAbsent, "the host answered %d at the fault seam: %s", r.Status, r)
		}
		if err := w.Assert(r.Status == http.StatusCreated, "the host's fault seam refused external_call/halt: %s", r); err != nil {
			return err
		}
		s.crashArmed = true
		return nil
	})
	c.Then(`^no destination received a message$`, func(ctx context.Context) error {
		s := st(ctx)
		if err := s.expectMessages(ctx, s.mail, "destination", 0); err != nil {
			return err
		}
		return s.expectMessages(ctx, s.mail2, "second destination", 0)
	})

	// A contract with one field outside its domain (section 4.2's field set).
	c.When(`^the operator registers the email contract as "([^"]*)" with (.+)$`, func(ctx context.Context, name, defect string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		ct := s.emailContract(ctx, s.opName(name), "1", 1)
		switch defect {
		case "no contract version":
			delete(ct, "contract_version")
		case "an implementation the host does not have":
			ct["implementation"] = "email.send/v9"
		case "an input type that is not an object":
			ct["input_type"] = map[string]any{"type": "string"}
		case "an output type using a keyword outside the type language":
			ct["output_type"] = map[string]any{"type": "object", "properties": map[string]any{"message_id": map[string]any{"type": "string", "pattern": "^msg_"}}}
		case "an authority requirement without a selector":
			ct["authority_requirements"] = []any{map[string]any{"kind": "mailbox"}}
		case "possible effects that omit email_send":
			ct["possible_effects"] = []string{"external_write"}
		case "a precondition that the draft is a Draft":
			ct["protocol_preconditions"] = []any{map[string]any{"argument": "/draft", "state": "Draft"}}
		case "success returning the draft to Authorized":
			ct["protocol_outcomes"] = map[string]any{"success": "Authorized", "no_effect": "FailedNoEffect", "uncertain": "Unknown"}
		case "no approval required":
			ct["approval_requirement"] = map[string]any{"required": false}
		case "an idempotency kind exactly_once":
			ct["idempotency_contract"] = map[string]any{"kind": "exactly_once"}
		case "a retry selector naming a failure kind that does not exist":
			ct["scheduling_contract"] = map[string]any{"max_attempts": 2, "retry_on": []string{"sometimes"}}
		default:
			return steps.Fault("no contract defect %q", defect)
		}
		_, err := s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, ct)
		return err
	})

	// Array order (section 6.2): recipients in an order that is not sorted.
	c.Setup(preDraft, `^the principal drafts an email to "([^"]*)", in that order$`, func(ctx context.Context, list string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		r, err := s.do(ctx, http.MethodPost, api+"/resources/email-drafts", roleNone, s.draftBody(s.me.principal, s.me.mailbox, csv(list), "See attached."))
		m, err := got(r, err).want(preDraft, 201)
		if err != nil {
			return err
		}
		s.draftID, s.latestHandle = str(m, "resource_id"), str(m, "handle")
		if s.draftID == "" || s.latestHandle == "" {
			return steps.Precondition(preDraft, &steps.Failure{Msg: "the draft carries no resource_id or handle: " + r.String(), Exchange: r})
		}
		return nil
	})
	c.Then(`^the proposal's snapshot lists the recipients "([^"]*)" in that order$`, func(ctx context.Context, list string) error {
		s, w := st(ctx), steps.From(ctx)
		to, _ := steps.Lookup(s.prop, "snapshot.arguments.draft.payload.to")
		got, _ := to.([]any)
		want := csv(list)
		same := len(got) == len(want)
		for i := 0; same && i < len(want); i++ {
			same = got[i] == want[i]
		}
		return w.Assert(same, "the snapshot lists the recipients %v, the draft has them as %v", to, want)
	})
	c.Then(`^the proposal's digest is not that of its snapshot with the recipients sorted$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		snap, _ := steps.Lookup(s.prop, "snapshot")
		sorted, err := decodeJSON(mustJSON(snap))
		if err != nil {
			return steps.Fault("the snapshot does not re-encode: %v", err)
		}
		to, _ := steps.Lookup(sorted, "arguments.draft.payload.to")
		list, _ := to.([]any)
		names := make([]string, 0, len(list))
		for _, e := range list {
			v, _ := e.(string)
			names = append(names, v)
		}
		slices.Sort(names)
		for i := range list {
			list[i] = names[i]
		}
		enc, err := canonicalize(sorted)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(enc)
		return w.Assert(str(s.prop, "digest") != "sha256:"+hex.EncodeToString(sum[:]), "the digest %s is also the digest of the snapshot with its recipients sorted: array order is lost", str(s.prop, "digest"))
	})

	// Static diagnostics name the required and the actual state (section 12).
	c.Then(`^that diagnostic requires state "([^"]*)", finds state "([^"]*)" and offers a remediation$`, func(ctx context.Context, required, actual string) error {
		w, cs := steps.From(ctx), cst(ctx)
		if cs.diag == nil {
			return steps.Fault("no diagnostic was found before this step")
		}
		d := cs.diag
		if err := w.Assert(namesState(d["required"], required), "the diagnostic %s says the required state is %v, want it to name %s: %v", str(d, "code"), d["required"], required, d); err != nil {
			return err
		}
		if err := w.Assert(namesState(d["actual"], actual), "the diagnostic %s says the actual state is %v, want it to name %s: %v", str(d, "code"), d["actual"], actual, d); err != nil {
			return err
		}
		return w.Assert(strings.TrimSpace(str(d, "remediation")) != "", "the diagnostic %s offers no remediation: %v", str(d, "code"), d)
	})

	c.Then(`^the registration is refused$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status >= 400 && r.Status < 500, "the host answered %d to a contract it should refuse: %s", r.Status, r); err != nil {
			return err
		}
		return w.ExpectSchema("agl/error.json", r.Body)
	})
}

// namesState says whether a diagnostic's required or actual member names
// state as one of its words (a host may say "Authorized", "state
// Authorized" or "Draft | Proposed").
func namesState(v any, state string) bool {
	text, _ := v.(string)
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	return slices.Contains(words, state)
}

// legacyFingerprint is what a contract naming a legacy tool quotes: the
// digest of the tool's name, since a legacy tool publishes no
// implementation fingerprint (it is not a trusted implementation).
func legacyFingerprint(tool string) string {
	sum := sha256.Sum256([]byte("legacy:" + tool))
	return "sha256:" + hex.EncodeToString(sum[:])
}
