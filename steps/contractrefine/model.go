package contractrefine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/decisions"
	"github.com/parley-conformance/parley/steps"
)

// The decisions model (contractrefine.model.decisions): seeded random
// sequences of preflight requests (every reference variant, over two fresh
// sessions and two fresh plan hashes, so repair budgets interleave), reads
// of issued and unknown ids, and tool.echo and tool.deliver calls bound to
// them or without the header, on each fixture of the mode ladder (enforce,
// advisory, disabled); each answer, the autonomy.preflight frame of each
// decision, the autonomy.decision frames of each call and each delivery at
// the suite's destination checked against models/decisions, a failing
// sequence shrunk (docs/models.md).

// DecisionsModelID is the requirement the decisions model witnesses.
const DecisionsModelID = "contractrefine.model.decisions"

// Kinds of disagreement (rapid keeps a shrunk sequence only when it fails
// the same way; see steps/openwop/model.go).
const (
	crFailOutcome = "a preflight answer the model does not allow"
	crFailGet     = "a read the model does not allow"
	crFailTool    = "a bound call the model does not allow"
	crFailFrame   = "a WAL frame the model does not allow"
)

// crVariants weighs the reference variants a sequence draws.
var crVariants = []string{
	decisions.VRepair, decisions.VRepair, decisions.VRepair, decisions.VPass, decisions.VPass,
	decisions.VDeliver, decisions.VMismatch, decisions.VNoSession, decisions.VNoHash,
}

type crDriver struct {
	ctx      context.Context
	w        *steps.World
	s        *state
	mode     string
	max      int
	requires []string
	live     string // the host's live lock fingerprint
	agent    string
	rec      models.Recorder
	sessions [2]string
	hashes   [2]string
	// delivers are the tool.deliver calls of the sequence: marker -> ran.
	delivers map[string]bool
	// calls is how many autonomy.decision frames of the agent the WAL held
	// after the last call (the agent is the scenario's, its calls one at
	// a time, so the frames a call gained are its own).
	calls int
}

func registerModel(c *steps.Catalog) {
	c.When(`^the suite runs seeded random sequences of preflights, reads and bound tool calls against the model$`, func(ctx context.Context) error {
		return runDecisionsModel(ctx)
	})
	c.Then(`^every answer agreed with the model of preflight decisions$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		v, err := w.Get("decisions-model")
		if err != nil {
			return steps.Fault("no model run: the When step must run the sequences first")
		}
		if v != "" {
			return w.Assert(false, "%s", v)
		}
		n, _ := w.Get("decisions-model-checked")
		return w.Assert(n != "" && n != "0", "the model checked no answer of the host")
	})
}

func runDecisionsModel(ctx context.Context) error {
	w := steps.From(ctx)
	sec, _, err := section(ctx)
	if err != nil {
		return err
	}
	mode, _ := at(sec, "mode").(string)
	if mode != decisions.Enforce && mode != decisions.Advisory && mode != decisions.Disabled {
		return steps.Fault("the decisions model runs on a fixture of the mode ladder whose mode is set explicitly (enforce, advisory or disabled), not %q", mode)
	}
	maxRepair := 0
	switch n := at(sec, "max_repair_attempts").(type) {
	case float64:
		maxRepair = int(n)
	case int:
		maxRepair = n
	default:
		if mode != decisions.Disabled {
			return steps.Fault("the fixture names no max_repair_attempts")
		}
	}
	var requires []string
	if l, ok := at(sec, "policy.requires_preflight").([]any); ok {
		for _, k := range l {
			if s, ok := k.(string); ok {
				requires = append(requires, s)
			}
		}
	}
	live, _ := at(sec, "lock_fingerprint").(string)
	// The model reads the WAL through the seam and tool.deliver's effect
	// at the suite's destination.
	if err := w.RequireSeams(); err != nil {
		return err
	}
	if err := w.CallsBack(); err != nil {
		return err
	}
	if u, _ := at(sec, "tools.deliver_url").(string); u == "" {
		return steps.Fault("the decisions model delivers to the suite's destination, and the fixture configures no tools.deliver_url")
	}
	f, _ := w.Fixture()
	if err := openMailbox(ctx, f.Name); err != nil {
		return err
	}
	agent, err := agentID(ctx)
	if err != nil {
		return err
	}
	// The host is acquired before any sequence: one that does not start
	// fails here as every scenario on it does, not as a disagreement the
	// model would shrink.
	if _, err := w.Host(ctx); err != nil {
		return err
	}
	settings, err := models.CurrentIn(ctx)
	if err != nil {
		return steps.Fault("%v", err)
	}
	d := &crDriver{ctx: ctx, w: w, s: st(ctx), mode: mode, max: maxRepair, requires: requires, live: live, agent: agent}
	res, err := models.Check(models.Options{Settings: settings, Steps: 14, ShrinkTime: 10 * time.Second}, d.sequence)
	if err != nil {
		return steps.Fault("%v", err)
	}
	if err := d.rec.Aborted(); err != nil {
		return err
	}
	if d.rec.Count() == 0 && !res.Failed {
		return steps.Fault("the decisions model checked no answer")
	}
	detail := ""
	if res.Failed {
		detail = d.rec.Report("the host disagreed with the model of preflight decisions",
			"sessions 0 and 1 and plan hashes 0 and 1 fresh", DecisionsModelID, res, settings)
	}
	w.Set("decisions-model", detail)
	w.Set("decisions-model-checked", fmt.Sprint(d.rec.Count()))
	return nil
}

func (d *crDriver) fail(kind, format string, a ...any) { d.rec.Fail(kind, format, a...) }

// stop ends the sequence on an error: a host's failure fails it, anything
// else aborts the run.
func (d *crDriver) stop(t *rapid.T, kind string, err error) {
	var f *steps.Failure
	if errors.As(err, &f) {
		d.fail(kind, "%s", f.Msg)
	}
	d.rec.Abort(t, err)
}

func (d *crDriver) op(t *rapid.T, format string, a ...any) { d.rec.Op(t, format, a...) }

func (d *crDriver) sequence(t *rapid.T) {
	d.rec.Begin(t)
	defer d.rec.Recover(t)
	for i := range d.sessions {
		d.sessions[i] = "parley-session-" + uuid.NewString()
		d.hashes[i] = "blake3:" + randomHex(32)
	}
	d.delivers = map[string]bool{}
	m := decisions.NewIn(d.mode, d.max, d.requires)
	before := d.preflightFrames(t, nil)
	d.calls = len(d.callFrames(t))
	// Preflights are drawn twice as often as reads or calls, repairable
	// ones and passes most, and session 0 and plan hash 0 three times in
	// four, so that budgets are spent and decisions meet in one session.
	preflight := func(t *rapid.T) {
		r := decisions.Request{
			Variant: rapid.SampledFrom(crVariants).Draw(t, "variant"),
			Session: rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "session"),
			Hash:    rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "hash"),
		}
		d.preflight(t, m, r)
	}
	t.Repeat(map[string]func(*rapid.T){
		"preflight":       preflight,
		"preflight again": preflight,
		"read": func(t *rapid.T) {
			ds := m.Decisions()
			id := ""
			if len(ds) > 0 && rapid.IntRange(0, 3).Draw(t, "unknown") > 0 {
				id = rapid.SampledFrom(ds).Draw(t, "decision").ID
			}
			d.read(t, m, id)
		},
		"call": func(t *rapid.T) {
			kind := rapid.SampledFrom([]string{"tool.echo", "tool.deliver"}).Draw(t, "kind")
			ds := m.Decisions()
			id := ""
			switch n := rapid.IntRange(0, 7).Draw(t, "binding"); {
			case n == 0:
				id = "-" // no header
			case n > 1 && len(ds) > 0:
				id = rapid.SampledFrom(ds).Draw(t, "decision").ID
			}
			d.call(t, m, kind, id)
		},
	})
	d.settle(t, m, before)
}

// settle ends a sequence: read again, every decision still has its one
// frame (a later decision did not overwrite or drop it), a disabled host
// wrote none, and every tool.deliver call left at the destination exactly
// what it left when it was answered (a refused call nothing, also later).
func (d *crDriver) settle(t *rapid.T, m *decisions.Model, before int) {
	d.op(t, "(the sequence's WAL frames and deliveries read again)")
	byID := map[string][]map[string]any{}
	n := d.preflightFrames(t, byID)
	if !m.Decides() && n != before {
		d.fail(crFailFrame, "a disabled host wrote %d autonomy.preflight frame(s) for the sequence's requests, which it must answer 503 without deciding", n-before)
	}
	for i, x := range m.Decisions() {
		if err := decisions.CheckPreflightFrame(x, x.Request.Capability(), d.planHash(x.Request), d.live, byID[x.ID]); err != nil {
			d.fail(crFailFrame, "at the end of the sequence, decision %d (%s): %v", i+1, x.Outcome, err)
		}
	}
	for marker, ran := range d.delivers {
		got, err := d.s.box.carrying(marker)
		if err != nil {
			d.stop(t, crFailTool, err)
		}
		if want := map[bool]int{true: 1, false: 0}[ran]; len(got) != want {
			d.fail(crFailTool, "at the end of the sequence, the destination holds %d deliveries of a tool.deliver call answered %s, want %d", len(got), map[bool]string{true: "as run", false: "as refused"}[ran], want)
		}
	}
	d.rec.Checked()
}

// preflightFrames reads the agent's autonomy.preflight frames, files them by
// preflight_id into byID (when given) and counts them.
func (d *crDriver) preflightFrames(t *rapid.T, byID map[string][]map[string]any) int {
	fs, err := frames(d.ctx, "autonomy.preflight", map[string]string{"actor_agent_id": d.agent})
	if err != nil {
		d.stop(t, crFailFrame, err)
	}
	if byID != nil {
		for _, f := range fs {
			a := attrsOf(f)
			id, _ := a["preflight_id"].(string)
			byID[id] = append(byID[id], a)
		}
	}
	return len(fs)
}

func attrsOf(f frame) map[string]any {
	a := map[string]any{}
	for k, raw := range f.Attrs {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			a[k] = v
		}
	}
	return a
}

func (d *crDriver) planHash(r decisions.Request) string {
	if r.Variant == decisions.VNoHash {
		return ""
	}
	return d.hashes[r.Hash]
}

// callFrames reads the autonomy.decision frames of the agent's calls.
func (d *crDriver) callFrames(t *rapid.T) []frame {
	fs, err := frames(d.ctx, "autonomy.decision", map[string]string{"actor_agent_id": d.agent})
	if err != nil {
		d.stop(t, crFailFrame, err)
	}
	return fs
}

// describe names a decision by its place in the sequence.
func describe(m *decisions.Model, id string) string {
	for i, x := range m.Decisions() {
		if x.ID == id {
			return fmt.Sprintf("decision %d (%s)", i+1, x.Outcome)
		}
	}
	return "an id the host never issued"
}

func (d *crDriver) preflight(t *rapid.T, m *decisions.Model, r decisions.Request) {
	names := map[string]string{
		decisions.VPass: "for a plan that satisfies every contract", decisions.VDeliver: "for a plan that delivers",
		decisions.VRepair: "for a plan whose params lack provenance", decisions.VMismatch: "whose plan step kind differs from the capability",
		decisions.VNoSession: "without actor.session_id", decisions.VNoHash: "without intent.plan_hash",
	}
	req, err := request(d.ctx, names[r.Variant])
	if err != nil {
		d.stop(t, crFailOutcome, err)
	}
	if a, ok := req["actor"].(map[string]any); ok && r.Variant != decisions.VNoSession {
		a["session_id"] = d.sessions[r.Session]
	}
	if in, ok := req["intent"].(map[string]any); ok && r.Variant != decisions.VNoHash {
		in["plan_hash"] = d.hashes[r.Hash]
	}
	what := fmt.Sprintf("preflight %s, session %d, plan hash %d", r.Variant, r.Session, r.Hash)
	resp, err := d.w.DoJSON(d.ctx, http.MethodPost, "/v1/preflight", req, jsonHeader())
	if err != nil {
		d.op(t, "%s", what)
		d.stop(t, crFailOutcome, err)
	}
	if !m.Decides() {
		d.op(t, "%s: %d", what, resp.Status)
		if resp.Status != http.StatusServiceUnavailable {
			d.fail(crFailOutcome, "%s: %s, want 503 (a disabled host decides nothing)", what, resp)
		}
		d.rec.Checked()
		return
	}
	doc, jerr := resp.JSON()
	if resp.Status != http.StatusOK || jerr != nil {
		d.op(t, "%s: %d", what, resp.Status)
		d.fail(crFailOutcome, "%s: %s, want a 200 decision", what, resp)
	}
	dec := decision{raw: resp.Body, doc: doc}
	outcome := dec.str("outcome")
	d.op(t, "%s: %s", what, outcome)
	id := dec.str("preflight_id")
	if err := m.Post(r, id, outcome, dec.str("reason"), doc); err != nil {
		d.fail(crFailOutcome, "%s: %v: %s", what, err, resp)
	}
	d.rec.Checked()
	// Its one autonomy.preflight frame, as the decision says.
	fs, err := frames(d.ctx, "autonomy.preflight", map[string]string{"preflight_id": id})
	if err != nil {
		d.stop(t, crFailFrame, err)
	}
	var as []map[string]any
	for _, f := range fs {
		as = append(as, attrsOf(f))
	}
	x, _ := m.Lookup(id)
	if err := decisions.CheckPreflightFrame(x, r.Capability(), d.planHash(r), d.live, as); err != nil {
		d.fail(crFailFrame, "%s: %v", what, err)
	}
	d.rec.Checked()
}

func (d *crDriver) read(t *rapid.T, m *decisions.Model, id string) {
	known := id != ""
	if !known {
		id = uuid.NewString()
	}
	what := "read " + describe(m, id)
	resp, err := d.w.Do(d.ctx, http.MethodGet, "/v1/preflight/"+id, nil, nil)
	if err != nil {
		d.op(t, "%s", what)
		d.stop(t, crFailGet, err)
	}
	d.op(t, "%s: %d", what, resp.Status)
	if !m.Decides() {
		if resp.Status != http.StatusServiceUnavailable {
			d.fail(crFailGet, "%s: %s, want 503 (a disabled host reads nothing)", what, resp)
		}
		d.rec.Checked()
		return
	}
	if !known {
		if resp.Status != http.StatusNotFound {
			d.fail(crFailGet, "%s: %s, want 404", what, resp)
		}
		d.rec.Checked()
		return
	}
	x, _ := m.Lookup(id)
	doc, jerr := resp.JSON()
	if resp.Status != http.StatusOK || jerr != nil || !reflect.DeepEqual(any(doc), x.Doc) {
		d.fail(crFailGet, "%s: %s, want 200 with the decision POST returned", what, resp)
	}
	d.rec.Checked()
}

func (d *crDriver) call(t *rapid.T, m *decisions.Model, kind, id string) {
	h := http.Header{}
	what := kind + " without a preflight id"
	switch id {
	case "-":
		id = ""
	case "":
		id = uuid.NewString()
		fallthrough
	default:
		h.Set(preflightHeader, id)
		what = kind + " bound to " + describe(m, id)
	}
	before := d.calls
	marker := d.s.text + "-model-" + uuid.NewString()
	params := map[string]any{"text": marker}
	if kind == "tool.deliver" {
		params["mailbox"] = d.s.box.id
	}
	body := map[string]any{"kind": kind, "params": params, "actor": map[string]any{"agent_id": d.agent}}
	resp, err := d.w.DoJSON(d.ctx, http.MethodPost, "/v1/tool", body, h)
	if err != nil {
		d.op(t, "%s", what)
		d.stop(t, crFailTool, err)
	}
	d.op(t, "%s: %d", what, resp.Status)
	want := m.Call(id, kind)
	if resp.Status != want.Status {
		d.fail(crFailTool, "%s: %s, want %d (%s)", what, resp, want.Status, want.Why)
	}
	switch kind {
	case "tool.echo":
		if want.Runs && !strings.Contains(string(resp.Body), marker) {
			d.fail(crFailTool, "%s: %s, which does not carry the call's text (%s, so tool.echo runs)", what, resp, want.Why)
		}
	case "tool.deliver":
		// The host answers a delivery that runs once the destination took
		// it; one it refused must have left nothing (read again when the
		// sequence ends).
		got, err := d.s.box.carrying(marker)
		if err != nil {
			d.stop(t, crFailTool, err)
		}
		if n := map[bool]int{true: 1, false: 0}[want.Runs]; len(got) != n {
			d.fail(crFailTool, "%s: answered %d and the destination received %d deliveries of the call's params, want %d (%s)", what, resp.Status, len(got), n, want.Why)
		}
		d.delivers[marker] = want.Runs
	}
	d.rec.Checked()
	all := d.callFrames(t)
	d.calls = len(all)
	if len(all) < before {
		d.fail(crFailFrame, "%s: the agent's autonomy.decision frames went from %d to %d during the call", what, before, len(all))
	}
	var cf []decisions.CallFrame
	for _, f := range all[before:] {
		k, _ := f.attr("tool_kind")
		o, _ := f.attr("outcome")
		a, _ := f.attr("audit_id")
		cf = append(cf, decisions.CallFrame{ToolKind: k, Outcome: o, AuditID: a, Raw: f.raw})
	}
	if err := decisions.CheckCallFrames(want, kind, h.Get(preflightHeader), cf); err != nil {
		d.fail(crFailFrame, "%s: %v", what, err)
	}
	d.rec.Checked()
}
