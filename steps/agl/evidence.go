package agl

// Evidence obligations (spec 11, 13 Stage 3; docs/agl-binding.md §13,
// docs/hosts/agl.md §17): the steps open questions, serve documents at a
// fake source of the scenario's own, have the host collect them, draft,
// review, attest (the suite's validator signs, peers/validator) and
// publish, and read back what the host recorded.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/peers/evsource"
	"github.com/parley-conformance/parley/peers/validator"
	"github.com/parley-conformance/parley/steps"
)

const (
	preEvQuestion  = "agl.precondition.evidence-question-opened"
	preEvCollected = "agl.precondition.evidence-collected"
	preEvReport    = "agl.precondition.evidence-report-reviewed"
	preEvAttested  = "agl.precondition.evidence-attested"
)

func init() {
	preconditions = append(preconditions, preEvQuestion, preEvCollected, preEvReport, preEvAttested)
}

type evReceipt struct {
	id, digest, doc string
	revision        int
}

type evState struct {
	ready      bool
	operator   string
	exec       string
	source     *evsource.Server
	sourceURL  string // the lease's base URL on the fakes
	credential string
	secretArg  string // a secret carried in the source URL's query
	questions  map[string]map[string]any
	receipts   map[string]evReceipt
	digests    map[string]string // content digests the source served, by document and content
	reports    map[string]map[string]any
	atts       map[string]map[string]any
	pubs       map[string]map[string]any
	answers    [][]byte // every evidence answer the host gave
}

func evs(ctx context.Context) *evState {
	return steps.From(ctx).State("agl-evidence", func() any {
		return &evState{questions: map[string]map[string]any{}, receipts: map[string]evReceipt{}, digests: map[string]string{},
			reports: map[string]map[string]any{}, atts: map[string]map[string]any{}, pubs: map[string]map[string]any{}}
	}).(*evState)
}

// call sends body as the operator to the fixture's host, records the
// answer as the scenario's last, and keeps it for the checks on every
// answer.
func (e *evState) call(ctx context.Context, method, path string, body any) (*steps.Response, error) {
	w := steps.From(ctx)
	if !e.ready {
		return nil, steps.Fault("describe the AGL evidence host first")
	}
	h, err := w.Host(ctx)
	if err != nil {
		return nil, err
	}
	hd := http.Header{"Authorization": {"Bearer " + e.operator}}
	var raw []byte
	if body != nil {
		if raw, err = json.Marshal(body); err != nil {
			return nil, steps.Fault("encode %s %s: %v", method, path, err)
		}
		hd.Set("Content-Type", "application/json")
	}
	r, err := w.Exchange(ctx, h.HTTP, method, path, raw, hd)
	if err != nil {
		return nil, err
	}
	w.SetLast(r)
	e.answers = append(e.answers, r.Body)
	return r, nil
}

// create sends a request a set-up depends on and wants status back.
func (e *evState) create(ctx context.Context, pre, method, path string, body any, status int) (map[string]any, error) {
	return got(e.call(ctx, method, path, body)).want(pre, status)
}

func (e *evState) question(name string) (map[string]any, error) {
	q := e.questions[name]
	if q == nil {
		return nil, steps.Fault("no question %q was opened", name)
	}
	return q, nil
}

func (e *evState) revision(name string) (int, error) {
	q, err := e.question(name)
	if err != nil {
		return 0, err
	}
	n := 0
	fmt.Sscan(fmt.Sprint(q["revision"]), &n)
	return n, nil
}

func (e *evState) docURL(doc string) string {
	u := e.sourceURL + "/doc/" + doc
	if e.secretArg != "" {
		u += "?token=" + e.secretArg
	}
	return u
}

// collect asks the host to collect doc for question at revision.
func (e *evState) collect(ctx context.Context, doc, question string, revision int) (*steps.Response, error) {
	q, err := e.question(question)
	if err != nil {
		return nil, err
	}
	return e.call(ctx, http.MethodPost, api+"/evidence/questions/"+str(q, "question_id")+"/receipts", map[string]any{
		"question_revision": revision, "source": map[string]any{"url": e.docURL(doc), "credential": e.credential}})
}

func (e *evState) keepReceipt(name, doc string, revision int, m map[string]any) {
	e.receipts[name] = evReceipt{id: str(m, "receipt_id"), digest: str(m, "content_digest"), doc: doc, revision: revision}
}

// draft drafts a report on question citing receipts, with a body that
// names it, so two reports never share a digest.
func (e *evState) draft(ctx context.Context, name, question string, revision int, receipts []string) (*steps.Response, error) {
	q, err := e.question(question)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, rn := range receipts {
		rc, ok := e.receipts[rn]
		if !ok {
			return nil, steps.Fault("no receipt %q was collected", rn)
		}
		ids = append(ids, rc.id)
	}
	return e.call(ctx, http.MethodPost, api+"/evidence/reports", map[string]any{
		"question_id": str(q, "question_id"), "question_revision": revision, "receipt_ids": ids,
		"body": map[string]any{"answer": "report " + name + " of " + e.exec, "confidence": 0.75}})
}

func (e *evState) report(name string) (map[string]any, error) {
	r := e.reports[name]
	if r == nil {
		return nil, steps.Fault("no report %q was drafted", name)
	}
	return r, nil
}

// validatorOf is a validator the fixture's host trusts (with its key), or
// one of the same name signing with a key of its own that the host does
// not list.
func validatorOf(ctx context.Context, name, method, policy string, trusted bool) (validator.Validator, error) {
	w := steps.From(ctx)
	v := validator.Validator{Name: name, Method: method, Policy: policy, Version: "2.1.0"}
	known := false
	for _, fv := range fixtures.AGLValidators {
		known = known || fv.Name == name
	}
	if !known {
		return v, steps.Fault("fixture %s trusts no validator %q", fixtures.AGLEvidence, name)
	}
	if trusted {
		v.Key = fixtures.AGLValidatorKey(w.Env(), fixtures.AGLEvidence, name)
	} else {
		// The same derivation under another salt: a key nobody configured.
		other := w.Env()
		other.Salt += "-untrusted"
		v.Key = fixtures.AGLValidatorKey(other, fixtures.AGLEvidence, name)
	}
	return v, nil
}

// items is the evidence a report cites, as its answer listed it.
func items(report map[string]any) []validator.Item {
	var out []validator.Item
	list, _ := report["evidence"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		out = append(out, validator.Item{ReceiptID: str(m, "receipt_id"), ContentDigest: str(m, "content_digest")})
	}
	return out
}

// attest presents to report target an envelope the validator signed
// about report about, having inspected inspected.
func (e *evState) attest(ctx context.Context, v validator.Validator, target, about map[string]any, inspected []validator.Item, result string, tamper bool) (*steps.Response, error) {
	env, err := v.Attest(str(about, "report_id"), str(about, "report_digest"), inspected, result)
	if err != nil {
		return nil, steps.Fault("%v", err)
	}
	if tamper {
		// Flip the result inside the signed payload, keeping the signature.
		var m map[string]any
		json.Unmarshal(env, &m)
		p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
		p = []byte(strings.Replace(string(p), `"result":"fail"`, `"result":"pass"`, 1))
		m["payload"] = base64.StdEncoding.EncodeToString(p)
		env, _ = json.Marshal(m)
	}
	return e.call(ctx, http.MethodPost, api+"/evidence/reports/"+str(target, "report_id")+"/attestations", map[string]any{"envelope": json.RawMessage(env)})
}

func (e *evState) publish(ctx context.Context, report map[string]any, attestation string) (*steps.Response, error) {
	body := map[string]any{}
	if attestation != "" {
		body["attestation_id"] = attestation
	}
	return e.call(ctx, http.MethodPost, api+"/evidence/reports/"+str(report, "report_id")+"/publication", body)
}

func registerEvidence(c *steps.Catalog) {
	c.Given(`^an AGL host that collects evidence and trusts the validators "policy-checker" and "llm-reviewer"$`, func(ctx context.Context) error {
		w, e := steps.From(ctx), evs(ctx)
		f, ok := w.Fixture()
		if !ok || f.Name != fixtures.AGLEvidence {
			return steps.Fault("the evidence scenarios run on fixture %s (tag them @fixture:%s)", fixtures.AGLEvidence, fixtures.AGLEvidence)
		}
		if err := w.CallsBack(); err != nil {
			return err
		}
		fakes, err := w.Fakes()
		if err != nil {
			return err
		}
		i, _, err := w.Lease(fixtures.AGLRosterSource)
		if err != nil {
			return err
		}
		path := fixtures.AGLSourcePath(f.Name, i)
		e.credential, e.secretArg = random("srccred_"), random("srcq_")
		e.source = evsource.New(e.credential)
		unroute, err := fakes.Route(path+"/", http.StripPrefix(path, e.source))
		if err != nil {
			return steps.Fault("%v", err)
		}
		w.Cleanup(unroute)
		e.sourceURL = fakes.URL(path)
		e.operator, _, _ = fixtures.AGLKeys(w.Env(), f.Name)
		w.Secret(e.operator, e.credential, e.secretArg)
		e.exec, e.ready = random("evx_"), true
		return nil
	})
	c.Given(`^the source serves "([^"]*)" with the content "([^"]*)"$`, func(ctx context.Context, doc, content string) error {
		e := evs(ctx)
		if e.source == nil {
			return steps.Fault("describe the AGL evidence host first")
		}
		e.digests[doc+"\x00"+content] = e.source.Set(doc, []byte(content+"\n"+e.exec))
		return nil
	})
	open := func(ctx context.Context, name string) error {
		e := evs(ctx)
		if name == "" {
			name = "main"
		}
		m, err := e.create(ctx, preEvQuestion, http.MethodPost, api+"/evidence/questions", map[string]any{"execution_id": e.exec, "text": "which sources support " + name + "?"}, 201)
		if err != nil {
			return err
		}
		e.questions[name] = m
		return nil
	}
	c.Setup(preEvQuestion, `^a question is opened$`, func(ctx context.Context) error { return open(ctx, "") })
	c.Setup(preEvQuestion, `^a question "(\w+)" is opened$`, open)
	c.When(`^the question(?: "(\w+)")? is revised$`, func(ctx context.Context, name string) error {
		e := evs(ctx)
		if name == "" {
			name = "main"
		}
		q, err := e.question(name)
		if err != nil {
			return err
		}
		rev, _ := e.revision(name)
		m, err := e.create(ctx, preEvQuestion, http.MethodPut, api+"/evidence/questions/"+str(q, "question_id"),
			map[string]any{"text": "which sources support " + name + " now?", "expected_revision": rev}, 200)
		if err != nil {
			return err
		}
		if err := steps.From(ctx).Assert(fmt.Sprint(m["revision"]) == fmt.Sprint(rev+1), "a revised question is at revision %d, the host says %v", rev+1, m["revision"]); err != nil {
			return err
		}
		e.questions[name] = m
		return nil
	})
	// Collection as a set-up (the receipt is kept under a name) and as the
	// action a scenario witnesses.
	c.Setup(preEvCollected, `^"([^"]*)" is collected(?: for question "(\w+)")? as receipt "(\w+)"$`, func(ctx context.Context, doc, question, name string) error {
		e := evs(ctx)
		if question == "" {
			question = "main"
		}
		rev, err := e.revision(question)
		if err != nil {
			return err
		}
		m, err := got(e.collect(ctx, doc, question, rev)).want(preEvCollected, 201)
		if err != nil {
			return err
		}
		e.keepReceipt(name, doc, rev, m)
		return nil
	})
	c.When(`^the host collects "([^"]*)" for (?:the question's current revision|revision (\d+) of the question)(?: as receipt "(\w+)")?$`, func(ctx context.Context, doc, at, name string) error {
		e := evs(ctx)
		rev, err := e.revision("main")
		if err != nil {
			return err
		}
		if at != "" {
			fmt.Sscan(at, &rev)
		}
		r, err := e.collect(ctx, doc, "main", rev)
		if err != nil {
			return err
		}
		if name != "" && r.Status == 201 {
			m, _ := r.JSON()
			e.keepReceipt(name, doc, rev, m)
		}
		return nil
	})
	c.When(`^the source changes "([^"]*)" to the content "([^"]*)"$`, func(ctx context.Context, doc, content string) error {
		e := evs(ctx)
		e.digests[doc+"\x00"+content] = e.source.Set(doc, []byte(content+"\n"+e.exec))
		return nil
	})
	c.Then(`^the receipt records the source of "([^"]*)", the digest of "([^"]*)", when it was retrieved, and the question and its revision$`, func(ctx context.Context, doc, content string) error {
		w, e := steps.From(ctx), evs(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 201, "collecting evidence: %s", r.Unexpected(201)); err != nil {
			return err
		}
		if err := w.ExpectSchema("agl/evidence-receipt.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		q := e.questions["main"]
		want := e.digests[doc+"\x00"+content]
		if err := w.Assert(str(m, "content_digest") == want, "the receipt records content digest %s; the source served content whose digest is %s", str(m, "content_digest"), want); err != nil {
			return err
		}
		if err := w.Assert(str(m, "question_id") == str(q, "question_id") && fmt.Sprint(m["question_revision"]) == fmt.Sprint(q["revision"]),
			"the receipt names question %s revision %v, not the question %s at revision %v it was collected for", str(m, "question_id"), m["question_revision"], str(q, "question_id"), q["revision"]); err != nil {
			return err
		}
		src := str(m, "source.url")
		if err := w.Assert(strings.HasPrefix(src, e.sourceURL+"/doc/"+doc), "the receipt names source %q, not the document's address %s", src, e.sourceURL+"/doc/"+doc); err != nil {
			return err
		}
		if _, err := time.Parse(time.RFC3339Nano, str(m, "retrieved_at")); err != nil {
			return w.Assert(false, "retrieved_at %q is not a time: %v", str(m, "retrieved_at"), err)
		}
		if err := w.Assert(e.source.Gets() > 0, "the host recorded a receipt of %s without retrieving it from the source", doc); err != nil {
			return err
		}
		// The receipt reads back the same.
		back, err := e.call(ctx, http.MethodGet, api+"/evidence/receipts/"+str(m, "receipt_id"), nil)
		if err != nil {
			return err
		}
		bm, _ := back.JSON()
		return w.Assert(back.Status == 200 && str(bm, "content_digest") == want && fmt.Sprint(bm["question_revision"]) == fmt.Sprint(q["revision"]),
			"the receipt reads back otherwise: %s", back)
	})
	c.Then(`^receipt "(\w+)" records the digest of "([^"]*)" with the content "([^"]*)", unlike receipt "(\w+)"$`, func(ctx context.Context, name, doc, content, other string) error {
		w, e := steps.From(ctx), evs(ctx)
		a, b := e.receipts[name], e.receipts[other]
		if a.id == "" || b.id == "" {
			return w.Assert(false, "receipts %q and %q were not both recorded", name, other)
		}
		want := e.digests[doc+"\x00"+content]
		if err := w.Assert(a.digest == want, "receipt %s records %s; the source served the changed content, digest %s", name, a.digest, want); err != nil {
			return err
		}
		return w.Assert(a.digest != b.digest, "receipts %s and %s record the same digest %s of different content", name, other, a.digest)
	})
	draft := func(ctx context.Context, name, question string, at int, receipts string) (*steps.Response, error) {
		e := evs(ctx)
		if question == "" {
			question = "main"
		}
		rev, err := e.revision(question)
		if err != nil {
			return nil, err
		}
		if at != 0 {
			rev = at
		}
		r, err := e.draft(ctx, name, question, rev, csv(receipts))
		if err == nil && r.Status == 201 {
			m, _ := r.JSON()
			e.reports[name] = m
		}
		return r, err
	}
	c.Setup(preEvReport, `^report "(\w+)" citing "([^"]*)" is drafted and reviewed$`, func(ctx context.Context, name, receipts string) error {
		e := evs(ctx)
		if _, err := got(draft(ctx, name, "", 0, receipts)).want(preEvReport, 201); err != nil {
			return err
		}
		m, err := e.create(ctx, preEvReport, http.MethodPost, api+"/evidence/reports/"+str(e.reports[name], "report_id")+"/review", map[string]any{"reviewer": "editor-" + e.exec}, 200)
		if err != nil {
			return err
		}
		e.reports[name] = m
		return nil
	})
	c.When(`^report "(\w+)" on question "(\w+)"(?: at revision (\d+))? citing "([^"]*)" is drafted$`, func(ctx context.Context, name, question, at, receipts string) error {
		n := 0
		fmt.Sscan(at, &n)
		_, err := draft(ctx, name, question, n, receipts)
		return err
	})
	c.When(`^report "(\w+)" citing "([^"]*)" is drafted at revision (\d+) of the question$`, func(ctx context.Context, name, receipts string, at int) error {
		_, err := draft(ctx, name, "", at, receipts)
		return err
	})
	attestStep := func(ctx context.Context, pre, vname, method, policy string, trusted bool, target, about, result string, stale, tamper bool) error {
		e := evs(ctx)
		t, err := e.report(target)
		if err != nil {
			return err
		}
		a, err := e.report(about)
		if err != nil {
			return err
		}
		v, err := validatorOf(ctx, vname, method, policy, trusted)
		if err != nil {
			return err
		}
		inspected := items(a)
		if stale {
			// The validator inspected, under the receipt the report cites,
			// the content first collected from the same document.
			for i, it := range inspected {
				var doc string
				for _, rc := range e.receipts {
					if rc.id == it.ReceiptID {
						doc = rc.doc
					}
				}
				for _, older := range e.receipts {
					if older.doc == doc && older.id != it.ReceiptID {
						inspected[i].ContentDigest = older.digest
					}
				}
			}
		}
		r, err := e.attest(ctx, v, t, a, inspected, result, tamper)
		if err != nil {
			return err
		}
		if pre != "" {
			m, err := got(r, nil).want(pre, 201)
			if err != nil {
				return err
			}
			e.atts[target] = m
		} else if r.Status == 201 {
			m, _ := r.JSON()
			e.atts[target] = m
		}
		return nil
	}
	c.Setup(preEvAttested, `^the validator "([^"]*)" attests that report "(\w+)" (passes|fails) policy "([^"]*)"$`, func(ctx context.Context, v, report, result, policy string) error {
		method := "deterministic"
		if v == "llm-reviewer" {
			method = "llm"
		}
		return attestStep(ctx, preEvAttested, v, method, policy, true, report, report, map[string]string{"passes": "pass", "fails": "fail"}[result], false, false)
	})
	c.When(`^the validator "([^"]*)", stating its method as "(\w+)", attests that report "(\w+)" passes policy "([^"]*)"$`, func(ctx context.Context, v, method, report, policy string) error {
		return attestStep(ctx, "", v, method, policy, true, report, report, "pass", false, false)
	})
	c.When(`^the validator's attestation that report "(\w+)" passes is presented for report "(\w+)"$`, func(ctx context.Context, about, target string) error {
		return attestStep(ctx, "", "policy-checker", "deterministic", "sources-cited", true, target, about, "pass", false, false)
	})
	c.When(`^the validator attests report "(\w+)" having inspected the content first collected from its source$`, func(ctx context.Context, report string) error {
		return attestStep(ctx, "", "policy-checker", "deterministic", "sources-cited", true, report, report, "pass", true, false)
	})
	c.When(`^an attestation that report "(\w+)" passes is signed by (a key the host does not list|the trusted validator and changed after signing)$`, func(ctx context.Context, report, how string) error {
		if strings.HasPrefix(how, "a key") {
			return attestStep(ctx, "", "policy-checker", "deterministic", "sources-cited", false, report, report, "pass", false, false)
		}
		return attestStep(ctx, "", "policy-checker", "deterministic", "sources-cited", true, report, report, "fail", false, true)
	})
	c.When(`^report "(\w+)" is published (with its attestation|without an attestation|with the attestation of report "(\w+)")$`, func(ctx context.Context, report, how, other string) error {
		e := evs(ctx)
		rp, err := e.report(report)
		if err != nil {
			return err
		}
		att := ""
		switch {
		case strings.HasPrefix(how, "with its"):
			att = str(e.atts[report], "attestation_id")
			if att == "" {
				return steps.Fault("report %q has no attestation the host accepted", report)
			}
		case other != "":
			att = str(e.atts[other], "attestation_id")
			if att == "" {
				return steps.Fault("report %q has no attestation the host accepted", other)
			}
		}
		r, err := e.publish(ctx, rp, att)
		if err == nil && r.Status == 201 {
			m, _ := r.JSON()
			e.pubs[report] = m
		}
		return err
	})
	c.Then(`^report "(\w+)" is published, bound to its report digest and its attestation$`, func(ctx context.Context, report string) error {
		w, e := steps.From(ctx), evs(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 201, "publishing the report: %s", r.Unexpected(201)); err != nil {
			return err
		}
		if err := w.ExpectSchema("agl/evidence-publication.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		rp := e.reports[report]
		return w.Assert(str(m, "report_digest") == str(rp, "report_digest") && str(m, "attestation_id") == str(e.atts[report], "attestation_id"),
			"the publication binds digest %s and attestation %s, not the report's %s and its attestation %s", str(m, "report_digest"), str(m, "attestation_id"),
			str(rp, "report_digest"), str(e.atts[report], "attestation_id"))
	})
	c.Then(`^report "(\w+)" was not published$`, func(ctx context.Context, report string) error {
		w, e := steps.From(ctx), evs(ctx)
		rp, err := e.report(report)
		if err != nil {
			return err
		}
		saved := w.Last()
		r, err := e.call(ctx, http.MethodGet, api+"/evidence/reports/"+str(rp, "report_id"), nil)
		if err != nil {
			return err
		}
		if saved != nil {
			w.SetLast(saved)
		}
		m, _ := r.JSON()
		return w.Assert(r.Status == 200 && str(m, "state") != "Published" && str(m, "publication_id") == "",
			"the report reads as published after its publication was refused: %s", r)
	})
	c.Then(`^the host records the attestation as a judgment of "([^"]*)" of kind "(\w+)" under policy "([^"]*)", naming the evidence inspected, the report digest and the result "(\w+)"$`, func(ctx context.Context, v, kind, policy, result string) error {
		w, e := steps.From(ctx), evs(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 201, "presenting the attestation: %s", r.Unexpected(201)); err != nil {
			return err
		}
		if err := w.ExpectSchema("agl/evidence-attestation.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		rp := e.reports[str(m, "report_id")]
		for _, x := range e.reports {
			if str(x, "report_id") == str(m, "report_id") {
				rp = x
			}
		}
		j, _ := m["judgment"].(map[string]any)
		wantItems, _ := json.Marshal(items(rp))
		gotItems, _ := json.Marshal(items(j))
		checks := []struct {
			ok   bool
			what string
		}{
			{str(j, "validator") == v, fmt.Sprintf("validator %q, want %q", str(j, "validator"), v)},
			{str(j, "validator_kind") == kind, fmt.Sprintf("validator_kind %q, want %q", str(j, "validator_kind"), kind)},
			{str(j, "policy") == policy && str(j, "policy_version") == "2.1.0", fmt.Sprintf("policy %q version %q, want %q 2.1.0", str(j, "policy"), str(j, "policy_version"), policy)},
			{str(j, "result") == result, fmt.Sprintf("result %q, want %q", str(j, "result"), result)},
			{str(j, "report_digest") == str(rp, "report_digest"), fmt.Sprintf("report digest %q, want %q", str(j, "report_digest"), str(rp, "report_digest"))},
			{string(wantItems) == string(gotItems), fmt.Sprintf("evidence %s, want %s", gotItems, wantItems)},
		}
		for _, c := range checks {
			if err := w.Assert(c.ok, "the recorded judgment names %s: %s", c.what, r); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the publication of report "(\w+)" labels its judgment as made by "([^"]*)" of kind "(\w+)"$`, func(ctx context.Context, report, v, kind string) error {
		w, e := steps.From(ctx), evs(ctx)
		p := e.pubs[report]
		if err := w.Assert(p != nil, "report %s was not published", report); err != nil {
			return err
		}
		r, err := e.call(ctx, http.MethodGet, api+"/evidence/publications/"+str(p, "publication_id"), nil)
		if err != nil {
			return err
		}
		m, _ := r.JSON()
		for _, doc := range []map[string]any{p, m} {
			if err := w.Assert(str(doc, "judgment.validator") == v && str(doc, "judgment.validator_kind") == kind,
				"the publication labels its judgment %q of kind %q, want %q of kind %q: %v", str(doc, "judgment.validator"), str(doc, "judgment.validator_kind"), v, kind, doc); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^no answer about the question, its receipts, reports, attestations or publication claims "verified"$`, func(ctx context.Context) error {
		w, e := steps.From(ctx), evs(ctx)
		// Read every record back, then look at everything the host said.
		for _, rp := range e.reports {
			if _, err := e.call(ctx, http.MethodGet, api+"/evidence/reports/"+str(rp, "report_id"), nil); err != nil {
				return err
			}
		}
		for _, p := range e.pubs {
			if _, err := e.call(ctx, http.MethodGet, api+"/evidence/publications/"+str(p, "publication_id"), nil); err != nil {
				return err
			}
		}
		for _, q := range e.questions {
			if _, err := e.call(ctx, http.MethodGet, api+"/evidence/questions/"+str(q, "question_id"), nil); err != nil {
				return err
			}
		}
		for _, a := range e.answers {
			var v any
			if json.Unmarshal(a, &v) != nil {
				continue
			}
			if where := claimsVerified(v, ""); where != "" {
				return w.Assert(false, "the host claims a universal verified at %s: %s", where, a)
			}
		}
		return w.Assert(len(e.answers) > 0, "no evidence answer was read")
	})
	c.Then(`^the publication of report "(\w+)" records the validator's result as a judgment naming "([^"]*)", policy "([^"]*)" and its version$`, func(ctx context.Context, report, v, policy string) error {
		w, e := steps.From(ctx), evs(ctx)
		p := e.pubs[report]
		if err := w.Assert(p != nil, "report %s was not published", report); err != nil {
			return err
		}
		return w.Assert(str(p, "judgment.kind") == "judgment" && str(p, "judgment.validator") == v && str(p, "judgment.policy") == policy &&
			str(p, "judgment.policy_version") == "2.1.0" && str(p, "judgment.result") == "pass",
			"the publication does not record a judgment by %s under %s 2.1.0 with result pass: %v", v, policy, p)
	})
	c.Then(`^the audit trail of the evidence records the receipt of "(\w+)" and its content digest, and neither the source's credential nor the secret in its address$`, func(ctx context.Context, name string) error {
		w, e := steps.From(ctx), evs(ctx)
		rc := e.receipts[name]
		h, err := w.Host(ctx)
		if err != nil {
			return err
		}
		r, err := w.Exchange(ctx, h.HTTP, http.MethodGet, api+"/audit?execution_id="+e.exec, nil, http.Header{"Authorization": {"Bearer " + e.operator}})
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 200, "reading the audit trail: %s", r.Unexpected(200)); err != nil {
			return err
		}
		body := string(r.Body)
		if err := w.Assert(strings.Contains(body, rc.id) && strings.Contains(body, rc.digest),
			"the audit trail of execution %s does not name receipt %s with its digest %s", e.exec, rc.id, rc.digest); err != nil {
			return err
		}
		if err := w.Assert(e.source.Gets() > 0, "the source never served the document: the host did not present the credential"); err != nil {
			return err
		}
		for _, a := range append(e.answers, r.Body) {
			if strings.Contains(string(a), e.credential) || strings.Contains(string(a), e.secretArg) {
				return w.Assert(false, "the host repeats the source's credential or the secret in its address: %s", w.Redact(string(a)))
			}
		}
		return nil
	})
}

// claimsVerified finds a member named "verified" or a string "verified"
// (any case) in v, and says where.
func claimsVerified(v any, at string) string {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if strings.EqualFold(k, "verified") || strings.EqualFold(k, "is_verified") {
				return at + "/" + k
			}
			if w := claimsVerified(c, at+"/"+k); w != "" {
				return w
			}
		}
	case []any:
		for i, c := range x {
			if w := claimsVerified(c, fmt.Sprintf("%s/%d", at, i)); w != "" {
				return w
			}
		}
	case string:
		if strings.EqualFold(x, "verified") {
			return at
		}
	}
	return ""
}
