package agtp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// SeamPrefix is where a host mounts its AGTP seams on its HTTP listener.
const SeamPrefix = "/conformance/seams/agtp/"

// The preconditions AGTP setups establish (scenarios/agtp.toml
// [[precondition]]); a host failure while establishing one blocks a
// scenario that does not itself witness the requirements it relies on.
const (
	// preContract is the fallback of the "holds an active contract" setup;
	// the steps below name the precise stage that failed.
	preContract = "agtp.precondition.active-contract"
	// prePreviewed: an opted-in request in confirm-first mode is answered
	// 461 naming a synthesis_id.
	prePreviewed = "agtp.precondition.contract-previewed"
	// preAccepted: re-issuing the request presenting the previewed
	// synthesis_id is served under it.
	preAccepted = "agtp.precondition.contract-accepted"
	// preOptimistic: an opted-in request in optimistic mode is served
	// under a contract named in Contract-Synthesized.
	preOptimistic = "agtp.precondition.contract-optimistic"
	// preResolver: an agent's plain request for a pair it holds an active
	// contract for is served under it (the Tier C resolver).
	preResolver = "agtp.precondition.resolver-serves"
	// preReleased: the originator's SUSPEND synthesis_id is taken.
	preReleased = "agtp.precondition.contract-released"
	// preInactive: a released contract no longer resolves.
	preInactive = "agtp.precondition.released-not-resolved"
	// preRoomRead: the Tier A endpoints CREATE /room and FETCH /room write
	// and read a room record.
	preRoomRead = "agtp.precondition.room-read"
	// preCeiling: gate evaluations past rate_limit_per_minute are 429.
	preCeiling = "agtp.precondition.gate-ceiling"
	// preApproved: a wrapped PROPOSE the policy allows is approved 263.
	preApproved = "agtp.precondition.proposal-approved"
	// preAttempt: a 464 carries an RCNS-Attempt-Id.
	preAttempt = "agtp.precondition.attempt-id"
	// prePending: a PROPOSE for a pair under operator review is answered
	// 261 with a proposal_id.
	prePending = "agtp.precondition.proposal-pending"
	// preLock*: a request with one lock closed gets that lock's refusal.
	preLockPolicy = "agtp.precondition.lock-policy-closed"
	preLockOptIn  = "agtp.precondition.lock-opt-in-closed"
	preLockClaim  = "agtp.precondition.lock-scope-claim-closed"
	preLockGrant  = "agtp.precondition.lock-scope-grant-closed"
	preLockTier   = "agtp.precondition.lock-trust-tier-closed"
	// preNotYours: another agent presenting a contract is refused 464
	// contract-not-yours.
	preNotYours = "agtp.precondition.refused-not-yours"
	// preInspected: INSPECT target=contract answers the originator its own
	// contract.
	preInspected = "agtp.precondition.contract-inspected"
	// preCompositionFailed: a pair a recipe covers whose composition fails
	// is refused 464 with a failed-composition reason.
	preCompositionFailed = "agtp.precondition.composition-failed"
)

// options are what a "sends" step adds to the request.
type options struct {
	allow   *string // Allow-RCNS value; nil: no header
	present string  // Contract-Synthesized
	claim   *string // Authority-Scope
	idemKey string
	times   int
	params  map[string]any
	// aside keeps the exchange out of what checks assert on and out of
	// the scenario's memory of contracts (a read or a control the suite
	// makes on the side).
	aside bool
}

// send performs one exchange as agent, records it as the scenario's last
// response and remembers any contract it names.
func send(ctx context.Context, agentName, method, target string, o options) (*steps.Response, error) {
	w, s := steps.From(ctx), st(ctx)
	a, err := s.agent(ctx, agentName)
	if err != nil {
		return nil, err
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	params := o.params
	if params == nil {
		params = defaultParams(target, s.salt)
	}
	taskID := "task-" + uuid.NewString()
	if o.idemKey != "" {
		// A replay is the same request: same envelope, same task.
		taskID = "task-" + o.idemKey + "-" + s.salt
	}
	body := requestBody(s.form, method, taskID, params)
	w.Fact(FactRequestForm, s.form)
	s.lastSent = time.Now()
	if h := SendHook; h != nil {
		h(Sent{Kind: "request", Method: method, Target: target, AgentID: a.id, Claim: o.claim, Params: params, OnPurpose: s.purposes()})
	}
	req, err := wire.NewRequest(method, target, body)
	if err != nil {
		return nil, steps.Fault("cannot build the AGTP request %s %s: %v", method, target, err)
	}
	req.Header.Set("Agent-ID", a.id)
	req.Header.Set("Content-Type", wire.MediaType)
	req.Header.Set("Task-ID", taskID)
	req.Header.Set("Request-ID", "req-"+uuid.NewString())
	if o.allow != nil {
		req.Header.Set("Allow-RCNS", *o.allow)
	}
	if o.present != "" {
		req.Header.Set("Contract-Synthesized", o.present)
	}
	if o.claim != nil {
		req.Header.Set("Authority-Scope", *o.claim)
	}
	if o.idemKey != "" {
		req.Header.Set("Idempotency-Key", o.idemKey+"-"+s.salt)
	}
	ctx, cancel := steps.ExchangeContext(ctx)
	defer cancel()
	sent := &steps.Response{Method: method, URL: target, ReqHeader: http.Header(req.Header).Clone(), ReqBody: body}
	resp, err := c.Do(ctx, req)
	if err != nil {
		// The host did not answer with a frame in time: an observation.
		w.Observe(sent)
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			err = fmt.Errorf("%v (%w)", err, cause)
		}
		return nil, steps.Fail("%s %s as %q: no valid AGTP answer: %v", method, target, agentName, err)
	}
	steps.NoteAnswer()
	r := sent
	r.Status, r.Header, r.Body = resp.Status, http.Header(resp.Header), resp.Body
	w.Observe(r)
	if f := responseForm(r); f != "" {
		w.Fact(FactResponseForm, f)
	}
	if o.allow != nil && *o.allow == "true" && o.present == "" {
		s.gateEvals[agentName]++
	}
	for _, sid := range issuedBy(r) {
		s.noteIssue(w, a, sid)
	}
	if o.aside {
		return r, nil
	}
	w.SetLast(r)
	s.observeAs(agentName, r)
	if o.idemKey != "" {
		k := agentName + "\x00" + o.idemKey
		if _, ok := s.firstByKey[k]; !ok {
			s.firstByKey[k] = r
		}
	}
	return r, nil
}

// Sent is a value the AGTP steps send to a host or write through its
// recipe seam, as the fixture-grammar test sees it.
type Sent struct {
	// Kind is "request" (an AGTP request) or "recipe" (a recipe the seam
	// writes).
	Kind    string
	Method  string
	Target  string // the request target, or the recipe's path pattern
	AgentID string
	Claim   *string // the Authority-Scope claim, if any
	// Params are the request's parameters (the recipe's body).
	Params map[string]any
	// OnPurpose is what the scenario says it sends malformed on purpose
	// ("method", "path").
	OnPurpose map[string]bool
}

// SendHook, when set, sees every request the AGTP steps send and every
// recipe they write through the seam. Only the fixture-grammar test
// (steps/agtp/grammar_test.go) sets it, before a run.
var SendHook func(Sent)

func (s *state) purposes() map[string]bool {
	out := make(map[string]bool, len(s.onPurpose))
	for k, v := range s.onPurpose {
		out[k] = v
	}
	return out
}

// Facts the AGTP steps record about the host (World.Fact; the bundle's
// facts): the request body form the suite sent (the one the host declared),
// the forms of the answers it read, and where refusals put their reason.
const (
	FactRequestForm     = "agtp.request-body-form"
	FactResponseForm    = "agtp.response-body-form"
	FactReasonPlacement = "agtp.reason-placement"
	// FactFailedComposition is the reason a 464 for a recipe whose
	// composition fails carried: synthesis-error or composition-impossible.
	FactFailedComposition = "agtp.failed-composition-reason"
)

// requestBody is a request's body in the host's declared form: the drafts'
// envelope {"method", "task_id", "parameters": {...}}, or flat (the
// parameters themselves at top level). The task id also rides in the
// Task-ID header either way.
func requestBody(form, method, taskID string, params map[string]any) []byte {
	var b []byte
	if form == target.BodyFormFlat {
		b, _ = json.Marshal(params)
	} else {
		b, _ = json.Marshal(map[string]any{"method": method, "task_id": taskID, "parameters": params})
	}
	return b
}

// responseForm is the body form of an answer the steps read fields from (a
// success or a 461 preview): "envelope" when it carries a result object,
// "flat" otherwise; "" for a refusal or a body that is not a JSON object.
func responseForm(r *steps.Response) string {
	if !is2xx(r) && r.Status != 461 {
		return ""
	}
	doc, err := r.JSON()
	if err != nil || doc == nil {
		return ""
	}
	if _, ok := doc["result"].(map[string]any); ok {
		return target.BodyFormEnvelope
	}
	return target.BodyFormFlat
}

// defaultParams gives a room or slot action its key (the last path segment)
// and a marker unique to the scenario; Tier A/B reads take the query.
func defaultParams(target string, salt string) map[string]any {
	p := map[string]any{"note": "parley-" + salt}
	path, _, _ := strings.Cut(target, "?")
	if segs := strings.Split(strings.Trim(path, "/"), "/"); len(segs) == 2 {
		p["id"] = segs[1]
	}
	return p
}

// observeAs remembers what a response to agentName names: a 461 preview's
// synthesis_id (and its contract_hash), the Contract-Synthesized of a
// success, the RCNS-Attempt-Id of an evaluation, a 261's proposal_id and a
// 263's synthesis_id (session-bound unless the 263 says persistent).
func (s *state) observeAs(agentName string, r *steps.Response) {
	s.lastResp = r
	doc, _ := r.JSON()
	if r.Status == 461 {
		sid, _ := field(doc, "synthesis_id").(string)
		s.preview = preview{agent: agentName, method: r.Method, target: r.URL, sid: sid}
	}
	if (r.Status == 461 || (r.Method == "PROPOSE" && r.Status == 263)) && doc != nil {
		sid, _ := field(doc, "synthesis_id").(string)
		if at, _ := field(doc, "expires_at").(string); sid != "" && at != "" {
			s.expiresAt[sid] = at
		}
	}
	if r.Status == 461 && doc != nil {
		if sid, _ := field(doc, "synthesis_id").(string); sid != "" {
			s.noteIssued(sid)
			s.current = sid
			if h, _ := field(doc, "contract_hash").(string); h != "" {
				s.previewHash[sid] = h
			}
		}
	}
	if r.Status >= 200 && r.Status < 300 {
		if sid := r.Header.Get("Contract-Synthesized"); sid != "" {
			s.noteIssued(sid)
			s.current = sid
		}
	}
	if r.Method != "PROPOSE" && r.Method != "QUERY" {
		return
	}
	if r.Status == 261 && doc != nil {
		if id, _ := field(doc, "proposal_id").(string); id != "" {
			s.proposal = id
		}
	}
	if r.Status == 263 && doc != nil {
		if sid, _ := field(doc, "synthesis_id").(string); sid != "" {
			s.current = sid
			if p, _ := field(doc, "persistent").(bool); !p {
				s.sessionBound = append(s.sessionBound, sessionBound{agent: agentName, sid: sid})
			}
		}
	}
}

// issuedBy lists the contracts an answer issues: a 461 preview's
// synthesis_id, a success's Contract-Synthesized, an approved proposal's
// synthesis_id.
func issuedBy(r *steps.Response) []string {
	var out []string
	if r.Status == 461 || (r.Method == "PROPOSE" && r.Status == 263) {
		doc, _ := r.JSON()
		if sid, _ := field(doc, "synthesis_id").(string); sid != "" {
			out = append(out, sid)
		}
	}
	if is2xx(r) {
		if sid := r.Header.Get("Contract-Synthesized"); sid != "" {
			out = append(out, sid)
		}
	}
	return out
}

// noteIssued records when the suite first saw a contract issued, and when
// it sent the request that issued it: the host cannot have issued it
// earlier, so its TTL cannot have run out before that plus the TTL.
func (s *state) noteIssued(sid string) {
	if _, ok := s.issued[sid]; !ok {
		s.issued[sid] = time.Now()
		s.issuedFloor[sid] = s.lastSent
	}
}

// ttlMayHavePassed says whether the contract sid, on a fixture that sets
// contract_ttl_seconds, may already have outlived its TTL on the host
// when the host judged the answer just read: more than the TTL has passed
// on the suite's clock since it sent the request that issued the contract.
// A real-time TTL witness (agtp-short-ttl, 2 s) cannot then tell a host
// that refused a live contract from one whose contract had just expired,
// as happens when a busy machine slows the scenario; the row is blocked
// instead of failed. It is never true before the TTL has passed.
func (s *state) ttlMayHavePassed(sid string) (time.Duration, bool) {
	ttl, ok := s.knobInt("contract_ttl_seconds")
	floor, seen := s.issuedFloor[sid]
	if !ok || !seen || floor.IsZero() {
		return 0, false
	}
	since := time.Since(floor)
	return since, since >= time.Duration(ttl)*time.Second
}

// liveOrBlocked turns a failed check that a contract is live into a block
// when the contract's TTL may already have passed (ttlMayHavePassed), and
// leaves it a failure otherwise.
func (s *state) liveOrBlocked(sid string, failed error) error {
	if failed == nil {
		return nil
	}
	since, late := s.ttlMayHavePassed(sid)
	if !late {
		return failed
	}
	ttl, _ := s.knobInt("contract_ttl_seconds")
	return steps.Block(verdict.CauseTarget, "contract %s was presented %s after the request that issued it, past its contract_ttl_seconds = %d, so its refusal may be its expiry and not a fault (a busy machine slowed the scenario); the real-time TTL witness cannot judge it. A host with the clock seam is witnessed on fixture agtp-ttl-clock without this race. The check that did not hold: %v",
		sid, since.Round(time.Millisecond), ttl, failed)
}

// contractRef resolves "the contract" or `contract "name"`.
func (s *state) contractRef(ref string) (string, error) {
	if ref == "the contract" {
		if s.current == "" {
			return "", s.noContract()
		}
		return s.current, nil
	}
	name := strings.TrimSuffix(strings.TrimPrefix(ref, `contract "`), `"`)
	sid, ok := s.named[name]
	if !ok {
		return "", steps.Fault("no contract remembered as %q", name)
	}
	return sid, nil
}

// noContract says why "the contract" names nothing: the answer that should
// have issued it named no synthesis_id (the host's, as the precondition of
// the answer it was), or the scenario never asked for one (parley's).
func (s *state) noContract() error {
	r := s.lastResp
	switch {
	case r == nil:
		return steps.Fault("a step uses \"the contract\" before any exchange that could issue one")
	case r.Status == 461:
		return steps.Precondition(prePreviewed, &steps.Failure{Msg: "the 461 preview names no synthesis_id to present: " + r.String(), Exchange: r})
	case r.Status == 263:
		return steps.Precondition(preApproved, &steps.Failure{Msg: "the 263 names no synthesis_id to present: " + r.String(), Exchange: r})
	case r.Status >= 200 && r.Status < 300 && s.knobs["mode"] == "optimistic":
		return steps.Precondition(preOptimistic, &steps.Failure{Msg: "the fixture runs RCNS in optimistic mode, and the success carries no Contract-Synthesized naming the contract: " + r.String(), Exchange: r})
	case r.Status >= 200 && r.Status < 300:
		// A confirm-first fixture: the contract comes from a 461 preview,
		// so a plain success is that precondition failing, not the
		// optimistic one.
		return steps.Precondition(prePreviewed, &steps.Failure{Msg: "the fixture runs RCNS in confirm-first mode, and the opted-in request was answered a success, not a 461 preview naming a contract: " + r.String(), Exchange: r})
	}
	return steps.Fault("a step uses \"the contract\", but the last answer (%d) issues none", r.Status)
}

var (
	tailAllow    = regexp.MustCompile(`^ with Allow-RCNS: (\S+)`)
	tailNoAllow  = regexp.MustCompile(`^ without Allow-RCNS`)
	tailPresent  = regexp.MustCompile(`^ presenting (the contract|contract "[a-z]+"|an unknown synthesis_id)`)
	tailClaim    = regexp.MustCompile(`^ claiming "([^"]*)"`)
	tailIdem     = regexp.MustCompile(`^ with Idempotency-Key "([a-z0-9-]+)"`)
	tailTimes    = regexp.MustCompile(`^ (\d+) times`)
	contractRefs = `(the contract|contract "[a-z]+")`
)

// parseTail reads the request options written after the target.
func parseTail(s *state, tail string) (options, error) {
	var o options
	for tail != "" {
		switch {
		case tailAllow.MatchString(tail):
			m := tailAllow.FindStringSubmatch(tail)
			v := m[1]
			o.allow = &v
			tail = tail[len(m[0]):]
		case tailNoAllow.MatchString(tail):
			tail = tail[len(tailNoAllow.FindString(tail)):]
		case tailPresent.MatchString(tail):
			m := tailPresent.FindStringSubmatch(tail)
			if m[1] == "an unknown synthesis_id" {
				o.present = "syn_parley-never-issued-" + uuid.NewString()
			} else {
				sid, err := s.contractRef(m[1])
				if err != nil {
					return o, err
				}
				o.present = sid
			}
			tail = tail[len(m[0]):]
		case tailClaim.MatchString(tail):
			m := tailClaim.FindStringSubmatch(tail)
			v := m[1]
			o.claim = &v
			tail = tail[len(m[0]):]
		case tailIdem.MatchString(tail):
			m := tailIdem.FindStringSubmatch(tail)
			o.idemKey = m[1]
			tail = tail[len(m[0]):]
		case tailTimes.MatchString(tail):
			m := tailTimes.FindStringSubmatch(tail)
			o.times, _ = strconv.Atoi(m[1])
			tail = tail[len(m[0]):]
		default:
			return o, steps.Fault("cannot read %q", tail)
		}
	}
	return o, nil
}

func ptr(s string) *string { return &s }

// obtain has agent obtain an active contract for the pair through the gate
// in the fixture's delivery mode: confirm-first, a 461 preview it accepts by
// re-issuing the request with Contract-Synthesized; optimistic, a success
// naming the contract in Contract-Synthesized. A failure names the stage
// that failed as a precondition, of the fixture's mode, and says the mode.
// aside keeps the exchanges out of the scenario's memory (the control
// agent's contract).
func obtain(ctx context.Context, agentName, method, target string, aside bool) (string, error) {
	w, s := steps.From(ctx), st(ctx)
	mode, fx := s.mode(ctx)
	r, err := send(ctx, agentName, method, target, options{allow: ptr("true"), aside: aside})
	if err != nil {
		return "", steps.Precondition(issuing(mode), err)
	}
	if mode == "optimistic" {
		sid := r.Header.Get("Contract-Synthesized")
		ok, why := servedUnder(r, sid)
		if err := w.Assert(sid != "" && ok, "fixture %s runs RCNS in optimistic mode, and %q's opted-in %s %s was not a success under a contract named in Contract-Synthesized (%s): %s", fx, agentName, method, target, why, r); err != nil {
			return "", steps.Precondition(preOptimistic, err)
		}
		return sid, nil
	}
	if r.Status != 461 {
		return "", steps.Precondition(prePreviewed, w.Assert(false,
			"fixture %s runs RCNS in %s mode, and %q's opted-in %s %s was not answered a 461 preview: %s", fx, mode, agentName, method, target, r))
	}
	doc, _ := r.JSON()
	sid, _ := field(doc, "synthesis_id").(string)
	if err := w.Assert(sid != "", "fixture %s runs RCNS in %s mode, and %q was previewed a contract for %s %s but the 461 names no synthesis_id: %s", fx, mode, agentName, method, target, r); err != nil {
		return "", steps.Precondition(prePreviewed, err)
	}
	r2, err := send(ctx, agentName, method, target, options{present: sid, aside: aside})
	if err != nil {
		return "", steps.Precondition(preAccepted, err)
	}
	ok, why := servedUnder(r2, sid)
	if err := s.liveOrBlocked(sid, w.Assert(ok, "%q re-issued %s %s presenting its previewed contract %s and was not served under it (%s): %s", agentName, method, target, sid, why, r2)); err != nil {
		return "", steps.Precondition(preAccepted, err) // a block passes through
	}
	return sid, nil
}

// mode is the fixture's delivery mode (confirm-first when it leaves mode
// unset, the knob's default) and the fixture's name.
func (s *state) mode(ctx context.Context) (string, string) {
	fx, err := s.fixture(ctx)
	if err != nil {
		return "confirm-first", "?"
	}
	if m, _ := s.knobs["mode"].(string); m != "" {
		return m, fx.name
	}
	return "confirm-first", fx.name
}

// issuing is the precondition an opted-in request that issues no contract
// fails: that of the delivery mode the fixture runs (mode, from s.mode, so
// the fixture is read before its knobs are).
func issuing(mode string) string {
	if mode == "optimistic" {
		return preOptimistic
	}
	return prePreviewed
}

// holdContract has agent obtain an active contract for the pair and makes
// it "the contract" (and, named, a remembered one).
func holdContract(ctx context.Context, agentName, method, target, name string) error {
	s := st(ctx)
	sid, err := obtain(ctx, agentName, method, s.expand(target), false)
	if err != nil {
		return err
	}
	s.current = sid
	if name != "" {
		s.named[name] = sid
	}
	return nil
}

// floor sends a floor method with its parameters in the envelope.
func floor(ctx context.Context, agentName, method, target string, params map[string]any) (*steps.Response, error) {
	return send(ctx, agentName, method, target, options{params: params})
}

func registerActions(c *steps.Catalog) {
	c.When(`^"([a-z]+)" sends ([A-Z]+) (/\S*)(.*)$`, func(ctx context.Context, who, method, target, tail string) error {
		s := st(ctx)
		o, err := parseTail(s, tail)
		if err != nil {
			return err
		}
		n := max(o.times, 1)
		s.batch = nil
		for i := 0; i < n; i++ {
			r, err := send(ctx, who, method, s.expand(target), o)
			if err != nil {
				return err
			}
			s.batch = append(s.batch, r)
		}
		return nil
	})
	c.Setup(preContract, `^"([a-z]+)" holds an active contract for ([A-Z]+) (/\S+?)(?: remembered as "([a-z]+)")?$`, func(ctx context.Context, who, method, target, name string) error {
		return holdContract(ctx, who, method, target, name)
	})
	c.Setup(preAccepted, `^"([a-z]+)" accepts the preview$`, func(ctx context.Context, who string) error {
		w, s := steps.From(ctx), st(ctx)
		p := s.preview
		if p.method == "" {
			return steps.Fault("no 461 preview was issued to accept")
		}
		if p.sid == "" {
			return steps.Precondition(prePreviewed, w.Assert(false, "the 461 preview for %s %s named no synthesis_id to accept", p.method, p.target))
		}
		r, err := send(ctx, who, p.method, p.target, options{present: p.sid})
		if err != nil {
			return err
		}
		ok, why := servedUnder(r, p.sid)
		return w.Assert(ok, "%q re-issued %s %s presenting the previewed contract %s and was not served under it (%s): %s", who, p.method, p.target, p.sid, why, r)
	})
	c.Setup(preCeiling, `^"([a-z]+)" has reached its RCNS gate ceiling$`, func(ctx context.Context, who string) error {
		w, s := steps.From(ctx), st(ctx)
		limit, ok := s.knobInt("rate_limit_per_minute")
		if !ok {
			return steps.Fault("the scenario sets no rate_limit_per_minute")
		}
		for s.gateEvals[who] < limit {
			n := s.gateEvals[who] + 1
			r, err := send(ctx, who, "BOOK", s.expand("/room/{fresh}"), options{allow: ptr("true"), aside: true})
			if err != nil {
				return err
			}
			if err := w.Assert(r.Status != 429, "gate evaluation %d of %q was rate limited under a ceiling of %d a minute: %s", n, who, limit, r); err != nil {
				return err
			}
		}
		r, err := send(ctx, who, "BOOK", s.expand("/room/{fresh}"), options{allow: ptr("true"), aside: true})
		if err != nil {
			return err
		}
		return w.Assert(r.Status == 429, "gate evaluation %d of %q, past its ceiling of %d a minute, was not refused 429: %s", s.gateEvals[who], who, limit, r)
	})
	c.When(`^"([a-z]+)" sends (\d+) gate requests? for fresh rooms$`, func(ctx context.Context, who string, n int) error {
		w, s := steps.From(ctx), st(ctx)
		s.batch = nil
		for i := 0; i < n; i++ {
			r, err := send(ctx, who, "BOOK", s.expand("/room/{fresh}"), options{allow: ptr("true")})
			if err != nil {
				return err
			}
			s.batch = append(s.batch, r)
			if err := w.Assert(r.Status != 429, "gate evaluation %d of %d was already rate limited: %s", i+1, n, r); err != nil {
				return err
			}
		}
		return nil
	})
	c.When(`^"([a-z]+)" sends SUSPEND synthesis_id=`+contractRefs+`$`, func(ctx context.Context, who, ref string) error {
		sid, err := st(ctx).contractRef(ref)
		if err != nil {
			return err
		}
		_, err = floor(ctx, who, "SUSPEND", "/", map[string]any{"synthesis_id": sid, "reason": "parley: caller release"})
		return err
	})
	c.When(`^"([a-z]+)" sends REVOKE target=contract synthesis_id=`+contractRefs+`$`, func(ctx context.Context, who, ref string) error {
		sid, err := st(ctx).contractRef(ref)
		if err != nil {
			return err
		}
		_, err = floor(ctx, who, "REVOKE", "/", map[string]any{"target": "contract", "synthesis_id": sid, "reason": "parley: operator revocation"})
		return err
	})
	c.When(`^"([a-z]+)" sends REVOKE target=stale-contracts(?: mode=([a-z]+))?(?: actor=([a-z-]+))?(?: claiming "([^"]*)")?\s*$`, func(ctx context.Context, who, mode, actor, claim string) error {
		p := map[string]any{"target": "stale-contracts"}
		if mode != "" {
			p["mode"] = mode
		}
		if actor != "" {
			p["actor"] = actor
		}
		o := options{params: p}
		if claim != "" {
			o.claim = &claim
		}
		r, err := send(ctx, who, "REVOKE", "/", o)
		if err == nil {
			st(ctx).sweep = r
		}
		return err
	})
	c.When(`^"([a-z]+)" inspects `+contractRefs+`$`, func(ctx context.Context, who, ref string) error {
		sid, err := st(ctx).contractRef(ref)
		if err != nil {
			return err
		}
		_, err = floor(ctx, who, "INSPECT", "/", map[string]any{"target": "contract", "synthesis_id": sid})
		return err
	})
	c.When(`^"([a-z]+)" reads its lifecycle stream$`, func(ctx context.Context, who string) error {
		a, err := st(ctx).agent(ctx, who)
		if err != nil {
			return err
		}
		_, err = floor(ctx, who, "INSPECT", "/", map[string]any{"target": "lifecycle", "agent_id": a.id})
		return err
	})
	c.When(`^the contract's TTL has passed$`, func(ctx context.Context) error {
		return ttlPassed(ctx)
	}).Waits(2500 * time.Millisecond)
	c.When(`^the operator edits recipe "([a-z-]+)" to version "([^"]*)", which composes ([a-z0-9-]+(?:, [a-z0-9-]+)*) and answers (\d+)$`, func(ctx context.Context, name, version, composed string, status int) error {
		s := st(ctx)
		real, err := s.leasedRecipe(name)
		if err != nil {
			return err
		}
		recipe, err := s.recipe(ctx, real)
		if err != nil {
			return err
		}
		edit := map[string]any{"version": version, "method": recipe["method"], "path": recipe["path"],
			"composed_of": strings.Split(composed, ", "), "success_status": status}
		if h := SendHook; h != nil {
			h(Sent{Kind: "recipe", Method: recipe["method"].(string), Target: recipe["path"].(string), Params: edit, OnPurpose: s.purposes()})
		}
		body, _ := json.Marshal(edit)
		return seam(ctx, http.MethodPut, "recipes/"+real, body)
	})
	c.When(`^the operator removes recipe "([a-z-]+)"$`, func(ctx context.Context, name string) error {
		real, err := st(ctx).leasedRecipe(name)
		if err != nil {
			return err
		}
		return seam(ctx, http.MethodDelete, "recipes/"+real, nil)
	})
}

// seam calls the host's recipe seam; a host without it cannot witness the
// requirement (blocked), never fails it.
func seam(ctx context.Context, method, path string, body []byte) error {
	w := steps.From(ctx)
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	r, err := w.Seam(ctx, method, SeamPrefix+path, body, h)
	if err != nil {
		return err
	}
	return w.Assert(r.Status == http.StatusOK, "the host's recipe seam did not take %s %s%s: %d %s", method, SeamPrefix, path, r.Status, bytes.TrimSpace(r.Body))
}

// realTimeTTL is the longest contract_ttl_seconds the suite waits out in
// real time (fixture agtp-short-ttl); a longer TTL is passed only by moving
// the host's clock.
const realTimeTTL = 10

// ttlPassed lets the current contract's TTL pass on the host. On a fixture
// with seams (agtp-ttl-clock, contracts live an hour) it moves the host's
// clock past contract_ttl_seconds plus 500 ms with POST clock/advance
// {"seconds": ttl + 0.5}, leaving the host's expiry pass to run (no
// "expiry_pass": false), so the 200 means the pass has expired every
// contract whose lifetime ended: the background path decides. Moving the
// clock is host-wide, so those rows take their host alone. Without seams,
// or without the clock seam, a short TTL (agtp-short-ttl, 2 s) is waited
// out in real time, until that long after the suite first saw the
// contract issued (a host's expiry can only come earlier); with a long one
// the row is inapplicable (waiting an hour is no witness), and the
// requirement's real-time rows decide its verdict.
func ttlPassed(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	ttl, ok := s.knobInt("contract_ttl_seconds")
	if !ok {
		return steps.Fault("the scenario sets no contract_ttl_seconds")
	}
	at, ok := s.issued[s.current]
	if !ok {
		return steps.Fault("no contract has been issued yet")
	}
	fx, _ := w.Fixture()
	path := SeamPrefix + "clock/advance"
	if fx.Seams {
		if err := w.Alone(); err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"seconds": float64(ttl) + 0.5})
		r, present, err := w.OptionalSeam(ctx, http.MethodPost, path, body, http.Header{"Content-Type": {"application/json"}})
		switch {
		case err != nil:
			return err
		case present:
			return w.Assert(r.Status == http.StatusOK, "the host's clock seam did not move its clock past the contract's TTL: %s", r)
		case ttl > realTimeTTL:
			// This variant of the witness needs the seam; the rows on
			// agtp-short-ttl witness the same requirement in real time,
			// so the requirement's verdict is theirs.
			status := "no HTTP surface to serve it on"
			if r != nil {
				status = fmt.Sprintf("it answered %d", r.Status)
			}
			return w.Inapplicable(fmt.Sprintf("the host has no clock seam POST %s (%s; docs/hosts/agtp.md section 7) to move past a contract's %d s TTL; the rows on fixture agtp-short-ttl witness the TTL in real time instead", path, status, ttl))
		}
	} else if ttl > realTimeTTL {
		return steps.Fault("fixture %s has no seams and its contracts live %d s: the suite waits out at most %d s", fx.Name, ttl, realTimeTTL)
	}
	select {
	case <-time.After(time.Until(at.Add(time.Duration(ttl)*time.Second + 500*time.Millisecond))):
		return nil
	case <-ctx.Done():
		return steps.Fault("the run was interrupted while a contract's TTL passed in real time: %v", ctx.Err())
	}
}
