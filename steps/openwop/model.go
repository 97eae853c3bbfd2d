package openwop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/hostevents"
	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
)

// The model requirement (openwop.model.host-events): seeded random
// sequences of inbound exchanges, subscriptions, resumptions and closes,
// each performed on the host over the wire and each answer checked against
// models/hostevents. A sequence leases two fresh tenants of the model
// fixture, so it starts from tenants with no records; on a mismatch rapid
// shrinks the sequence, and the failure names the minimal one, the seed and
// the command that replays it (docs/models.md).

// ModelID is the requirement the host-event model witnesses.
const ModelID = "openwop.model.host-events"

const (
	// modelShrinkWait bounds the wait for a missing record once a failure
	// was found: shrinking replays many sequences that fail the same way,
	// and the failure itself was seen with the full recordWait.
	modelShrinkWait = 2 * time.Second
	// modelMaxSubs bounds the subscriptions open at once in a sequence.
	modelMaxSubs = 4
)

// The versions a sequence names: below the floor, the floor, between floor
// and preferred (spoken or not), the preferred, above it, and (A2A) none.
var modelVersions = map[string][]string{
	hostevents.A2A: {"", "0.2", "0.3", "0.5", "1.0", "2.0"},
	hostevents.MCP: {"2024-11-05", "2025-03-26", "2025-05-01", "2025-06-18", "2025-11-25", "2026-01-01"},
}

func registerModel(c *steps.Catalog) {
	c.When(`^the suite runs seeded random sequences of host-event operations against the model, two fresh tenants each$`, func(ctx context.Context) error {
		return runModel(ctx)
	})
	c.Then(`^every answer and every stream agreed with the model of durable host events$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		s.mu.Lock()
		r := s.model
		s.mu.Unlock()
		if r == nil {
			return steps.Fault("no model run: the When step must run the sequences first")
		}
		if r.failed {
			return w.Assert(false, "%s", r.detail)
		}
		return w.Assert(r.checked > 0, "the model checked no answer of the host")
	})
}

// modelRun is what a run of the model found.
type modelRun struct {
	failed  bool
	checked int // answers and deliveries checked against the model
	detail  string
}

// driver performs one sequence after another on the host.
type driver struct {
	ctx context.Context
	w   *steps.World
	s   *state
	cfg hostevents.Config
	// rec keeps the sequences, the failing one, the answers checked and an
	// error (a fault or block that is not the host's answer) that aborts.
	rec models.Recorder
}

// runModel runs the sequences and keeps what they found for the Then step.
func runModel(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	f, ok := w.Fixture()
	if !ok || f.Name != "openwop-model" {
		return steps.Fault("the model sequences lease fresh tenants of the openwop-model fixture; tag the feature @fixture:openwop-model")
	}
	settings, err := models.CurrentIn(ctx)
	if err != nil {
		return steps.Fault("%v", err)
	}
	s.mu.Lock()
	cfg := hostevents.Config{
		A2A: hostevents.Range{Versions: s.a2a.versions, Floor: s.a2a.floor, Preferred: s.a2a.preferred},
		MCP: hostevents.Range{Versions: s.mcp.versions, Floor: s.mcp.floor, Preferred: s.mcp.preferred},
	}
	s.mu.Unlock()
	if cfg.A2A.Preferred == "" || cfg.MCP.Preferred == "" {
		return steps.Fault("the model needs the host's A2A and MCP ranges among the Given steps")
	}
	// The A2A JSON-RPC endpoint is read from the agent card once, as a
	// tenant of its own, so that the card's record lands on no tenant a
	// sequence uses.
	setup, err := modelTenant(ctx, "model-setup")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.tenants = append([]string{setup}, s.tenants...)
	s.mu.Unlock()
	if _, err := rpcEndpoint(ctx); err != nil {
		return err
	}
	d := &driver{ctx: ctx, w: w, s: s, cfg: cfg}
	res, err := models.Check(models.Options{Settings: settings, Steps: 14, ShrinkTime: 10 * time.Second}, d.sequence)
	if err != nil {
		return steps.Fault("%v", err)
	}
	if err := d.rec.Aborted(); err != nil {
		return err
	}
	run := &modelRun{failed: res.Failed, checked: d.rec.Count()}
	if res.Failed {
		run.detail = d.rec.Report("the host disagreed with the model of durable host events", "tenants 0 and 1 fresh", ModelID, res, settings)
	}
	s.mu.Lock()
	s.model = run
	s.mu.Unlock()
	return nil
}

// modelTenant leases a fresh tenant of the fixture's roster under a name of
// the scenario's own.
func modelTenant(ctx context.Context, name string) (string, error) {
	w, s := steps.From(ctx), st(ctx)
	f, _ := w.Fixture()
	i, _, err := w.Lease(fixtures.OWTenants)
	if err != nil {
		return "", err
	}
	key := fixtures.OWAPIKey(w.Env(), f.Name, i)
	w.Secret(key)
	s.mu.Lock()
	s.keys[name] = key
	s.mu.Unlock()
	return name, nil
}

// seqState is one sequence: its model, its tenants and its open streams.
type seqState struct {
	m       *hostevents.Model
	tenants [2]string
	streams map[int]*tenantStream // by model subscription id
	// barrier is, per tenant, the workspace of its latest barrier exchange.
	barrier [2]string
}

// stop ends the sequence: a host's failure fails it (rapid shrinks it);
// anything else (a fault of the suite, a block) aborts the whole run.
func (d *driver) stop(t *rapid.T, err error) {
	var f *steps.Failure
	if errors.As(err, &f) {
		d.fail(t, failAnswer, "%s", f.Msg)
	}
	d.rec.Abort(t, err)
}

// The kinds of disagreement. rapid keeps a shrunk sequence only when it
// fails as the original did, by message and by stack, so a sequence fails
// with its kind alone, always from one place (sequence); the full account
// is kept aside for the row.
const (
	failAnswer     = "an answer the model does not allow"
	failUnexpected = "a stream delivered a record the model does not expect there"
	failShort      = "a stream fell short of the records the model expects"
	failShape      = "a record is not the one the model expects"
	failEnded      = "a stream ended"
)

func (d *driver) fail(_ *rapid.T, kind, format string, a ...any) { d.rec.Fail(kind, format, a...) }

func (d *driver) op(t *rapid.T, format string, a ...any) { d.rec.Op(t, format, a...) }

// shrinkSequences caps the sequences a failing run shrinks with: each
// leases two tenants of the openwop-model roster (2048), which the
// concurrent-subscriptions scenario shares, so a long shrink must leave it
// tenants (else it ends as a suite fault, not a verdict on the host).
const shrinkSequences = 400

// sequence is rapid's property: one random sequence on two fresh tenants.
func (d *driver) sequence(t *rapid.T) {
	d.rec.Begin(t)
	defer d.rec.Recover(t)
	q := &seqState{m: hostevents.New(d.cfg), streams: map[int]*tenantStream{}}
	if d.rec.Shrunk() > shrinkSequences {
		t.Skip("this run's share of the tenant roster for shrinking is spent")
	}
	for i := range q.tenants {
		name, err := modelTenant(d.ctx, fmt.Sprintf("model-%d-%d", d.rec.Seq(), i))
		if err != nil && d.rec.Failed() {
			// Shrinking spent the roster: the smallest failing sequence
			// found so far stands.
			t.Skip("no fresh tenant left to shrink with")
		}
		if err != nil {
			d.stop(t, err)
		}
		q.tenants[i] = name
	}
	defer func() {
		for _, ts := range q.streams {
			ts.s.Close()
		}
	}()
	t.Repeat(map[string]func(*rapid.T){
		"exchange": func(t *rapid.T) {
			tenant := rapid.SampledFrom([]int{0, 0, 0, 1, 1, 1, -1}).Draw(t, "tenant")
			protocol := rapid.SampledFrom([]string{hostevents.A2A, hostevents.MCP}).Draw(t, "protocol")
			form := formCard
			if protocol == hostevents.A2A && rapid.Bool().Draw(t, "jsonrpc") {
				form = formRPC
			}
			named := rapid.SampledFrom(modelVersions[protocol]).Draw(t, "named")
			d.exchange(t, q, tenant, protocol, form, named)
		},
		"subscribe": func(t *rapid.T) {
			if len(q.m.Open()) >= modelMaxSubs {
				t.Skip("enough subscriptions open")
			}
			tenant := rapid.IntRange(0, 1).Draw(t, "tenant")
			var ids []string
			for _, r := range q.m.Log(tenant) {
				if r.EventID != "" {
					ids = append(ids, r.EventID)
				}
			}
			after := ""
			if len(ids) > 0 && rapid.Bool().Draw(t, "resume") {
				after = rapid.SampledFrom(ids).Draw(t, "after")
			}
			d.subscribe(t, q, tenant, after)
		},
		"reconnect": func(t *rapid.T) {
			open := q.m.Open()
			if len(open) == 0 {
				t.Skip("no subscription open")
			}
			sub := rapid.SampledFrom(open).Draw(t, "sub")
			// A reconnecting client names the last event it has.
			after := sub.LastEventID
			if sub.Delivered > 0 {
				after = q.m.Expected(sub)[sub.Delivered-1].EventID
			}
			d.close(t, q, sub, "reconnects")
			d.subscribe(t, q, sub.Tenant, after)
		},
		"close": func(t *rapid.T) {
			open := q.m.Open()
			if len(open) == 0 {
				t.Skip("no subscription open")
			}
			d.close(t, q, rapid.SampledFrom(open).Draw(t, "sub"), "closes")
		},
		"": func(t *rapid.T) { d.sync(t, q) },
	})
	// A barrier per tenant: an exchange at the preferred version whose
	// record every open stream of the tenant must deliver after the rest.
	for i := range q.tenants {
		d.exchange(t, q, i, hostevents.A2A, formCard, d.cfg.A2A.Preferred)
	}
	d.sync(t, q)
}

func protoName(p string) string { return strings.ToUpper(p) }

func (d *driver) exchange(t *rapid.T, q *seqState, tenant int, protocol, form, named string) {
	d.exchangeNoted(t, q, tenant, protocol, form, named, "")
}

// exchangeNoted is exchange, its operation followed by note in the trace;
// it returns the exchange's workspace.
func (d *driver) exchangeNoted(t *rapid.T, q *seqState, tenant int, protocol, form, named, note string) string {
	c := caller{}
	who := "an anonymous caller"
	if tenant >= 0 {
		var err error
		if c, err = d.s.caller(q.tenants[tenant]); err != nil {
			d.stop(t, err)
		}
		who = fmt.Sprintf("tenant %d", tenant)
	}
	how := "initializes MCP"
	if protocol == hostevents.A2A {
		how = "fetches the agent card"
		if form == formRPC {
			how = "sends A2A JSON-RPC"
		}
	}
	namedText := fmt.Sprintf("naming %q", named)
	if named == "" {
		namedText = "naming no version"
	}
	ws := workspaceFor("model")
	x, err := inbound(d.ctx, c, protoName(protocol), form, named, nil, ws)
	if err != nil {
		d.op(t, "%s %s %s", who, how, namedText)
		d.stop(t, err)
	}
	var got hostevents.Answer
	switch {
	case x.refused:
	case x.version != "":
		got = hostevents.Answer{Accepted: true, Version: x.version}
	default:
		d.op(t, "%s %s %s: answered %s", who, how, namedText, x.detail())
		d.fail(t, failAnswer, "%s %s %s, and the host answered neither an acceptance nor a refusal: %s", who, how, namedText, x.detail())
	}
	d.op(t, "%s %s %s: %s%s", who, how, namedText, got, note)
	if err := q.m.Exchange(hostevents.Exchange{Tenant: tenant, Protocol: protocol, Named: named, Workspace: ws}, got); err != nil {
		d.fail(t, failAnswer, "%s %s %s: %v (%s)", who, how, namedText, err, x.detail())
	}
	d.rec.Checked()
	return ws
}

func (d *driver) subscribe(t *rapid.T, q *seqState, tenant int, after string) {
	sub, err := q.m.Subscribe(tenant, after)
	if err != nil {
		d.stop(t, steps.Fault("%v", err))
	}
	if after == "" {
		d.op(t, "tenant %d subscribes without Last-Event-ID (stream %d)", tenant, sub.ID)
	} else {
		d.op(t, "tenant %d subscribes with Last-Event-ID of its record %d (stream %d)", tenant, sub.Start, sub.ID)
	}
	ts, err := dialStream(d.ctx, q.tenants[tenant], after)
	if err != nil {
		d.stop(t, err)
	}
	q.streams[sub.ID] = ts
}

func (d *driver) close(t *rapid.T, q *seqState, sub *hostevents.Sub, verb string) {
	d.op(t, "tenant %d %s stream %d (it had %d records)", sub.Tenant, verb, sub.ID, sub.Delivered)
	q.m.Close(sub)
	if ts := q.streams[sub.ID]; ts != nil {
		ts.s.Close()
		delete(q.streams, sub.ID)
	}
}

// sync reads every open stream until it delivered every record the model
// expects of it, checking each against the model as it comes. A record the
// model does not expect where another is due fails at once. Anything a
// stream delivers beyond what is due now is read, and checked, at the next
// sync.
//
// That a record is not coming is known by what the host sends, not by a
// wait: every tenant one of whose streams has records due first makes a
// barrier exchange (at the preferred A2A version), whose record is due
// last, so a stream that skipped one delivers the barrier's in its place
// and falls short at once. Shrinking then runs hundreds of sequences
// quickly, and how far it gets does not depend on how busy the machine is.
// Only a stream that delivers nothing at all still fails after a wait
// (recordWait, or modelShrinkWait while a failure is shrunk).
func (d *driver) sync(t *rapid.T, q *seqState) {
	wait := recordWait
	if d.rec.Failed() {
		wait = modelShrinkWait
	}
	for tenant := range q.tenants {
		for _, sub := range q.m.Open() {
			if sub.Tenant == tenant && q.m.Pending(sub) > 0 {
				q.barrier[tenant] = d.exchangeNoted(t, q, tenant, hostevents.A2A, formCard, d.cfg.A2A.Preferred, " (barrier)")
				break
			}
		}
	}
	for _, sub := range q.m.Open() {
		ts := q.streams[sub.ID]
		deadline := time.Now().Add(wait)
		for q.m.Pending(sub) > 0 {
			left := time.Until(deadline)
			f, err := ts.s.Next(max(left, time.Millisecond))
			// A stream falls short on the barrier's record delivered in
			// place of the one due, or on a wait; both fail from one
			// place, so rapid takes them for one failure.
			short := ""
			switch {
			case errors.Is(err, sse.ErrTimeout) || left <= 0:
				short = fmt.Sprintf("within %s, tenant %d's stream %d delivered %d of the %d records the model expects of it; the next one, %s, never came", wait, sub.Tenant, sub.ID, sub.Delivered, len(q.m.Expected(sub)), q.m.Expected(sub)[sub.Delivered])
			case err != nil:
				d.fail(t, failEnded, "tenant %d's stream %d ended: %v", sub.Tenant, sub.ID, err)
			default:
				r := parseFrame(f)
				obs := *ts.sub
				obs.Body = []byte(r.text())
				d.w.Observe(&obs)
				if !isDecided(r) {
					continue
				}
				ws, _ := r.env["workspaceId"].(string)
				if err := q.m.Deliver(sub, hostevents.Frame{Event: f.Event, ID: f.ID, HasID: f.HasID, Data: f.Data, Env: r.env, Workspace: ws}); err != nil {
					switch {
					case errors.Is(err, hostevents.ErrUnexpected) && ws != "" && ws == q.barrier[sub.Tenant]:
						short = fmt.Sprintf("tenant %d's stream %d delivered %d of the %d records the model expects of it, then the barrier's record in place of the next one, %s, which never came", sub.Tenant, sub.ID, sub.Delivered, len(q.m.Expected(sub)), q.m.Expected(sub)[sub.Delivered])
					case errors.Is(err, hostevents.ErrUnexpected):
						d.fail(t, failUnexpected, "tenant %d's stream %d: %v", sub.Tenant, sub.ID, err)
					default:
						d.fail(t, failShape, "tenant %d's stream %d: %v", sub.Tenant, sub.ID, err)
					}
				}
			}
			if short != "" {
				d.fail(t, failShort, "%s", short)
			}
			d.rec.Checked()
		}
	}
}
