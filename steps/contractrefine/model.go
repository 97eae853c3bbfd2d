package contractrefine

import (
	"context"
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
// of issued and unknown ids, and tool.echo calls bound to them on an
// enforce host; each answer checked against models/decisions, a failing
// sequence shrunk (docs/models.md).

// DecisionsModelID is the requirement the decisions model witnesses.
const DecisionsModelID = "contractrefine.model.decisions"

// Kinds of disagreement (rapid keeps a shrunk sequence only when it fails
// the same way; see steps/openwop/model.go).
const (
	crFailOutcome = "a preflight answer the model does not allow"
	crFailGet     = "a read the model does not allow"
	crFailTool    = "a bound call the model does not allow"
)

// crVariants weighs the reference variants a sequence draws.
var crVariants = []string{
	decisions.VRepair, decisions.VRepair, decisions.VRepair, decisions.VPass, decisions.VPass,
	decisions.VDeliver, decisions.VMismatch, decisions.VNoSession, decisions.VNoHash,
}

type crDriver struct {
	ctx      context.Context
	w        *steps.World
	max      int
	rec      models.Recorder
	sessions [2]string
	hashes   [2]string
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
	if at(sec, "mode") != "enforce" {
		return steps.Fault("the decisions model runs on an enforce host (tag it @fixture:contractrefine-enforce)")
	}
	maxRepair := 0
	switch n := at(sec, "max_repair_attempts").(type) {
	case float64:
		maxRepair = int(n)
	case int:
		maxRepair = n
	default:
		return steps.Fault("the fixture names no max_repair_attempts")
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
	d := &crDriver{ctx: ctx, w: w, max: maxRepair}
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
	m := decisions.New(d.max)
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
			ds := m.Decisions()
			id := ""
			if len(ds) > 0 && rapid.IntRange(0, 3).Draw(t, "unknown") > 0 {
				id = rapid.SampledFrom(ds).Draw(t, "decision").ID
			}
			d.call(t, m, id)
		},
	})
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
	doc, jerr := resp.JSON()
	if resp.Status != http.StatusOK || jerr != nil {
		d.op(t, "%s: %d", what, resp.Status)
		d.fail(crFailOutcome, "%s: answered %s, want a 200 decision", what, resp)
	}
	dec := decision{raw: resp.Body, doc: doc}
	outcome := dec.str("outcome")
	d.op(t, "%s: %s", what, outcome)
	if err := m.Post(r, dec.str("preflight_id"), outcome, dec.str("reason"), doc); err != nil {
		d.fail(crFailOutcome, "%s: %v: %s", what, err, resp)
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
	if !known {
		if resp.Status != http.StatusNotFound {
			d.fail(crFailGet, "%s: answered %s, want 404", what, resp)
		}
		d.rec.Checked()
		return
	}
	x, _ := m.Lookup(id)
	doc, jerr := resp.JSON()
	if resp.Status != http.StatusOK || jerr != nil || !reflect.DeepEqual(any(doc), x.Doc) {
		d.fail(crFailGet, "%s: answered %s, want 200 with the decision POST returned", what, resp)
	}
	d.rec.Checked()
}

func (d *crDriver) call(t *rapid.T, m *decisions.Model, id string) {
	if id == "" {
		id = uuid.NewString()
	}
	what := "tool.echo bound to " + describe(m, id)
	agent, err := agentID(d.ctx)
	if err != nil {
		d.stop(t, crFailTool, err)
	}
	marker := "parley-model-" + uuid.NewString()
	body := map[string]any{"kind": "tool.echo", "params": map[string]any{"text": marker}, "actor": map[string]any{"agent_id": agent}}
	resp, err := d.w.DoJSON(d.ctx, http.MethodPost, "/v1/tool", body, http.Header{preflightHeader: {id}})
	if err != nil {
		d.op(t, "%s", what)
		d.stop(t, crFailTool, err)
	}
	d.op(t, "%s: %d", what, resp.Status)
	runs := m.Runs(id, "tool.echo")
	switch {
	case runs && (resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), marker)):
		d.fail(crFailTool, "%s: answered %s, want 200 carrying the call's text (a pass binding tool.echo binds it)", what, resp)
	case !runs && resp.Status != http.StatusForbidden:
		d.fail(crFailTool, "%s: answered %s, want 403 (enforce refuses a call its header does not bind)", what, resp)
	}
	d.rec.Checked()
}
