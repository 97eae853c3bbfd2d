package agtp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/parley-conformance/parley/steps"
)

// The AGTP vocabulary of wire assertions, h2spec style: each step ends in
// one of these verifiers, and each counts its assertions and says, on
// failure, what the host sent.

// field reads a dotted path from a response body, looking first inside the
// response envelope's result and then at top level: the drafts show bodies
// both with and without the envelope.
func field(doc map[string]any, path string) any {
	if res, ok := doc["result"].(map[string]any); ok {
		if v, ok := steps.Lookup(res, path); ok {
			return v
		}
	}
	v, _ := steps.Lookup(doc, path)
	return v
}

// notePlacement records where a refusal put its reason word: "error.reason"
// (the public implementation's nesting) or "reason" (top level, as the
// draft words it).
func notePlacement(w *steps.World, where string) {
	if where != "" {
		w.Fact(FactReasonPlacement, where)
	}
}

// reasonOf finds the reason word of a refusal: error.reason, else a
// top-level reason. It returns where it was found.
func reasonOf(doc map[string]any) (reason, where string) {
	if e, ok := doc["error"].(map[string]any); ok {
		if r, ok := e["reason"].(string); ok {
			return r, "error.reason"
		}
	}
	if r, ok := doc["reason"].(string); ok {
		return r, "reason"
	}
	return "", ""
}

// expectReason asserts status and reason; reason "" checks the status only.
// A reason written with its argument ("scope-required scope: rcns:negotiate")
// counts as that reason.
func expectReason(w *steps.World, status int, reason string) (map[string]any, error) {
	r, err := w.LastResponse()
	if err != nil {
		return nil, err
	}
	if err := w.Assert(r.Status == status, "%s", r.Unexpected(status)); err != nil {
		return nil, err
	}
	doc, err := r.JSON()
	if err != nil {
		return nil, w.Assert(false, "%v", err)
	}
	got, where := reasonOf(doc)
	notePlacement(w, where)
	ok := got == reason || strings.HasPrefix(got, reason+" ")
	return doc, w.Assert(ok, "expected reason %s (in error.reason or a top-level reason), got %q at %q: %s", reason, got, where, r)
}

// failedReasons are the reasons a 464 for a pair whose composition fails
// may carry at an open gate: the vocabulary's synthesis-error, or
// composition-impossible, the only reason the text defines for a server
// that cannot compose what was asked (PROPOSE step 6). The text does not
// say which of the two a gate uses, so either passes.
var failedReasons = []string{"synthesis-error", "composition-impossible"}

// failedComposition asserts a 464 with one of failedReasons and records
// which one the host chose (FactFailedComposition).
func failedComposition(w *steps.World) error {
	r, err := w.LastResponse()
	if err != nil {
		return err
	}
	if err := w.Assert(r.Status == 464, "a pair whose composition fails: %s", r.Unexpected(464)); err != nil {
		return err
	}
	doc, err := r.JSON()
	if err != nil {
		return w.Assert(false, "%v", err)
	}
	got, where := reasonOf(doc)
	notePlacement(w, where)
	seen := ""
	for _, want := range failedReasons {
		if got == want || strings.HasPrefix(got, want+" ") {
			seen = want
		}
	}
	if seen != "" {
		w.Fact(FactFailedComposition, seen)
	}
	return w.Assert(seen != "", "expected reason %s (in error.reason or a top-level reason), got %q at %q: %s", strings.Join(failedReasons, " or "), got, where, r)
}

// scopeNamed reports whether a refusal names the scope token: error.scope,
// a top-level scope, or the reason's "scope: <token>" argument.
func scopeNamed(doc map[string]any, token string) bool {
	if e, ok := doc["error"].(map[string]any); ok {
		if e["scope"] == token {
			return true
		}
	}
	if doc["scope"] == token {
		return true
	}
	r, _ := reasonOf(doc)
	return strings.Contains(r, "scope: "+token) || strings.Contains(r, "scope:"+token)
}

// attribution decodes the Attribution-Record header's JWS payload; when it
// cannot, it says why (for a failure message) and returns no payload.
func attribution(r *steps.Response) (map[string]any, string) {
	jws := r.Header.Get("Attribution-Record")
	if jws == "" {
		return nil, "no Attribution-Record header"
	}
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return nil, fmt.Sprintf("Attribution-Record is not a compact JWS (header.payload.signature): %.80s", jws)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Sprintf("Attribution-Record payload is not base64url: %v", err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return nil, fmt.Sprintf("Attribution-Record payload is not a JSON object: %v", err)
	}
	return p, ""
}

func is2xx(r *steps.Response) bool { return r.Status >= 200 && r.Status < 300 }

// servedUnder reports whether r is a success served under contract sid: it
// names the contract in Contract-Synthesized or in its Attribution-Record.
func servedUnder(r *steps.Response, sid string) (bool, string) {
	if !is2xx(r) {
		return false, fmt.Sprintf("status %d is not a success", r.Status)
	}
	if sid == "" {
		return false, "no contract"
	}
	if r.Header.Get("Contract-Synthesized") == sid {
		return true, ""
	}
	if a, _ := attribution(r); a != nil && a["synthesis_id"] == sid {
		return true, ""
	}
	return false, "neither Contract-Synthesized nor the Attribution-Record names " + sid
}

// objects walks a JSON document and returns every object in it.
func objects(v any) []map[string]any {
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			out = append(out, t)
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// sweepEntries are the entries of the last sweep report naming sid.
func sweepEntries(r *steps.Response, sid string) []map[string]any {
	doc, _ := r.JSON()
	var out []map[string]any
	for _, o := range objects(doc) {
		if o["synthesis_id"] == sid {
			out = append(out, o)
		}
	}
	return out
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

var extFields = []string{"synthesis_id", "contract_hash", "negotiation_origin"}

func last(ctx context.Context) (*steps.World, *state, *steps.Response, error) {
	w, s := steps.From(ctx), st(ctx)
	r, err := w.LastResponse()
	return w, s, r, err
}

// lastAbout is the prelude of a step that reads a named contract out of a
// 200 answer (a listing, the lifecycle stream): the World, the
// contract's synthesis_id, the answer and its decoded body.
func lastAbout(ctx context.Context, ref, what string) (*steps.World, string, *steps.Response, map[string]any, error) {
	w, s, r, err := last(ctx)
	if err != nil {
		return nil, "", nil, nil, err
	}
	sid, err := s.contractRef(ref)
	if err != nil {
		return nil, "", nil, nil, err
	}
	if err := w.Assert(r.Status == 200, "%s: %s", what, r); err != nil {
		return nil, "", nil, nil, err
	}
	doc, _ := r.JSON()
	return w, sid, r, doc, nil
}

func registerAssertions(c *steps.Catalog) {
	c.Then(`^the response status is (\d+) with reason ([a-z-]+)$`, func(ctx context.Context, status int, reason string) error {
		_, err := expectReason(steps.From(ctx), status, reason)
		return err
	})
	c.Then(`^the response status is (\d+) with reason ([a-z-]+) naming scope (\S+)$`, func(ctx context.Context, status int, reason, scope string) error {
		w := steps.From(ctx)
		doc, err := expectReason(w, status, reason)
		if err != nil {
			return err
		}
		r, _ := w.LastResponse()
		return w.Assert(scopeNamed(doc, scope), "the refusal does not name scope %s (error.scope, scope, or the reason's argument): %s", scope, r)
	})
	c.Then(`^the answer is the (server policy|opt-in|scope claim|scope grant|trust tier) lock's refusal$`, func(ctx context.Context, lock string) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		lr := lockRefusals[lock]
		return steps.Precondition(lr.pre, w.Assert(refusedAs(w, r, lr.statuses, lr.reason), "expected the closed %s lock's refusal (%s): %s", lock, lr.want(), r))
	})
	c.Then(`^the answer is the contract-not-yours refusal$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		return steps.Precondition(preNotYours, w.Assert(refusedAs(w, r, []int{464}, "contract-not-yours"), "expected 464 contract-not-yours for another agent's contract: %s", r))
	})
	c.Then(`^the response status is not (\d+)$`, func(ctx context.Context, status int) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		return w.Assert(r.Status != status, "expected any status but %d: %s", status, r)
	})
	c.Then(`^the request succeeded$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		return w.Assert(is2xx(r), "expected a 2xx success: %s", r)
	})
	c.Then(`^the response is the standard unregistered-pair refusal$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Status == 404 || r.Status == 405, "expected the standard unregistered-pair refusal (404 or 405): %s", r); err != nil {
			return err
		}
		return unsignaled(w, r)
	})
	c.Then(`^the response is either 464 contract-not-yours or the standard unregistered-pair refusal$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if r.Status == 464 {
			_, err := expectReason(w, 464, "contract-not-yours")
			return err
		}
		if err := w.Assert(r.Status == 404 || r.Status == 405, "expected 464 contract-not-yours or the standard 404/405: %s", r); err != nil {
			return err
		}
		return unsignaled(w, r)
	})
	c.Then(`^the response carries a fresh RCNS-Attempt-Id$`, func(ctx context.Context) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		id := r.Header.Get("RCNS-Attempt-Id")
		if err := w.Assert(id != "", "no RCNS-Attempt-Id header on a %d: %s", r.Status, r); err != nil {
			return err
		}
		fresh := !s.attempts[id]
		s.attempts[id] = true
		return w.Assert(fresh, "RCNS-Attempt-Id %q was already given to an earlier evaluation", id)
	})
	c.Then(`^the response names no synthesis_id$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(r.Header.Get("Contract-Synthesized") == "", "a refusal carried Contract-Synthesized: %s", r); err != nil {
			return err
		}
		doc, _ := r.JSON()
		var named []string
		for _, o := range objects(doc) {
			if sid, ok := o["synthesis_id"]; ok {
				named = append(named, steps.Text(sid))
			}
		}
		return w.Assert(len(named) == 0, "the refusal names synthesis_id %v: %s", named, r)
	})
	c.Then(`^"([a-z]+)" holds no contract for ([A-Z]+) (\S+)$`, func(ctx context.Context, who, method, target string) error {
		return holdsNoneFor(ctx, who, method, st(ctx).expand(target))
	})
	c.Then(`^"([a-z]+)" holds no contract for the proposed pair$`, func(ctx context.Context, who string) error {
		s := st(ctx)
		if s.proposed.method == "" {
			return steps.Fault("no proposal was sent")
		}
		return holdsNoneFor(ctx, who, s.proposed.method, s.proposed.path)
	})
	c.Then(`^the response delivers a contract$`, func(ctx context.Context) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		doc, _ := r.JSON()
		sid, _ := field(doc, "synthesis_id").(string)
		mode, fx := s.mode(ctx)
		ok, want := r.Status == 461 && sid != "", "a 461 naming a synthesis_id"
		if mode == "optimistic" {
			ok, want = is2xx(r) && r.Header.Get("Contract-Synthesized") != "", "a success with Contract-Synthesized"
		}
		return steps.Precondition(issuing(mode), w.Assert(ok, "fixture %s runs RCNS in %s mode, and an opted-in request for a pair a recipe composes, by the same agent, was delivered no contract (not %s), so the gate is not open: %s", fx, mode, want, r))
	})
	c.Then(`^the response is served by its registration$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(is2xx(r), "a registered endpoint asked with Allow-RCNS: true was not served: %s", r); err != nil {
			return err
		}
		var signs []string
		for _, h := range []string{"Contract-Synthesized", "RCNS-Attempt-Id"} {
			if r.Header.Get(h) != "" {
				signs = append(signs, h)
			}
		}
		a, why := attribution(r)
		if err := w.Assert(a != nil, "%s: %s", why, r); err != nil {
			return err
		}
		for _, f := range extFields {
			if _, ok := a[f]; ok {
				signs = append(signs, "Attribution-Record "+f)
			}
		}
		return w.Assert(len(signs) == 0, "a registered endpoint asked with Allow-RCNS: true went through RCNS (%s): %s", strings.Join(signs, ", "), r)
	})
	c.Then(`^the AGTP field "([^"]*)" is the string "([^"]*)"$`, func(ctx context.Context, path, want string) error {
		w, _, r, v, err := lastField(ctx, path)
		if err != nil {
			return err
		}
		got, ok := v.(string)
		return w.Assert(ok && got == want, "expected %s to be the string %q exactly (in result or at top level), got %#v: %s", path, want, v, r)
	})
	// The reason of a failed composition is agtp.rcns.gate.synthesis-error's
	// rule: a scenario witnessing another id (the attempt id, the attempt
	// record) that meets another reason is blocked on it, not failed.
	c.Then(`^the response is 464 for a composition that failed$`, func(ctx context.Context) error {
		return steps.Precondition(preCompositionFailed, failedComposition(steps.From(ctx)))
	})
	c.Then(`^the response refuses the sweep$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		// The text requires inspect:all for the sweep and names no status
		// for its absence: any 4xx refuses it, and so does 262 (the
		// obtainability rule's "granted but not claimed"). Whether the
		// sweep ran anyway is the next steps' business (the contract it
		// would have evicted still serves).
		ok := (r.Status >= 400 && r.Status < 500) || r.Status == 262
		return w.Assert(ok, "expected the sweep refused (a 4xx, or 262 Authorization Required) for want of inspect:all: %s", r)
	})
	c.Then(`^the response refuses it for want of inspect:all$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		doc, _ := r.JSON()
		ok := r.Status == 403 || ((r.Status == 262 || r.Status == 455) && scopeNamed(doc, "inspect:all"))
		return w.Assert(ok, "expected a refusal for want of authority: 403, or 262/455 naming scope inspect:all: %s", r)
	})
	c.Then(`^"([a-z]+)" can still release the contract$`, func(ctx context.Context, who string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef("the contract")
		if err != nil {
			return err
		}
		r, err := send(ctx, who, "SUSPEND", "/", options{params: map[string]any{"synthesis_id": sid, "reason": "parley: the originator's own release"}, aside: true})
		if err != nil {
			return steps.Precondition(preReleased, err)
		}
		return steps.Precondition(preReleased, w.Assert(is2xx(r), "%q, the contract's originator, could not release %s with SUSPEND synthesis_id: %s", who, sid, r))
	})
	c.Then(`^"([a-z]+)" can inspect the contract$`, func(ctx context.Context, who string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef("the contract")
		if err != nil {
			return err
		}
		r, err := send(ctx, who, "INSPECT", "/", options{params: map[string]any{"target": "contract", "synthesis_id": sid}, aside: true})
		if err != nil {
			return steps.Precondition(preInspected, err)
		}
		doc, _ := body(r)
		return steps.Precondition(preInspected, w.Assert(r.Status == 200 && doc["synthesis_id"] == sid, "INSPECT target=contract of %q's own contract %s did not answer it: %s", who, sid, r))
	})
	c.Then(`^once "([a-z]+)" releases the contract, no other contract of its serves ([A-Z]+) (\S+)$`, func(ctx context.Context, who, method, target string) error {
		return noOtherContract(ctx, who, method, st(ctx).expand(target))
	})
	c.Then(`^the response is a 461 contract preview for ([A-Z]+) (\S+)$`, func(ctx context.Context, method, target string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		target = s.expand(target)
		if err := w.Assert(r.Status == 461, "expected 461: %s", r); err != nil {
			return err
		}
		doc, err := r.JSON()
		if err != nil {
			return w.Assert(false, "%v", err)
		}
		str := func(p string) string { v, _ := field(doc, p).(string); return v }
		var problems []string
		if str("synthesis_id") == "" {
			problems = append(problems, "no synthesis_id")
		}
		if str("method") != method {
			problems = append(problems, fmt.Sprintf("method %q, want %s", str("method"), method))
		}
		if str("path") != target {
			problems = append(problems, fmt.Sprintf("path %q, want %s", str("path"), target))
		}
		if _, ok := field(doc, "endpoint").(map[string]any); !ok {
			problems = append(problems, "no endpoint object")
		}
		if str("recipe_lineage.recipe_name") == "" || str("recipe_lineage.recipe_version") == "" {
			problems = append(problems, "no recipe_lineage{recipe_name, recipe_version}")
		}
		if str("contract_hash") == "" {
			problems = append(problems, "no contract_hash")
		}
		if t, err := time.Parse(time.RFC3339, str("expires_at")); err != nil || !t.After(time.Now().Add(-5*time.Second)) {
			problems = append(problems, fmt.Sprintf("expires_at %q is not a future RFC 3339 time", str("expires_at")))
		}
		return w.Assert(len(problems) == 0, "the 461 preview is incomplete (%s): %s", strings.Join(problems, "; "), r)
	})
	c.Then(`^the AGTP field "([^"]*)" is "([^"]*)"$`, func(ctx context.Context, path, want string) error {
		w, _, r, v, err := lastField(ctx, path)
		if err != nil {
			return err
		}
		return w.Assert(v != nil && steps.Text(v) == want, "expected %s = %q (in result or at top level), got %v: %s", path, want, v, r)
	})
	c.Then(`^the AGTP field "([^"]*)" names recipe "([a-z]+)"$`, func(ctx context.Context, path, name string) error {
		w, s, r, v, err := lastField(ctx, path)
		if err != nil {
			return err
		}
		real, err := s.leasedRecipe(name)
		if err != nil {
			return err
		}
		return w.Assert(v != nil && steps.Text(v) == real, "expected %s = %q, the scenario's recipe %q (in result or at top level), got %v: %s", path, real, name, v, r)
	})
	c.Then(`^the response is served under `+contractRefs+`$`, func(ctx context.Context, ref string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		ok, why := servedUnder(r, sid)
		return s.liveOrBlocked(sid, w.Assert(ok, "expected a success served under %s (%s): %s", sid, why, r))
	})
	c.Then(`^the response is not served under `+contractRefs+`$`, func(ctx context.Context, ref string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		ok, _ := servedUnder(r, sid)
		return w.Assert(!ok && !is2xx(r), "the request was still served (under %s): %s", sid, r)
	})
	c.Then(`^each of them is served under `+contractRefs+`$`, func(ctx context.Context, ref string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		if len(s.batch) == 0 {
			return steps.Fault("no repeated request was sent")
		}
		for i, r := range s.batch {
			ok, why := servedUnder(r, sid)
			if err := w.Assert(ok, "invocation %d of %d was not served under %s (%s): %s", i+1, len(s.batch), sid, why, r); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the response refuses the released contract$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		// 404 when the release evicted the contract (it is unknown now),
		// 464 contract-revoked when the host keeps it as released
		// (agtp-rcns.txt, Contract Scoping and Lifecycle).
		doc, _ := r.JSON()
		reason, where := reasonOf(doc)
		notePlacement(w, where)
		ok := r.Status == 404 || (r.Status == 464 && (reason == "contract-revoked" || strings.HasPrefix(reason, "contract-revoked ")))
		return w.Assert(ok, "expected the released contract refused 404 or 464 contract-revoked: %s", r)
	})
	c.Then(`^the response is a success carrying Contract-Synthesized$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(is2xx(r), "expected the action's own 2xx success: %s", r); err != nil {
			return err
		}
		return w.Assert(r.Header.Get("Contract-Synthesized") != "", "the success carries no Contract-Synthesized header: %s", r)
	})
	c.Then(`^the room record (\S+) (exists|does not exist)$`, func(ctx context.Context, id, how string) error {
		w, s := steps.From(ctx), st(ctx)
		if err := readerControl(ctx); err != nil {
			return err
		}
		id = s.expand(id)
		r, err := readRoom(ctx, id)
		if err != nil {
			return err
		}
		if how == "exists" {
			return w.Assert(r.Status == 200, "the Tier A read FETCH /room?id=%s did not find the record the action writes: %s", id, r)
		}
		return w.Assert(r.Status == 404, "the Tier A read FETCH /room?id=%s found a record, so the action ran: %s", id, r)
	})
	c.Then(`^the response body carries scope rcns$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		doc, err := r.JSON()
		if err != nil {
			return w.Assert(false, "%v", err)
		}
		e, _ := doc["error"].(map[string]any)
		return w.Assert(doc["scope"] == "rcns" || (e != nil && e["scope"] == "rcns"), "the 429 body has no scope rcns (top level or in error): %s", r)
	})
	c.Then(`^the Attribution-Record carries the contract's synthesis_id, a contract_hash and negotiation_origin "([a-z-]+)"$`, func(ctx context.Context, origin string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(is2xx(r), "expected an action served under the contract: %s", r); err != nil {
			return err
		}
		a, why := attribution(r)
		if err := w.Assert(a != nil, "%s: %s", why, r); err != nil {
			return err
		}
		var problems []string
		if a["synthesis_id"] != s.current {
			problems = append(problems, fmt.Sprintf("synthesis_id %v, want %s", a["synthesis_id"], s.current))
		}
		if h, _ := a["contract_hash"].(string); h == "" {
			problems = append(problems, "no contract_hash")
		}
		if a["negotiation_origin"] != origin {
			problems = append(problems, fmt.Sprintf("negotiation_origin %v, want %s", a["negotiation_origin"], origin))
		}
		return w.Assert(len(problems) == 0, "Attribution-Record payload: %s: %v", strings.Join(problems, "; "), a)
	})
	c.Then(`^the Attribution-Record carries none of synthesis_id, contract_hash, negotiation_origin$`, func(ctx context.Context) error {
		w, _, r, err := last(ctx)
		if err != nil {
			return err
		}
		if err := w.Assert(is2xx(r), "expected a Tier A/B success: %s", r); err != nil {
			return err
		}
		a, why := attribution(r)
		if err := w.Assert(a != nil, "%s: %s", why, r); err != nil {
			return err
		}
		var present []string
		for _, f := range extFields {
			if _, ok := a[f]; ok {
				present = append(present, f)
			}
		}
		return w.Assert(len(present) == 0, "a Tier A/B Attribution-Record carries %s: %v", strings.Join(present, ", "), a)
	})
	c.Then(`^every contract_hash seen is 64 lowercase hex, the same each time, and equal to the previewed one$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		preview := s.previewHash[s.current]
		if err := w.Assert(hex64.MatchString(preview), "the previewed contract_hash %q is not 64 lowercase hex", preview); err != nil {
			return err
		}
		if len(s.batch) == 0 {
			return steps.Fault("no invocations were sent")
		}
		for i, r := range s.batch {
			a, why := attribution(r)
			if err := w.Assert(a != nil && is2xx(r), "invocation %d: %s: %s", i+1, why, r); err != nil {
				return err
			}
			h, _ := a["contract_hash"].(string)
			if err := w.Assert(hex64.MatchString(h), "invocation %d: contract_hash %q is not 64 lowercase hex", i+1, h); err != nil {
				return err
			}
			if err := w.Assert(h == preview, "invocation %d: contract_hash %s differs from the previewed %s", i+1, h, preview); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the lifecycle stream has an rcns_release event for `+contractRefs+`(?: with reason "([^"]*)")?(?: and actor "([^"]*)")?$`, func(ctx context.Context, ref, reason, actor string) error {
		w, sid, r, doc, err := lastAbout(ctx, ref, "INSPECT target=lifecycle")
		if err != nil {
			return err
		}
		var seen []string
		found := false
		for _, o := range objects(doc) {
			if o["type"] != "rcns_release" && o["event"] != "rcns_release" {
				continue
			}
			ev := map[string]any{}
			for k, v := range o {
				ev[k] = v
			}
			if p, ok := o["payload"].(map[string]any); ok {
				for k, v := range p {
					ev[k] = v
				}
			}
			if ev["synthesis_id"] != sid {
				continue
			}
			b, _ := json.Marshal(ev)
			seen = append(seen, string(b))
			if (reason == "" || ev["reason"] == reason) && (actor == "" || ev["actor"] == actor) {
				found = true
			}
		}
		return w.Assert(found, "no rcns_release event for %s with reason %q and actor %q; rcns_release events for it: %v: %s", sid, reason, actor, seen, r)
	})
	c.Then(`^the sweep reports `+contractRefs+` as (unchanged|grandfathered|evicted)$`, func(ctx context.Context, ref, disp string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		if s.sweep == nil {
			return steps.Fault("no sweep was fired")
		}
		if err := w.Assert(s.sweep.Status == 200, "the sweep was refused: %s", s.sweep); err != nil {
			return err
		}
		var got []string
		for _, e := range sweepEntries(s.sweep, sid) {
			d, _ := e["disposition"].(string)
			got = append(got, d)
		}
		return w.Assert(contains(got, disp), "the sweep does not report %s as %s (dispositions seen: %v): %s", sid, disp, got, s.sweep)
	})
	c.Then(`^the sweep reports `+contractRefs+` with current_version null$`, func(ctx context.Context, ref string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		if s.sweep == nil {
			return steps.Fault("no sweep was fired")
		}
		null := false
		for _, e := range sweepEntries(s.sweep, sid) {
			if v, ok := e["current_version"]; ok && v == nil {
				null = true
			}
		}
		return w.Assert(s.sweep.Status == 200 && null, "the sweep does not report %s with current_version null: %s", sid, s.sweep)
	})
	c.Then(`^the sweep reports `+contractRefs+` as neither grandfathered nor evicted$`, func(ctx context.Context, ref string) error {
		w, s := steps.From(ctx), st(ctx)
		sid, err := s.contractRef(ref)
		if err != nil {
			return err
		}
		if s.sweep == nil {
			return steps.Fault("no sweep was fired")
		}
		if err := w.Assert(s.sweep.Status == 200, "the sweep was refused: %s", s.sweep); err != nil {
			return err
		}
		// The report must be shown to report dispositions at all: the
		// scenario arranges a drifted contract beside the passthrough one.
		if err := w.Assert(len(dispositions(s.sweep)) > 0, "the sweep report lists no contract with a disposition: %s", s.sweep); err != nil {
			return err
		}
		var wrong []string
		for _, e := range sweepEntries(s.sweep, sid) {
			if d := e["disposition"]; d == "grandfathered" || d == "evicted" {
				wrong = append(wrong, steps.Text(d))
			}
		}
		return w.Assert(len(wrong) == 0, "the sweep reports passthrough contract %s as %v: %s", sid, wrong, s.sweep)
	})
	c.Then(`^the response is a replay of "([a-z]+)"'s first response to Idempotency-Key "([a-z0-9-]+)"$`, func(ctx context.Context, who, key string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		first := s.firstByKey[who+"\x00"+key]
		if first == nil || first == r {
			return steps.Fault("no earlier response of %q to key %q", who, key)
		}
		return w.Assert(r.Status == first.Status && steps.JSONEqual(r.Body, first.Body),
			"the replay is not the cached response:\nfirst:  %s\nreplay: %s", first, r)
	})
	c.Then(`^the response is not "([a-z]+)"'s response to Idempotency-Key "([a-z0-9-]+)"$`, func(ctx context.Context, who, key string) error {
		w, s, r, err := last(ctx)
		if err != nil {
			return err
		}
		first := s.firstByKey[who+"\x00"+key]
		if first == nil || first == r {
			return steps.Fault("no earlier response of %q to key %q", who, key)
		}
		same := steps.JSONEqual(r.Body, first.Body)
		if a, b := r.Header.Get("Contract-Synthesized"), first.Header.Get("Contract-Synthesized"); a != "" && a == b {
			same = true
		}
		return w.Assert(!same, "another agent's key was answered from %q's cache:\n%q: %s\nother: %s", who, who, first, r)
	})
}

// lockRefusal is the answer a closed lock gets (agtp-rcns.txt, Four-Lock
// Gate Refusal Mapping) and the precondition a scenario that needs the lock
// closed relies on: that lock's own requirement witnesses the refusal.
type lockRefusal struct {
	pre      string
	statuses []int
	reason   string
}

func (l lockRefusal) want() string {
	st := make([]string, len(l.statuses))
	for i, n := range l.statuses {
		st[i] = fmt.Sprint(n)
	}
	w := strings.Join(st, " or ")
	if l.reason != "" {
		w += " with reason " + l.reason
	}
	return w
}

var lockRefusals = map[string]lockRefusal{
	"server policy": {preLockPolicy, []int{464}, "rcns-disabled"},
	"opt-in":        {preLockOptIn, []int{404, 405}, ""},
	"scope claim":   {preLockClaim, []int{262}, "scope-required"},
	"scope grant":   {preLockGrant, []int{455}, "scope-exceeded"},
	"trust tier":    {preLockTier, []int{464}, "trust-tier-insufficient"},
}

// refusedAs reports whether r has one of the statuses and, when reason is
// not "", that reason (in error.reason or at top level).
func refusedAs(w *steps.World, r *steps.Response, statuses []int, reason string) bool {
	ok := false
	for _, n := range statuses {
		ok = ok || r.Status == n
	}
	if !ok || reason == "" {
		return ok
	}
	doc, _ := r.JSON()
	got, where := reasonOf(doc)
	notePlacement(w, where)
	return got == reason || strings.HasPrefix(got, reason+" ")
}

// dispositions are the dispositions a sweep report gives, one per entry.
func dispositions(r *steps.Response) []string {
	doc, _ := r.JSON()
	var out []string
	for _, o := range objects(doc) {
		if _, ok := o["synthesis_id"]; ok {
			if d, ok := o["disposition"].(string); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// holdsNoneFor checks that no contract of who's serves the pair, through
// the behaviour the text requires of every contract rather than through an
// inventory surface it names but does not describe: the Tier C resolver
// must serve an agent's unregistered request for a pair it holds an active
// contract for, so who's plain request (no opt-in, nothing presented) is
// not served. The resolver is first shown to answer on this host: the
// suite's control agent obtains a contract through the gate and its own
// plain request for that pair must be served under it, so that a refusal
// proves something.
func holdsNoneFor(ctx context.Context, who, method, target string) error {
	w := steps.From(ctx)
	if err := resolverControl(ctx); err != nil {
		return err
	}
	r, err := send(ctx, who, method, target, options{aside: true})
	if err != nil {
		return err
	}
	return w.Assert(!is2xx(r), "a contract of %q's resolves for %s %s: its plain request (no Allow-RCNS, nothing presented) was served: %s", who, method, target, r)
}

// resolverControl shows, once per scenario, that the host's resolver
// serves an agent's own active contract to its plain request.
func resolverControl(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	if s.controlSid != "" {
		return nil
	}
	if s.knobs["enabled"] != true {
		return steps.Fault("\"holds no contract\" needs RCNS enabled, so that the resolver can be shown serving a control contract")
	}
	target := "/room/control-" + s.salt
	sid, err := obtain(ctx, controlName, "BOOK", target, true)
	if err != nil {
		return err
	}
	r, err := send(ctx, controlName, "BOOK", target, options{aside: true})
	if err != nil {
		return steps.Precondition(preResolver, err)
	}
	ok, why := servedUnder(r, sid)
	if err := w.Assert(ok, "the suite's control agent holds contract %s for BOOK %s, and its plain request for the pair was not served under it (%s), so a refused request proves nothing: %s", sid, target, why, r); err != nil {
		return steps.Precondition(preResolver, err)
	}
	s.controlSid = sid
	return nil
}

// noOtherContract shows that who holds no contract for the pair besides
// "the contract": who releases it (SUSPEND synthesis_id), and then its
// plain request for the pair must not be served, since the resolver would
// serve any other active contract of who's for it.
func noOtherContract(ctx context.Context, who, method, target string) error {
	w, s := steps.From(ctx), st(ctx)
	sid, err := s.contractRef("the contract")
	if err != nil {
		return err
	}
	r, err := send(ctx, who, "SUSPEND", "/", options{params: map[string]any{"synthesis_id": sid, "reason": "parley: release before the resolver probe"}, aside: true})
	if err != nil {
		return steps.Precondition(preReleased, err)
	}
	if err := w.Assert(is2xx(r), "%q's release of its own contract %s (SUSPEND synthesis_id) was not taken: %s", who, sid, r); err != nil {
		return steps.Precondition(preReleased, err)
	}
	r, err = send(ctx, who, method, target, options{aside: true})
	if err != nil {
		return err
	}
	if ok, _ := servedUnder(r, sid); ok {
		return steps.Precondition(preInactive, w.Assert(false, "%q's plain request for %s %s is still served under %s, which it released: %s", who, method, target, sid, r))
	}
	return w.Assert(!is2xx(r), "after %q released %s, its plain request for %s %s was still served, so another contract of its resolves for the pair: %s", who, sid, method, target, r)
}

// readerControl shows, once per scenario, that the Tier A write and read
// the room checks use work: the reader writes a control record with CREATE
// /room and must read it back with FETCH /room.
func readerControl(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	if s.readChecked {
		return nil
	}
	key := "control-" + s.salt
	r, err := send(ctx, readerName, "CREATE", "/room?id="+key, options{params: map[string]any{}, aside: true})
	if err != nil {
		return steps.Precondition(preRoomRead, err)
	}
	if err := w.Assert(is2xx(r), "the Tier A write CREATE /room?id=%s did not succeed: %s", key, r); err != nil {
		return steps.Precondition(preRoomRead, err)
	}
	r, err = readRoom(ctx, key)
	if err != nil {
		return err
	}
	if err := w.Assert(r.Status == 200, "the Tier A read FETCH /room?id=%s does not find the record CREATE /room just wrote: %s", key, r); err != nil {
		return steps.Precondition(preRoomRead, err)
	}
	s.readChecked = true
	return nil
}

// readRoom reads a room record on the side; an answer other than 200 or 404
// is a failed precondition.
func readRoom(ctx context.Context, id string) (*steps.Response, error) {
	w := steps.From(ctx)
	r, err := send(ctx, readerName, "FETCH", "/room?id="+id, options{params: map[string]any{}, aside: true})
	if err != nil {
		return nil, steps.Precondition(preRoomRead, err)
	}
	if err := w.Assert(r.Status == 200 || r.Status == 404, "the Tier A read FETCH /room?id=%s answered neither 200 nor 404: %s", id, r); err != nil {
		return nil, steps.Precondition(preRoomRead, err)
	}
	return r, nil
}

// unsignaled asserts that nothing in a refusal reveals RCNS.
func unsignaled(w *steps.World, r *steps.Response) error {
	var leaks []string
	for _, h := range []string{"Contract-Synthesized", "RCNS-Attempt-Id"} {
		if r.Header.Get(h) != "" {
			leaks = append(leaks, h)
		}
	}
	if doc, err := r.JSON(); err == nil {
		if reason, _ := reasonOf(doc); strings.HasPrefix(reason, "rcns") || rcnsReasons[reason] {
			leaks = append(leaks, "reason "+reason)
		}
	}
	sort.Strings(leaks)
	return w.Assert(len(leaks) == 0, "an unsignaled refusal reveals RCNS (%s): %s", strings.Join(leaks, ", "), r)
}

var rcnsReasons = map[string]bool{"rcns-disabled": true, "trust-tier-insufficient": true, "composition-impossible": true,
	"synthesis-error": true, "contract-not-yours": true, "contract-revoked": true}

// lastField reads one field (in result or at top level) of the last AGTP
// answer; an answer whose body is not JSON is the host's failure.
func lastField(ctx context.Context, path string) (*steps.World, *state, *steps.Response, any, error) {
	w, s, r, err := last(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	doc, err := r.JSON()
	if err != nil {
		return nil, nil, nil, nil, w.Assert(false, "%v", err)
	}
	return w, s, r, field(doc, path), nil
}
