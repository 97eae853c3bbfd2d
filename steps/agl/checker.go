package agl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"

	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
	"github.com/parley-conformance/parley/steps"
)

// The workflow checker (profile agl-checker, docs/agl-binding.md §11): the
// suite posts the fixtures of scenarios/agl-checker to POST
// /agl/v1/workflows/check and holds the answer to what each feature row
// says: a certificate for exactly that document, with its effect bound and
// the resources left after, or a diagnostic of a given code at a given span.
// The runtime scenarios hold a certificate apart from authority, and check
// module-interface compatibility at contract registration (profile agl-core).

const (
	checkPath = api + "/workflows/check"

	// preWorkflowCertified is a setup that needs the checker to certify a
	// workflow that checks.
	preWorkflowCertified = "agl.precondition.workflow-certified"
)

func init() { preconditions = append(preconditions, preWorkflowCertified) }

// checkState is one scenario's checker state.
type checkState struct {
	name    string
	sent    []byte            // the document last posted
	answers []*steps.Response // every check, in order
	diag    map[string]any    // the diagnostic the last rejection step found
	cert    map[string]any    // the certificate a setup kept
	firstFP string            // the email contract's fingerprint before a re-registration
}

func cst(ctx context.Context) *checkState {
	return steps.From(ctx).State("agl-checker", func() any { return &checkState{} }).(*checkState)
}

// fixture returns a fixture's document; a name the corpus lacks is the suite's mistake.
func fixture(name string) ([]byte, error) {
	b, err := aglchecker.Fixture(name)
	if err != nil {
		return nil, steps.Fault("%v (scenarios/agl-checker)", err)
	}
	return b, nil
}

// suiteDoc decodes a document the suite wrote.
func suiteDoc(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, steps.Fault("a suite document is not a JSON object: %v", err)
	}
	return m, nil
}

// check posts a document to the checker and makes the answer the last response.
func (cs *checkState) check(ctx context.Context, name string, doc []byte) error {
	w := steps.From(ctx)
	cs.name, cs.sent = name, doc
	r, err := w.Do(ctx, http.MethodPost, checkPath, doc, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	cs.answers = append(cs.answers, r)
	return nil
}

// answer reads the last check's answer: 200, the result schema, and whether
// the checker says the workflow checked.
func (cs *checkState) answer(ctx context.Context) (map[string]any, error) {
	w := steps.From(ctx)
	if len(cs.answers) == 0 {
		return nil, steps.Fault("no workflow was checked")
	}
	r := cs.answers[len(cs.answers)-1]
	if err := w.Assert(r.Status == http.StatusOK, "checking workflow %q: expected 200 with a result: %s", cs.name, r); err != nil {
		return nil, err
	}
	if err := w.ExpectSchema("agl/workflow-check.json", r.Body); err != nil {
		return nil, err
	}
	return r.JSON()
}

// spanText renders a span as the features write it: line:col-end_line:end_col.
func spanText(v any) string {
	m, _ := v.(map[string]any)
	return fmt.Sprintf("%s:%s-%s:%s", steps.Text(m["line"]), steps.Text(m["col"]), steps.Text(m["end_line"]), steps.Text(m["end_col"]))
}

func diagnosticList(m map[string]any) []string {
	list, _ := m["diagnostics"].([]any)
	var out []string
	for _, d := range list {
		dm, _ := d.(map[string]any)
		out = append(out, fmt.Sprintf("%s at %s", str(dm, "code"), spanText(dm["span"])))
	}
	return out
}

// csvSet reads a feature cell of comma-separated items; "-" is none.
func csvSet(cell string) []string {
	out := []string{}
	if strings.TrimSpace(cell) == "-" {
		return out
	}
	for _, x := range strings.Split(cell, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// resourceText renders a certificate's resource as the features write it:
// "d: email_draft Proposed" or "p: permit mail.send_email".
func resourceText(v any) string {
	m, _ := v.(map[string]any)
	if str(m, "type") == "permit" {
		return str(m, "name") + ": permit " + str(m, "operation")
	}
	return str(m, "name") + ": " + str(m, "kind") + " " + str(m, "state")
}

const spanCell = `(\d+:\d+-\d+:\d+)`

func registerChecker(c *steps.Catalog) {
	c.Given(`^an AGL host with a workflow checker$`, func(ctx context.Context) error {
		// The checker needs nothing configured: every checker scenario
		// shares its fixture's host, and each asks it only about its own
		// document.
		if f, ok := steps.From(ctx).Fixture(); !ok || f.Family != family {
			return steps.Fault("a checker scenario runs on an AGL fixture (tag it @fixture:agl-core)")
		}
		return nil
	})

	c.When(`^the checker checks the workflow "([^"]*)"(?: again)?$`, func(ctx context.Context, name string) error {
		doc, err := fixture(name)
		if err != nil {
			return err
		}
		return cst(ctx).check(ctx, name, doc)
	})
	c.When(`^the checker checks the workflow "([^"]*)" again, its members in another order$`, func(ctx context.Context, name string) error {
		doc, err := fixture(name)
		if err != nil {
			return err
		}
		m, err := suiteDoc(doc)
		if err != nil {
			return err
		}
		return cst(ctx).check(ctx, name, aglchecker.Reordered(m))
	})
	c.When(`^the checker checks the workflow "([^"]*)" (declaring IR version "[^"]*"|with an unknown statement kind|with a statement that has no span|with a member the IR does not define|with an operation that does not say whether it is idempotent)$`, func(ctx context.Context, name, how string) error {
		doc, err := fixture(name)
		if err != nil {
			return err
		}
		m, err := suiteDoc(doc)
		if err != nil {
			return err
		}
		body, _ := m["body"].([]any)
		first, _ := body[0].(map[string]any)
		switch {
		case strings.HasPrefix(how, "declaring IR version"):
			m["ir_version"] = strings.TrimSuffix(strings.TrimPrefix(how, `declaring IR version "`), `"`)
		case how == "with an unknown statement kind":
			first["kind"] = "teleport"
		case how == "with a statement that has no span":
			delete(first, "span")
		case how == "with an operation that does not say whether it is idempotent":
			ops, _ := m["operations"].([]any)
			op, _ := ops[0].(map[string]any)
			delete(op, "idempotent")
		default:
			first["priority"] = "high"
		}
		b, _ := json.Marshal(m)
		return cst(ctx).check(ctx, name, b)
	})

	c.Then(`^the checker certifies it with effect bound "([^"]*)" and resources after "([^"]*)"$`, func(ctx context.Context, effects, resources string) error {
		w, cs := steps.From(ctx), cst(ctx)
		m, err := cs.answer(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(m["checked"] == true, "the checker did not certify %q: %v", cs.name, diagnosticList(m)); err != nil {
			return err
		}
		cert, _ := m["certificate"].(map[string]any)
		// The certificate names exactly the document sent: the digest of its
		// agl-canon/1 encoding, computed here independently.
		doc, err := suiteDoc(cs.sent)
		if err != nil {
			return err
		}
		enc, err := canonicalize(any(doc))
		if err != nil {
			return steps.Fault("the fixture %s has no agl-canon/1 encoding: %v", cs.name, err)
		}
		sum := sha256.Sum256(enc)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if err := w.Assert(str(cert, "ir_digest") == digest, "the certificate names document %s; the document sent is %s", str(cert, "ir_digest"), digest); err != nil {
			return err
		}
		if err := w.Assert(str(cert, "workflow") == str(doc, "name"), "the certificate names workflow %q, the document is %q", str(cert, "workflow"), str(doc, "name")); err != nil {
			return err
		}
		var bound []string
		list, _ := cert["effect_bound"].([]any)
		for _, e := range list {
			bound = append(bound, steps.Text(e))
		}
		sort.Strings(bound)
		if bound == nil {
			bound = []string{}
		}
		if err := w.Assert(reflect.DeepEqual(bound, csvSet(effects)), "the certificate's effect bound is %v, want %v", bound, csvSet(effects)); err != nil {
			return err
		}
		after := []string{}
		res, _ := cert["resources_after"].([]any)
		for _, r := range res {
			after = append(after, resourceText(r))
		}
		sort.Strings(after)
		return w.Assert(reflect.DeepEqual(after, csvSet(resources)), "the certificate leaves %v available after, want %v", after, csvSet(resources))
	})

	c.Then(`^the checker rejects it with "(AGL-E\d{4})" at `+spanCell+`$`, func(ctx context.Context, code, span string) error {
		w, cs := steps.From(ctx), cst(ctx)
		m, err := cs.answer(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(m["checked"] == false && m["certificate"] == nil, "the checker certified %q, which must be rejected with %s at %s", cs.name, code, span); err != nil {
			return err
		}
		list, _ := m["diagnostics"].([]any)
		cs.diag = nil
		for _, d := range list {
			dm, _ := d.(map[string]any)
			if str(dm, "code") == code && spanText(dm["span"]) == span {
				cs.diag = dm
				break
			}
		}
		return w.Assert(cs.diag != nil, "no diagnostic %s at %s for %q; the checker said %v", code, span, cs.name, diagnosticList(m))
	})
	c.Then(`^that diagnostic relates `+spanCell+`$`, func(ctx context.Context, span string) error {
		w, cs := steps.From(ctx), cst(ctx)
		if cs.diag == nil {
			return steps.Fault("no diagnostic was found before this step")
		}
		rel, _ := cs.diag["related"].([]any)
		var spans []string
		for _, r := range rel {
			rm, _ := r.(map[string]any)
			spans = append(spans, spanText(rm["span"]))
		}
		return w.Assert(slices.Contains(spans, span), "the diagnostic %s relates %v, not %s", str(cs.diag, "code"), spans, span)
	})
	c.Then(`^every answer carries the same diagnostics in the same order$`, func(ctx context.Context) error {
		w, cs := steps.From(ctx), cst(ctx)
		if len(cs.answers) < 2 {
			return steps.Fault("fewer than two checks to compare")
		}
		var first any
		for i, r := range cs.answers {
			if err := w.Assert(r.Status == http.StatusOK, "check %d: %s", i+1, r); err != nil {
				return err
			}
			m, err := r.JSON()
			if err != nil {
				return err
			}
			list, _ := m["diagnostics"].([]any)
			if err := w.Assert(len(list) >= 2, "check %d of %q carries %d diagnostics; the row needs a workflow with several", i+1, cs.name, len(list)); err != nil {
				return err
			}
			if i == 0 {
				first = m["diagnostics"]
				continue
			}
			if err := w.Assert(reflect.DeepEqual(first, m["diagnostics"]), "check %d of %q answered other diagnostics than the first: %v, then %v", i+1, cs.name, first, m["diagnostics"]); err != nil {
				return err
			}
		}
		return nil
	})

	// A certificate is not an authorization.
	c.Setup(preWorkflowCertified, `^the checker has certified the workflow "([^"]*)"$`, func(ctx context.Context, name string) error {
		doc, err := fixture(name)
		if err != nil {
			return err
		}
		w, cs := steps.From(ctx), cst(ctx)
		r, err := w.Do(ctx, http.MethodPost, checkPath, doc, http.Header{"Content-Type": {"application/json"}})
		m, err := got(r, err).want(preWorkflowCertified, 200)
		if err != nil {
			return err
		}
		cert, _ := m["certificate"].(map[string]any)
		if m["checked"] != true || str(cert, "ir_digest") == "" {
			return steps.Precondition(preWorkflowCertified, &steps.Failure{Msg: "the checker did not certify a workflow that checks: " + r.String(), Exchange: r})
		}
		cs.cert = cert
		return nil
	})
	c.When(`^the agent dispatches the approved send with the workflow's certificate (as its approval|as its decision|digest as its permit token) instead of its permit$`, func(ctx context.Context, how string) error {
		s, cs := st(ctx), cst(ctx)
		if cs.cert == nil {
			return steps.Fault("no certificate was kept")
		}
		b, err := s.approvedBody()
		if err != nil {
			return err
		}
		delete(b, "permit_token")
		switch how {
		case "as its approval":
			b["approval"] = cs.cert
		case "as its decision":
			b["decision"] = cs.cert
		default:
			b["permit_token"] = str(cs.cert, "ir_digest")
		}
		return s.dispatch(ctx, false, b)
	})

	// Module-interface compatibility (section 10), at contract registration.
	c.When(`^the operator registers the email contract again at version "([^"]*)" with (`+strings.Join(contractChanges, "|")+`)$`, func(ctx context.Context, version, change string) error {
		s, cs, w := st(ctx), cst(ctx), steps.From(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		r, m, err := s.read(ctx, api+"/contracts/"+s.sendOp, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 200 && str(m, "contract_fingerprint") != "", "reading the registered email contract: %s", r); err != nil {
			return err
		}
		cs.firstFP = str(m, "contract_fingerprint")
		ct := s.emailContract(ctx, s.sendOp, version, s.emailAttempts)
		switch change {
		case "an added effect audit_write":
			ct["possible_effects"] = []string{"external_write", "email_send", "audit_write"}
		case "no authority requirement":
			ct["authority_requirements"] = []any{}
		case "an added authority requirement on the recipients":
			ct["authority_requirements"] = []any{map[string]any{"kind": "mailbox", "select": "/draft/payload/from"}, map[string]any{"kind": "recipient", "select": "/draft/payload/to"}}
		case "the approver role treasurer":
			ct["approval_requirement"] = map[string]any{"required": true, "role": "treasurer"}
		case "deduplication by destination key":
			ct["idempotency_contract"] = map[string]any{"kind": "destination_key"}
		case "2 attempts":
			ct["scheduling_contract"] = map[string]any{"max_attempts": 2}
		case "a timeout of 5000 ms":
			ct["scheduling_contract"] = map[string]any{"max_attempts": s.emailAttempts, "timeout_ms": 5000}
		}
		_, err = s.do(ctx, http.MethodPost, api+"/contracts", roleOperator, ct)
		return err
	})
	c.Then(`^the registered email contract is version "([^"]*)" (?:still, with its first fingerprint|now, with another fingerprint)$`, func(ctx context.Context, version string) error {
		s, cs, w := st(ctx), cst(ctx), steps.From(ctx)
		_, m, err := s.read(ctx, api+"/contracts/"+s.sendOp, roleNone)
		if err != nil {
			return err
		}
		if err := w.Assert(str(m, "contract_version") == version, "the registered email contract is version %q, want %q: %v", str(m, "contract_version"), version, m); err != nil {
			return err
		}
		same := str(m, "contract_fingerprint") == cs.firstFP
		return w.Assert(same == (version == "1"), "the registered email contract's fingerprint is %s; before the new registration it was %s", str(m, "contract_fingerprint"), cs.firstFP)
	})
}

// contractChanges are the changes a re-registration of the email contract
// can make, as the features name them.
var contractChanges = []string{
	"an added effect audit_write", "no authority requirement", "an added authority requirement on the recipients",
	"the approver role treasurer", "deduplication by destination key", "2 attempts", "a timeout of 5000 ms",
}
