package agtp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/contracts"
	"github.com/parley-conformance/parley/steps"
)

// The contracts model (agtp.model.contracts): seeded random sequences of
// contract operations over the wire against a model fixture host (one per
// delivery mode), each answer checked against models/contracts, a failing
// sequence shrunk (docs/models.md). Every sequence leases two fresh
// negotiators and names two fresh rooms and a fresh desk, so it starts with
// no contract and an empty gate budget; the tier-3 agent, the agent without
// rcns:negotiate and the operator are the scenario's, shared by its
// sequences.

// ContractsModelID is the requirement the contracts model witnesses.
const ContractsModelID = "agtp.model.contracts"

type contractsDriver struct {
	ctx      context.Context
	w        *steps.World
	s        *state
	mode     string
	ceiling  int
	ttl      float64
	rec      models.Recorder // a sequence fails with its operation's kind
	names    [5]string
	targets  [3]string
	seamSeen bool
	noClock  bool // the host has no clock seam: sequences do without expiry
}

func registerModel(c *steps.Catalog) {
	c.Given(`^the scenario has its host alone, since the model moves the host's clock through its clock seam when it has one$`, func(ctx context.Context) error {
		// Moving the clock is host-wide. A host without the clock seam runs
		// the model without the expiry operation.
		return steps.From(ctx).Alone()
	})
	c.When(`^the suite runs seeded random sequences of contract operations against the model, two fresh negotiators each$`, func(ctx context.Context) error {
		return runContractsModel(ctx)
	})
	c.Then(`^every answer agreed with the model of contracts$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		v, err := w.Get("contracts-model")
		if err != nil {
			return steps.Fault("no model run: the When step must run the sequences first")
		}
		if v != "" {
			return w.Assert(false, "%s", v)
		}
		n, _ := w.Get("contracts-model-checked")
		return w.Assert(n != "" && n != "0", "the model checked no answer of the host")
	})
}

func runContractsModel(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	if _, err := s.fixture(ctx); err != nil {
		return err
	}
	mode, _ := s.mode(ctx)
	ceiling, ok := s.knobInt("rate_limit_per_minute")
	if !ok {
		return steps.Fault("the contracts model runs on a fixture that sets rate_limit_per_minute (tag it @fixture:agtp-model or agtp-model-optimistic)")
	}
	ttl, ok := s.knobInt("contract_ttl_seconds")
	if !ok {
		return steps.Fault("the contracts model runs on a fixture that sets contract_ttl_seconds")
	}
	if tier, _ := s.knobInt("min_trust_tier"); tier != 2 || s.knobs["enabled"] != true {
		return steps.Fault("the contracts model runs on a fixture with RCNS enabled and min_trust_tier 2")
	}
	d := &contractsDriver{ctx: ctx, w: w, s: s, mode: mode, ceiling: ceiling, ttl: float64(ttl) + 1}
	for i, name := range map[int]string{contracts.Tier3: "tier", contracts.NoGrant: "rooms", contracts.Operator: "ops"} {
		if s.agents[name] == nil {
			return steps.Fault("the contracts model needs agent %q declared by a Given step", name)
		}
		d.names[i] = name
	}
	// The connection (and the host) before any sequence: a host that does
	// not start fails here as every scenario on it does, not as a
	// disagreement the model would shrink.
	if _, err := s.conn(ctx); err != nil {
		return err
	}
	// Obtaining a contract, which every sequence needs, once on its own
	// first: a host that cannot is blocked on that precondition (the
	// requirement witnessing it fails in its own scenario) rather than
	// failed here by a sequence that would only say the same again.
	if _, err := s.lease(ctx, "model-probe", 1, []string{"rooms:*", "rcns:negotiate"}); err != nil {
		return err
	}
	if _, err := obtain(ctx, "model-probe", "BOOK", "/room/room-"+hex12(), true); err != nil {
		return err
	}
	settings, err := models.CurrentIn(ctx)
	if err != nil {
		return steps.Fault("%v", err)
	}
	res, err := models.Check(models.Options{Settings: settings, Steps: 16, ShrinkTime: 6 * time.Second}, d.sequence)
	if err != nil {
		return steps.Fault("%v", err)
	}
	if err := d.rec.Aborted(); err != nil {
		return err
	}
	if d.rec.Count() == 0 && !res.Failed {
		return steps.Fault("the contracts model checked no answer")
	}
	detail := ""
	if res.Failed {
		detail = d.rec.Report(fmt.Sprintf("the host disagreed with the model of contracts (%s delivery)", mode),
			"agents 0 and 1 and the rooms fresh; contracts numbered c1, c2, ... as issued", ContractsModelID, res, settings)
	}
	w.Set("contracts-model", detail)
	w.Set("contracts-model-checked", fmt.Sprint(d.rec.Count()))
	return nil
}

// stop ends the sequence on an error: a host's failure fails it, anything
// else aborts the run.
func (d *contractsDriver) stop(t *rapid.T, kind string, err error) {
	var f *steps.Failure
	if errors.As(err, &f) {
		d.rec.Fail(kind, "%s", f.Msg)
	}
	d.rec.Abort(t, err)
}

func hex12() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// shrinkSequences caps the sequences a failing row shrinks with: each
// leases two negotiators from a roster of 2400 that the fixture's two rows
// (one per transport) share, so a shrink against a host that answers fast
// would otherwise lease them all and leave the other row none (a suite
// fault there, not a verdict on the host). 300 sequences are far more than
// a shrink to a minimal sequence of about 16 operations takes.
const shrinkSequences = 300

func (d *contractsDriver) sequence(t *rapid.T) {
	d.rec.Begin(t)
	defer d.rec.Recover(t)
	if d.rec.Shrunk() > shrinkSequences {
		t.Skip("this row's share of the roster for shrinking is spent")
	}
	for i := range 2 {
		name := fmt.Sprintf("model-%d-%d", d.rec.Seq(), i)
		if _, err := d.s.lease(d.ctx, name, 1, []string{"rooms:*", "rcns:negotiate"}); err != nil {
			if d.rec.Failed() {
				// Shrinking ran the roster out: the smallest failing
				// sequence found so far stands.
				t.Skip("no negotiator left to lease")
			}
			d.stop(t, "lease", err)
		}
		d.names[i] = name
	}
	salt := hex12()
	d.targets = [3]string{"/room/room-" + salt + "a", "/room/room-" + salt + "b", "/desk/desk-" + salt}
	m := contracts.New(d.mode, d.ceiling)

	negotiator := rapid.SampledFrom([]int{contracts.A0, contracts.A1})
	// A contract operated on is a live one two times in three when there
	// is one, else any issued, and one time in eight an id never issued.
	contract := func(t *rapid.T) *contracts.Contract {
		cs := m.Contracts()
		if len(cs) == 0 || rapid.IntRange(0, 7).Draw(t, "unknown") == 0 {
			return nil
		}
		var live []*contracts.Contract
		for _, c := range cs {
			if c.State == contracts.Pending || c.State == contracts.Active {
				live = append(live, c)
			}
		}
		if len(live) > 0 && rapid.IntRange(0, 2).Draw(t, "live") > 0 {
			return rapid.SampledFrom(live).Draw(t, "contract")
		}
		return rapid.SampledFrom(cs).Draw(t, "contract")
	}
	id := func(c *contracts.Contract) string {
		if c == nil {
			return ""
		}
		return c.ID
	}
	// Who operates on it: its originator two times in four.
	actor := func(t *rapid.T, c *contracts.Contract, others ...int) int {
		if c != nil && rapid.IntRange(0, 3).Draw(t, "originator") < 2 {
			return c.Agent
		}
		return rapid.SampledFrom(append([]int{contracts.A0, contracts.A1}, others...)).Draw(t, "actor")
	}
	gate := func(t *rapid.T) {
		op := contracts.Op{Kind: contracts.Gate, Agent: negotiator.Draw(t, "agent"),
			Pair: rapid.SampledFrom([]int{contracts.Room0, contracts.Room0, contracts.Room1, contracts.Room1, contracts.Desk}).Draw(t, "pair"),
			Key:  rapid.SampledFrom([]int{-1, -1, 0, 1}).Draw(t, "key")}
		if p, used := m.KeyUsed(op.Agent, op.Key); used {
			op.Pair = p // a repeated key repeats its request
		}
		d.do(t, m, op)
	}
	present := func(t *rapid.T) {
		c := contract(t)
		d.do(t, m, contracts.Op{Kind: contracts.Present, Agent: actor(t, c), Contract: id(c), OptIn: rapid.Bool().Draw(t, "opt-in")})
	}
	revoke := func(t *rapid.T) {
		c := contract(t)
		d.do(t, m, contracts.Op{Kind: contracts.Revoke, Agent: actor(t, c, contracts.Operator), Contract: id(c)})
	}
	t.Repeat(map[string]func(*rapid.T){
		"gate":          gate,
		"gate again":    gate,
		"present":       present,
		"present again": present,
		"locked": func(t *rapid.T) {
			op := contracts.Op{Kind: contracts.Gate, Pair: contracts.Room0, Key: -1}
			switch rapid.IntRange(0, 2).Draw(t, "lock") {
			case 0:
				op.Agent = contracts.Tier3
			case 1:
				op.Agent = contracts.NoGrant
			default:
				op.Kind, op.Agent = contracts.Unclaimed, negotiator.Draw(t, "agent")
			}
			d.do(t, m, op)
		},
		"plain": func(t *rapid.T) {
			d.do(t, m, contracts.Op{Kind: contracts.Plain, Agent: negotiator.Draw(t, "agent"),
				Pair: rapid.SampledFrom([]int{contracts.Room0, contracts.Room1}).Draw(t, "pair")})
		},
		"suspend": func(t *rapid.T) {
			c := contract(t)
			d.do(t, m, contracts.Op{Kind: contracts.Suspend, Agent: actor(t, c), Contract: id(c)})
		},
		"revoke":       revoke,
		"revoke again": revoke,
		"replay": func(t *rapid.T) {
			agent, key := negotiator.Draw(t, "agent"), rapid.IntRange(0, 1).Draw(t, "key")
			p, used := m.KeyUsed(agent, key)
			if !used {
				t.Skip("no key to replay")
			}
			d.do(t, m, contracts.Op{Kind: contracts.Replay, Agent: agent, Pair: p, Key: key})
		},
		"expire": func(t *rapid.T) {
			// A third as often as the others: it ends every contract.
			if d.noClock || rapid.IntRange(0, 2).Draw(t, "expire") > 0 {
				t.Skip("not this time")
			}
			d.do(t, m, contracts.Op{Kind: contracts.Expire})
		},
	})
}

// describe says what op does, in a trace's words.
func (d *contractsDriver) describe(m *contracts.Model, op contracts.Op) string {
	who := contracts.Agents[op.Agent]
	switch op.Kind {
	case contracts.Gate, contracts.Replay:
		s := fmt.Sprintf("%s asks %s with Allow-RCNS: true", who, contracts.Pairs[op.Pair])
		if op.Key >= 0 {
			s += fmt.Sprintf(", Idempotency-Key %d", op.Key)
		}
		return s
	case contracts.Unclaimed:
		return fmt.Sprintf("%s asks %s with Allow-RCNS: true, claiming only rooms:*", who, contracts.Pairs[op.Pair])
	case contracts.Plain:
		return fmt.Sprintf("%s asks %s, nothing presented, no opt-in", who, contracts.Pairs[op.Pair])
	case contracts.Present:
		s := fmt.Sprintf("%s presents %s", who, m.Label(op.Contract))
		if c, ok := m.Lookup(op.Contract); ok {
			s = fmt.Sprintf("%s presents %s (%s's, %s) for %s", who, c.Label, contracts.Agents[c.Agent], c.State, contracts.Pairs[c.Pair])
		}
		if op.OptIn {
			s += " with Allow-RCNS: true"
		}
		return s
	case contracts.Suspend, contracts.Revoke:
		verb := "releases (SUSPEND)"
		if op.Kind == contracts.Revoke {
			verb = "revokes (REVOKE target=contract)"
		}
		if c, ok := m.Lookup(op.Contract); ok {
			return fmt.Sprintf("%s %s %s (%s's, %s)", who, verb, c.Label, contracts.Agents[c.Agent], c.State)
		}
		return fmt.Sprintf("%s %s an id never issued", who, verb)
	case contracts.Expire:
		return fmt.Sprintf("the host's clock moves %.0f s (past every contract's lifetime)", d.ttl)
	}
	return op.Kind
}

// do sends op, reads the answer and checks it against the model.
func (d *contractsDriver) do(t *rapid.T, m *contracts.Model, op contracts.Op) {
	what := d.describe(m, op)
	var a contracts.Answer
	if op.Kind == contracts.Expire {
		a = d.expire(t, what)
		_ = m.Apply(op, a) // every contract the sequence holds is expired
	} else {
		r, err := d.send(m, op)
		if err != nil {
			d.rec.Op(t, "%s", what)
			d.stop(t, op.Kind, err)
		}
		a = readAnswer(r, op)
		if err := m.Apply(op, a); err != nil {
			d.rec.Op(t, "%s: %s", what, m.Describe(a))
			d.rec.Fail(op.Kind, "%s: %v: %s", what, err, r)
		}
	}
	line := fmt.Sprintf("%s: %d", what, a.Status)
	if a.Reason != "" {
		line += " " + a.Reason
	}
	if a.Contract != "" {
		line += " naming " + m.Label(a.Contract)
	}
	d.rec.Op(t, "%s", line)
	d.rec.Checked()
}

func (d *contractsDriver) send(m *contracts.Model, op contracts.Op) (*steps.Response, error) {
	name := d.names[op.Agent]
	key := func() string {
		if op.Key < 0 {
			return ""
		}
		return fmt.Sprintf("model-%d-key-%d", d.rec.Seq(), op.Key)
	}
	switch op.Kind {
	case contracts.Gate, contracts.Replay:
		return send(d.ctx, name, "BOOK", d.targets[op.Pair], options{allow: ptr("true"), idemKey: key(), aside: true})
	case contracts.Unclaimed:
		return send(d.ctx, name, "BOOK", d.targets[op.Pair], options{allow: ptr("true"), claim: ptr("rooms:*"), aside: true})
	case contracts.Plain:
		return send(d.ctx, name, "BOOK", d.targets[op.Pair], options{aside: true})
	case contracts.Present:
		target, sid := d.targets[contracts.Room0], op.Contract
		if c, ok := m.Lookup(sid); ok {
			target = d.targets[c.Pair]
		} else {
			sid = "syn-unknown-" + hex12()
		}
		o := options{present: sid, aside: true}
		if op.OptIn {
			o.allow = ptr("true")
		}
		return send(d.ctx, name, "BOOK", target, o)
	case contracts.Suspend:
		return send(d.ctx, name, "SUSPEND", "/", options{params: map[string]any{"synthesis_id": d.sid(op.Contract), "reason": "parley: caller release"}, aside: true})
	case contracts.Revoke:
		return send(d.ctx, name, "REVOKE", "/", options{params: map[string]any{"target": "contract", "synthesis_id": d.sid(op.Contract), "reason": "parley: operator revocation"}, aside: true})
	}
	return nil, steps.Fault("the contracts model has no request for %s", op.Kind)
}

func (d *contractsDriver) sid(id string) string {
	if id == "" {
		return "syn-unknown-" + hex12()
	}
	return id
}

// readAnswer reads what the model compares: the status, the reason word,
// the scope a refusal names, and the contract a 461 previews or a success
// is served under.
func readAnswer(r *steps.Response, op contracts.Op) contracts.Answer {
	doc, _ := r.JSON()
	a := contracts.Answer{Status: r.Status}
	reason, _ := reasonOf(doc)
	a.Reason, _, _ = strings.Cut(strings.TrimSpace(reason), " ")
	if e, ok := doc["error"].(map[string]any); ok {
		a.Scope, _ = e["scope"].(string)
	}
	if a.Scope == "" {
		a.Scope, _ = doc["scope"].(string)
	}
	if op.Kind == contracts.Suspend || op.Kind == contracts.Revoke {
		return a
	}
	switch {
	case r.Status == 461:
		a.Contract, _ = field(doc, "synthesis_id").(string)
	case is2xx(r):
		a.Contract = r.Header.Get("Contract-Synthesized")
		if a.Contract == "" {
			if p, _ := attribution(r); p != nil {
				a.Contract, _ = p["synthesis_id"].(string)
			}
		}
	}
	return a
}

// expire moves the host's clock past every contract's lifetime through the
// clock seam (docs/hosts/agtp.md section 5): a 200 means every contract
// whose lifetime passed is expired.
func (d *contractsDriver) expire(t *rapid.T, what string) contracts.Answer {
	path := SeamPrefix + "clock/advance"
	b, _ := json.Marshal(map[string]any{"seconds": d.ttl})
	r, present, err := d.w.OptionalSeam(d.ctx, http.MethodPost, path, b, http.Header{"Content-Type": {"application/json"}})
	switch {
	case err != nil:
		d.rec.Op(t, "%s", what)
		d.stop(t, contracts.Expire, err)
	case r == nil || (!present && !d.seamSeen):
		// No clock seam (or no seams at all): the model does without
		// expiry on this host.
		d.noClock = true
		t.Skip("the host has no clock seam")
	case r.Status != http.StatusOK:
		d.rec.Op(t, "%s: %d", what, r.Status)
		d.rec.Fail(contracts.Expire, "%s: the clock seam: %s, want 200", what, r)
	}
	d.seamSeen = true
	return contracts.Answer{Status: http.StatusOK}
}
