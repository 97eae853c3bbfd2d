package agtp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/steps"
)

// PROPOSE (agtp-rcns.txt, "Purpose" to the status code table) and the
// inventory surfaces (DISCOVER /patterns and /contracts, INSPECT
// target=contract and target=rcns-attempt). A proposal is sent to target
// "/" with the endpoint definition in the request envelope's parameters.

// proposalOpts are what a "proposes" step says about the proposal.
type proposalOpts struct {
	form         string // wrapped (default), legacy, both
	persistent   bool
	authority    []string // the proposal's authority_scope; default rooms:write
	noIntent     bool
	noSemantic   bool
	badInput     bool
	badOutput    bool
	claim        *string
	remembered   string
	authoritySet bool
}

var (
	propForm       = regexp.MustCompile(`^in the (wrapped|legacy) form`)
	propBoth       = regexp.MustCompile(`^in both forms at once`)
	propPersistent = regexp.MustCompile(`^with persistent: true`)
	propAuthority  = regexp.MustCompile(`^declaring authority "([^"]*)"`)
	propNoIntent   = regexp.MustCompile(`^without a semantic intent`)
	propNoSemantic = regexp.MustCompile(`^without a semantic block`)
	propBadSchema  = regexp.MustCompile(`^with an invalid (input|output) schema`)
	propClaim      = regexp.MustCompile(`^claiming "([^"]*)"`)
	propRemember   = regexp.MustCompile(`^remembered as "([a-z]+)"`)
)

func parseProposalTail(tail string) (proposalOpts, error) {
	o := proposalOpts{form: "wrapped"}
	for tail = strings.TrimSpace(tail); tail != ""; tail = strings.TrimSpace(tail) {
		var m []string
		switch {
		case propForm.MatchString(tail):
			m = propForm.FindStringSubmatch(tail)
			o.form = m[1]
		case propBoth.MatchString(tail):
			m = propBoth.FindStringSubmatch(tail)
			o.form = "both"
		case propPersistent.MatchString(tail):
			m = propPersistent.FindStringSubmatch(tail)
			o.persistent = true
		case propAuthority.MatchString(tail):
			m = propAuthority.FindStringSubmatch(tail)
			o.authority, o.authoritySet = splitScopes(m[1]), true
		case propNoIntent.MatchString(tail):
			m = propNoIntent.FindStringSubmatch(tail)
			o.noIntent = true
		case propNoSemantic.MatchString(tail):
			m = propNoSemantic.FindStringSubmatch(tail)
			o.noSemantic = true
		case propBadSchema.MatchString(tail):
			m = propBadSchema.FindStringSubmatch(tail)
			if m[1] == "input" {
				o.badInput = true
			} else {
				o.badOutput = true
			}
		case propClaim.MatchString(tail):
			m = propClaim.FindStringSubmatch(tail)
			v := m[1]
			o.claim = &v
		case propRemember.MatchString(tail):
			m = propRemember.FindStringSubmatch(tail)
			o.remembered = m[1]
		default:
			return o, steps.Fault("cannot read the proposal %q", tail)
		}
		tail = tail[len(m[0]):]
	}
	if !o.authoritySet {
		o.authority = []string{"rooms:write"}
	}
	return o, nil
}

func splitScopes(csv string) []string {
	out := []string{}
	for _, t := range strings.Split(csv, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// invalidSchema is not a JSON Schema under any draft: "type" names no type
// and minLength is negative.
var invalidSchema = map[string]any{"type": "no-such-type", "minLength": -1}

// proposalParams builds the PROPOSE parameters: an endpoint definition with
// a complete semantic block, valid input and output schemas and an
// authority_scope, in the form the step names.
func proposalParams(method, path string, o proposalOpts) map[string]any {
	semantic := map[string]any{"intent": "hold a meeting room for the requester", "actor": "scheduling agent",
		"outcome": "the room is held and a booking is counted", "impact_tier": "reversible", "is_idempotent": false}
	if o.noIntent {
		delete(semantic, "intent")
	}
	input := any(map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}})
	output := any(map[string]any{"type": "object"})
	if o.badInput {
		input = invalidSchema
	}
	if o.badOutput {
		output = invalidSchema
	}
	auth := make([]any, len(o.authority))
	for i, t := range o.authority {
		auth[i] = t
	}
	ep := map[string]any{"method": method, "path": path, "description": "parley proposal for " + method + " " + path,
		"semantic": semantic, "input_schema": input, "output_schema": output, "authority_scope": auth}
	if o.noSemantic {
		delete(ep, "semantic")
	}
	params := map[string]any{}
	// The legacy form's name "names the endpoint"; the text does not say
	// whether that is a label or the method (a real server reads it as the
	// method). The suite's name is the proposed method itself, which the
	// endpoint fields also carry, so both readings find the same pair.
	name := method
	switch o.form {
	case "wrapped":
		params["endpoint"] = ep
	case "legacy":
		for k, v := range ep {
			params[k] = v
		}
		params["name"] = name
	case "both":
		params["endpoint"] = ep
		params["name"] = name
	}
	if o.persistent {
		params["persistent"] = true
	}
	return params
}

// body is the object a body check reads: the response envelope's result
// when there is one, else the body itself.
func body(r *steps.Response) (map[string]any, []byte) {
	doc, _ := r.JSON()
	if res, ok := doc["result"].(map[string]any); ok {
		b, _ := json.Marshal(res)
		return res, b
	}
	return doc, r.Body
}

// endSession closes the scenario's AGTP connection, which is its AGTP
// session, and waits (up to 3 s) until the host has let go of every
// synthesis the session obtained without persistence: the server learns of
// the end asynchronously. It watches each one's state through INSPECT
// target=contract (Tier C Resolution names the fields it shows) on a new
// connection, until it is no longer pending or active; a host whose INSPECT
// tells nothing gets a fixed grace instead. The wait asserts nothing; the
// steps after it do.
func endSession(ctx context.Context) error {
	s := st(ctx)
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	bound := s.sessionBound
	s.sessionBound = nil
	// 60 reads 50 ms apart in all (3 s idle): counted in reads, each a
	// round trip to the host, so a host slowed by a busy machine gets as
	// many chances as an idle one.
	reads := 0
	informed := false
	for _, b := range bound {
		for {
			r, err := send(ctx, b.agent, "INSPECT", "/", options{params: map[string]any{"target": "contract", "synthesis_id": b.sid}, aside: true})
			if err != nil {
				return err
			}
			doc, _ := body(r)
			state, _ := doc["state"].(string)
			if r.Status == 200 && state != "" {
				informed = true
			}
			if reads++; r.Status != 200 || (state != "active" && state != "pending") || reads >= 60 {
				break
			}
			if err := pause(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	if len(bound) > 0 && !informed {
		return pause(ctx, 300*time.Millisecond)
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return steps.Fault("the run was interrupted while waiting for the session's end: %v", ctx.Err())
	}
}

// listContracts sends DISCOVER /contracts as who. The fixture host is
// shared: a listing is read for the scenario's own contracts, and one
// that shows another lease's contracts under who's identity is a suite
// fault (checkOwnListing).
func listContracts(ctx context.Context, who string) error {
	w, s := steps.From(ctx), st(ctx)
	r, err := floor(ctx, who, "DISCOVER", "/contracts", map[string]any{"criteria": "contracts"})
	if err != nil {
		return err
	}
	a, err := s.agent(ctx, who)
	if err != nil {
		return err
	}
	return s.checkOwnListing(w, a, r)
}

// pollProposal sends QUERY /proposals/{proposal_id} as agent.
func pollProposal(ctx context.Context, who string) (*steps.Response, error) {
	s := st(ctx)
	if s.proposal == "" {
		return nil, steps.Fault("no 261 named a proposal_id")
	}
	return floor(ctx, who, "QUERY", "/proposals/"+s.proposal, map[string]any{"intent": "the status of proposal " + s.proposal})
}

func registerPropose(c *steps.Catalog) {
	c.When(`^"([a-z]+)" proposes ([A-Za-z]+) (\S+)(.*)$`, func(ctx context.Context, who, method, path, tail string) error {
		s := st(ctx)
		o, err := parseProposalTail(tail)
		if err != nil {
			return err
		}
		path = s.expand(path)
		s.proposed = proposedPair{method, path}
		before := s.current
		s.current = ""
		r, err := send(ctx, who, "PROPOSE", "/", options{params: proposalParams(method, path, o), claim: o.claim})
		if err != nil {
			return err
		}
		if r.Status != 263 && s.current == "" {
			s.current = before
		}
		if o.remembered != "" {
			// The proposal is a setup here: the scenario needs the contract.
			if err := steps.From(ctx).Assert(r.Status == 263 && s.current != "", "the proposal to remember as %q was not approved 263 with a synthesis_id: %s", o.remembered, r); err != nil {
				return steps.Precondition(preApproved, err)
			}
			s.named[o.remembered] = s.current
		}
		return nil
	})
	c.Setup(prePending, `^"([a-z]+)" has a proposal awaiting review for ([A-Z]+) (\S+)$`, func(ctx context.Context, who, method, path string) error {
		w, s := steps.From(ctx), st(ctx)
		o, err := parseProposalTail("")
		if err != nil {
			return err
		}
		s.proposal = ""
		r, err := send(ctx, who, "PROPOSE", "/", options{params: proposalParams(method, s.expand(path), o)})
		if err != nil {
			return err
		}
		return w.Assert(r.Status == 261 && s.proposal != "", "a proposal of %s %s, a pair the operator reviews, was not answered 261 with a proposal_id: %s", method, s.expand(path), r)
	})
	c.Given(`^the contract is remembered as "([a-z]+)"$`, func(ctx context.Context, name string) error {
		s := st(ctx)
		if s.current == "" {
			return steps.Fault("no contract has been issued yet")
		}
		s.named[name] = s.current
		return nil
	})
	c.When(`^"([a-z]+)" polls the proposal$`, func(ctx context.Context, who string) error {
		_, err := pollProposal(ctx, who)
		return err
	})
	c.When(`^"([a-z]+)" polls the proposal until it is decided$`, func(ctx context.Context, who string) error {
		// 50 polls 100 ms apart (5 s idle), counted in polls so that a slow
		// host gets as many.
		for polls := 1; ; polls++ {
			r, err := pollProposal(ctx, who)
			if err != nil {
				return err
			}
			if r.Status != 261 || polls >= 50 {
				return nil
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return steps.Fault("the run was interrupted while polling the proposal: %v", ctx.Err())
			}
		}
	})
	c.When(`^"([a-z]+)" (approves|rejects) the proposal$`, func(ctx context.Context, who, decision string) error {
		w, s := steps.From(ctx), st(ctx)
		if s.proposal == "" {
			return steps.Fault("no 261 named a proposal_id")
		}
		status := "approved"
		if decision == "rejects" {
			status = "rejected"
		}
		r, err := send(ctx, who, "CONFIRM", "/", options{params: map[string]any{"target_id": s.proposal, "status": status, "reason": "parley: operator review"}, aside: true})
		if err != nil {
			return err
		}
		return w.Assert(is2xx(r), "the operator's review decision (CONFIRM target_id=%s status=%s) was not taken: %s", s.proposal, status, r)
	})
	c.When(`^the AGTP session ends$`, endSession)
	c.When(`^"([a-z]+)" lists its contracts$`, func(ctx context.Context, who string) error {
		return listContracts(ctx, who)
	})
	c.When(`^"([a-z]+)" reads the manifest$`, func(ctx context.Context, who string) error {
		_, err := floor(ctx, who, "DISCOVER", "/", map[string]any{"criteria": "endpoints"})
		return err
	})
	c.When(`^"([a-z]+)" discovers the synthesis patterns$`, func(ctx context.Context, who string) error {
		_, err := floor(ctx, who, "DISCOVER", "/patterns", map[string]any{"criteria": "patterns"})
		return err
	})
	c.When(`^"([a-z]+)" inspects an unknown synthesis_id$`, func(ctx context.Context, who string) error {
		_, err := floor(ctx, who, "INSPECT", "/", map[string]any{"target": "contract", "synthesis_id": "syn_parley-never-issued-" + uuid.NewString()})
		return err
	})
	c.When(`^"([a-z]+)" inspects the RCNS attempt of that answer$`, func(ctx context.Context, who string) error {
		w, s := steps.From(ctx), st(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		id := r.Header.Get("RCNS-Attempt-Id")
		if id == "" {
			return steps.Precondition(preAttempt, w.Assert(false, "the answer carries no RCNS-Attempt-Id to inspect: %s", r))
		}
		s.lastAttempt = id
		doc, _ := r.JSON()
		s.attemptReason, _ = reasonOf(doc)
		_, err = floor(ctx, who, "INSPECT", "/", map[string]any{"target": "rcns-attempt", "attempt_id": id})
		return err
	})

	c.Then(`^the AGTP body satisfies the schema "([^"]*)"$`, func(ctx context.Context, name string) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		_, b := body(r)
		err = schemas.ValidateJSON(name, b)
		return w.Assert(err == nil, "the body (its result, when enveloped) does not satisfy %s: %v\n%s", name, err, r)
	})
	c.Then(`^the response is a 263 for ([A-Z]+) (\S+)$`, func(ctx context.Context, method, path string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		path = s.expand(path)
		if err := w.Assert(r.Status == 263, "expected 263 Proposal Approved: %s", r); err != nil {
			return err
		}
		doc, _ := body(r)
		gm, _ := doc["method"].(string)
		gp, _ := doc["path"].(string)
		return w.Assert(gm == method && gp == path, "the 263 names %q %q at top level, not the proposed pair %s %s: %s", gm, gp, method, path, r)
	})
	c.Then(`^the 263 body carries synthesis_id, endpoint and recipe_lineage "([a-z-]+)" version "([^"]*)"$`, func(ctx context.Context, name, version string) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		doc, _ := body(r)
		var problems []string
		if sid, _ := doc["synthesis_id"].(string); sid == "" {
			problems = append(problems, "no synthesis_id")
		}
		if ep, ok := doc["endpoint"].(map[string]any); !ok || len(ep) == 0 {
			problems = append(problems, "no endpoint object")
		}
		l, _ := doc["recipe_lineage"].(map[string]any)
		if l["recipe_name"] != name || l["recipe_version"] != version {
			problems = append(problems, fmt.Sprintf("recipe_lineage %v, want recipe_name %s and recipe_version %s", doc["recipe_lineage"], name, version))
		}
		return w.Assert(r.Status == 263 && len(problems) == 0, "the 263 body is incomplete (%s): %s", strings.Join(problems, "; "), r)
	})
	c.Then(`^the response carries a synthesis_id other than contract "([a-z]+)"'s$`, func(ctx context.Context, name string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		old, ok := s.named[name]
		if !ok {
			return steps.Fault("no contract remembered as %q", name)
		}
		doc, _ := body(r)
		sid, _ := doc["synthesis_id"].(string)
		return w.Assert(sid != "" && sid != old, "expected a new synthesis_id, got %q (contract %q is %s): %s", sid, name, old, r)
	})
	c.Then(`^the response status is 261 with a proposal_id$`, func(ctx context.Context) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 261, "expected 261 Negotiation In Progress: %s", r); err != nil {
			return err
		}
		doc, _ := body(r)
		id, _ := doc["proposal_id"].(string)
		if err := w.Assert(id != "", "the 261 names no proposal_id to poll: %s", r); err != nil {
			return err
		}
		return w.Assert(id == s.proposal, "the 261 names proposal %q, not the one submitted (%q): %s", id, s.proposal, r)
	})
	c.Then(`^the listing (includes|omits) `+contractRefs+`$`, func(ctx context.Context, how, ref string) error {
		w, sid, r, doc, err := lastAbout(ctx, ref, "DISCOVER /contracts")
		if err != nil {
			return err
		}
		listed := false
		for _, o := range objects(doc) {
			if o["synthesis_id"] == sid {
				listed = true
			}
		}
		return w.Assert(listed == (how == "includes"), "expected DISCOVER /contracts to %s %s (%s): %s", map[bool]string{true: "list", false: "omit"}[how == "includes"], ref, sid, r)
	})
	c.Then(`^the manifest (lists|does not list) ([A-Z]+) (\S+)$`, func(ctx context.Context, how, method, path string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		path = s.expand(path)
		if err := w.Assert(r.Status == 200, "DISCOVER /: %s", r); err != nil {
			return err
		}
		doc, _ := r.JSON()
		listed := false
		for _, o := range objects(doc) {
			if o["method"] == method && o["path"] == path {
				listed = true
			}
		}
		return w.Assert(listed == (how == "lists"), "the manifest (DISCOVER /) %s %s %s: %s", map[bool]string{true: "lists", false: "does not list"}[listed], method, path, r)
	})
	c.Then(`^the patterns include recipe "([a-z-]+)" version "([^"]*)" for ([A-Z]+) (\S+)$`, func(ctx context.Context, name, version, method, path string) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 200, "DISCOVER /patterns: %s", r); err != nil {
			return err
		}
		doc, _ := r.JSON()
		found := false
		for _, o := range objects(doc) {
			if o["method"] == method && o["path"] == path && o["recipe_name"] == name && o["recipe_version"] == version {
				found = true
			}
		}
		return w.Assert(found, "DISCOVER /patterns lists no pattern %s %s of recipe %s version %s: %s", method, path, name, version, r)
	})
	c.Then(`^the response describes `+contractRefs+` for ([A-Z]+) (\S+) under recipe "([a-z-]+)" version "([^"]*)"$`, func(ctx context.Context, ref, method, path, name, version string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		path = s.expand(path)
		if err := w.Assert(r.Status == 200, "INSPECT target=contract: %s", r); err != nil {
			return err
		}
		doc, _ := body(r)
		str := func(k string) string { v, _ := doc[k].(string); return v }
		var problems []string
		if str("synthesis_id") != sid {
			problems = append(problems, fmt.Sprintf("synthesis_id %q, want %s", str("synthesis_id"), sid))
		}
		if str("method") != method || str("path") != path {
			problems = append(problems, fmt.Sprintf("pair %q %q, want %s %s", str("method"), str("path"), method, path))
		}
		l, _ := doc["recipe_lineage"].(map[string]any)
		if l["recipe_name"] != name || l["recipe_version"] != version {
			problems = append(problems, fmt.Sprintf("recipe_lineage %v, want %s version %s", doc["recipe_lineage"], name, version))
		}
		if t, err := time.Parse(time.RFC3339, str("expires_at")); err != nil || !t.After(time.Now().Add(-5*time.Second)) {
			problems = append(problems, fmt.Sprintf("expires_at %q is not a future RFC 3339 time", str("expires_at")))
		}
		return w.Assert(len(problems) == 0, "INSPECT target=contract is incomplete (%s): %s", strings.Join(problems, "; "), r)
	})
	c.Then(`^the response reveals nothing of `+contractRefs+`$`, func(ctx context.Context, ref string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		if _, err := s.contractRef(ref); err != nil {
			return err
		}
		switch r.Status {
		case 464:
			if _, err := expectReason(w, 464, "contract-not-yours"); err != nil {
				return err
			}
		case 403, 404:
		default:
			return w.Assert(false, "expected 464 contract-not-yours, 403 or 404 for another agent's contract: %s", r)
		}
		doc, _ := r.JSON()
		var leaked []string
		for _, o := range objects(doc) {
			for _, k := range []string{"endpoint", "recipe_lineage", "contract_hash", "composed_of"} {
				if _, ok := o[k]; ok {
					leaked = append(leaked, k)
				}
			}
		}
		return w.Assert(len(leaked) == 0, "the refusal reveals the contract's %s: %s", strings.Join(leaked, ", "), r)
	})
	c.Then(`^the attempt record names status (\d+), (?:reason ([a-z-]+)|the reason it was answered) and ([A-Z]+) (\S+)$`, func(ctx context.Context, status int, reason, method, path string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		path = s.expand(path)
		if reason == "" {
			if reason, _, _ = strings.Cut(s.attemptReason, " "); reason == "" {
				return steps.Fault("the answer whose attempt was inspected carried no reason to look for")
			}
		}
		if err := w.Assert(r.Status == 200, "INSPECT target=rcns-attempt: %s", r); err != nil {
			return err
		}
		doc, _ := r.JSON()
		// The text names the surface and no member of the record, so the
		// record's member names are the host's (method or method_attempted,
		// status or status_attempted, ...): the suite looks for the values,
		// each the value of some member at any depth of the answer.
		var problems []string
		if !carries(doc, func(v any) bool { return v == s.lastAttempt }) {
			problems = append(problems, "no member is the attempt id "+s.lastAttempt)
		}
		if !carries(doc, func(v any) bool { return v == method }) {
			problems = append(problems, "no member is the method "+method)
		}
		if !carries(doc, func(v any) bool { return v == path }) {
			problems = append(problems, "no member is the path "+path)
		}
		if !carries(doc, func(v any) bool { return steps.Text(v) == fmt.Sprint(status) }) {
			problems = append(problems, fmt.Sprintf("no member is the status %d", status))
		}
		if !carries(doc, func(v any) bool { t, ok := v.(string); return ok && (t == reason || strings.HasPrefix(t, reason+" ")) }) {
			problems = append(problems, "no member is the reason "+reason)
		}
		return w.Assert(len(problems) == 0, "the attempt record does not describe the refused evaluation (%s): %s", strings.Join(problems, "; "), r)
	})
}

// carries reports whether some member of doc, at any depth (arrays
// included), has a value match accepts.
func carries(doc map[string]any, match func(any) bool) bool {
	for _, o := range objects(doc) {
		for _, v := range o {
			if match(v) {
				return true
			}
			if a, ok := v.([]any); ok {
				for _, x := range a {
					if match(x) {
						return true
					}
				}
			}
		}
	}
	return false
}
