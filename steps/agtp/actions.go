package agtp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// SeamPrefix is where a host mounts its AGTP seams on its HTTP listener.
const SeamPrefix = "/conformance/seams/agtp/"

// options are what a "sends" step adds to the request.
type options struct {
	allow   *string // Allow-RCNS value; nil: no header
	present string  // Contract-Synthesized
	claim   *string // Authority-Scope
	idemKey string
	times   int
	params  map[string]any
}

// send performs one exchange as agent, records it as the scenario's last
// response and remembers any contract it names.
func send(ctx context.Context, agentName, method, target string, o options) (*steps.Response, error) {
	w, s := steps.From(ctx), st(ctx)
	a, err := s.agent(agentName)
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
	body, _ := json.Marshal(map[string]any{"method": method, "task_id": taskID, "parameters": params})
	req, err := wire.NewRequest(method, target, body)
	if err != nil {
		return nil, steps.Fault("%v", err)
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
	ctx, cancel := context.WithTimeout(ctx, steps.ExchangeTimeout)
	defer cancel()
	sent := &steps.Response{Method: method, URL: target, ReqHeader: http.Header(req.Header).Clone(), ReqBody: body}
	resp, err := c.Do(ctx, req)
	if err != nil {
		// The host did not answer with a frame in time: an observation.
		w.Observe(sent)
		return nil, steps.Fail("%s %s as %q: no valid AGTP answer: %v", method, target, agentName, err)
	}
	r := sent
	r.Status, r.Header, r.Body = resp.Status, http.Header(resp.Header), resp.Body
	w.Observe(r)
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
	doc, _ := r.JSON()
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
	if id := r.Header.Get("RCNS-Attempt-Id"); id != "" {
		s.lastAttempt = id
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

// noteIssued records when the suite first saw a contract issued.
func (s *state) noteIssued(sid string) {
	if _, ok := s.issued[sid]; !ok {
		s.issued[sid] = time.Now()
	}
}

// contractRef resolves "the contract" or `contract "name"`.
func (s *state) contractRef(ref string) (string, error) {
	if ref == "the contract" {
		if s.current == "" {
			return "", steps.Fault("no contract has been issued yet")
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

// holdContract has agent obtain an active contract for the pair through the
// gate: opted in, accepting a confirm-first preview by re-issuing the
// request with Contract-Synthesized.
func holdContract(ctx context.Context, agentName, method, target, name string) error {
	w, s := steps.From(ctx), st(ctx)
	target = s.expand(target)
	s.current = ""
	r, err := send(ctx, agentName, method, target, options{allow: ptr("true")})
	if err != nil {
		return err
	}
	if r.Status == 461 && s.current != "" {
		if r, err = send(ctx, agentName, method, target, options{present: s.current}); err != nil {
			return err
		}
	}
	ok, why := servedUnder(r, s.current)
	if err := w.Assert(s.current != "" && ok, "%q could not obtain a contract for %s %s through the gate (%s): %s", agentName, method, target, why, r); err != nil {
		return err
	}
	if name != "" {
		s.named[name] = s.current
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
	c.When(`^"([a-z]+)" holds an active contract for ([A-Z]+) (/\S+?)(?: remembered as "([a-z]+)")?$`, func(ctx context.Context, who, method, target, name string) error {
		return holdContract(ctx, who, method, target, name)
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
	c.When(`^"([a-z]+)" sends REVOKE target=stale-contracts(?: mode=([a-z]+))?(?: actor=([a-z-]+))?$`, func(ctx context.Context, who, mode, actor string) error {
		p := map[string]any{"target": "stale-contracts"}
		if mode != "" {
			p["mode"] = mode
		}
		if actor != "" {
			p["actor"] = actor
		}
		r, err := floor(ctx, who, "REVOKE", "/", p)
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
		a, err := st(ctx).agent(who)
		if err != nil {
			return err
		}
		_, err = floor(ctx, who, "INSPECT", "/", map[string]any{"target": "lifecycle", "agent_id": a.id})
		return err
	})
	c.When(`^the contract's TTL has passed$`, func(ctx context.Context) error {
		// Waits until contract_ttl_seconds (as the scenario configured it)
		// after the suite first saw the contract issued, plus 500 ms: a
		// host's expiry can only be earlier than that.
		s := st(ctx)
		ttl, err := strconv.Atoi(s.knobs["contract_ttl_seconds"])
		if err != nil || ttl <= 0 {
			return steps.Fault("the scenario sets no contract_ttl_seconds")
		}
		at, ok := s.issued[s.current]
		if !ok {
			return steps.Fault("no contract has been issued yet")
		}
		select {
		case <-time.After(time.Until(at.Add(time.Duration(ttl)*time.Second + 500*time.Millisecond))):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	c.When(`^the operator edits recipe "([a-z-]+)" to version "([^"]*)", which composes rooms-v2\.put and answers (\d+)$`, func(ctx context.Context, name, version string, status int) error {
		body, _ := json.Marshal(map[string]any{"version": version, "method": "BOOK", "path": "/room/{id}",
			"steps": []string{"rooms-v2.put"}, "success_status": status})
		return seam(ctx, http.MethodPut, "recipes/"+name, body)
	})
	c.When(`^the operator removes recipe "([a-z-]+)"$`, func(ctx context.Context, name string) error {
		return seam(ctx, http.MethodDelete, "recipes/"+name, nil)
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
