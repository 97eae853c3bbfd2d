// Package steps holds what every family's step definitions share: the
// per-scenario World (the host it drives, the exchanges it made, named
// values, the assertion count, the outcome), the typed outcomes a step ends
// in, the step catalog that classifies them, and a small vocabulary of wire
// assertions. Steps stay thin: they talk to a host through its wire or a
// documented seam and assert on what came back; they never ask the
// reference host's code for an answer.
package steps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/internal/lazyfs"
	"github.com/parley-conformance/parley/redact"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// Limits on every exchange: a hung or hostile host must not hang or exhaust
// the suite.
const (
	ExchangeTimeout = 10 * time.Second
	MaxBodyBytes    = 4 << 20
)

// Scenario is what the World knows of the scenario it serves.
type Scenario struct {
	// ReqIDs are the requirements the scenario witnesses.
	ReqIDs []string
	// Preconditions reads the registry's [[precondition]] entries.
	Preconditions func(id string) (PreconditionInfo, bool)
	// ID names the scenario (one example row of an outline) within the run.
	ID string
	// Fixture is the fixture the scenario names (@fixture:NAME): its host
	// runs that fixture.
	Fixture string
	// Exclusive says the scenario changes host-wide state: it has its host
	// to itself, a turn on its fixture's exclusive lane.
	Exclusive bool
	// Fixtures is the run's fixture set (configurations and leases).
	Fixtures *fixtures.Set
	// Isolate gives every scenario a host of its own (--isolate, the oracle
	// that verdicts do not depend on hosts being shared).
	Isolate bool
}

// World is one scenario's state. It is created fresh for every scenario, so
// concurrent scenarios never share one.
type World struct {
	Target target.Target
	HTTP   *http.Client

	scenario Scenario
	secrets  redact.Set

	mu           sync.Mutex
	last         *Response // the exchange steps assert on
	seen         *Response // the most recent exchange of any kind
	observations int
	assertions   int
	outcome      *Outcome
	vars         map[string]string
	callsBack    bool
	state        map[string]any
	seams        bool
	stateDir     string
	current      *target.Host
	restarts     []func(*target.Host)
	change       func(target.Config) (target.Config, error) // how the host's configuration changes at its next restart
	facts        map[string]map[string]bool
	notes        []string
	cleanups     []func()
	held         []target.Config // configurations acquired, released when the scenario is recorded
	needs        []string        // optional fixture members the scenario needs
	wantLane     bool            // the scenario restarts its fixture's host: it takes the fixture's lane
	lane         *fixtures.Lane  // the lane the scenario holds
	wantPower    bool            // the scenario cuts the power under its fixture's host: it takes the fixture's power-cut lane
	disk         target.Disk     // the disk of the scenario's state directory, whose power it can cut
}

// NewWorld returns a World for one scenario.
func NewWorld(t target.Target, sc Scenario) *World {
	return &World{
		Target:   t,
		scenario: sc,
		HTTP: &http.Client{
			// Each exchange's deadline is its context's (ExchangeContext);
			// this only caps it.
			Timeout: ExchangeCap,
			// A conformance client must see redirects, not follow them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		vars: map[string]string{},
	}
}

type worldKey struct{}

// With stores w in ctx.
func With(ctx context.Context, w *World) context.Context {
	return context.WithValue(ctx, worldKey{}, w)
}

// From returns the scenario's World.
func From(ctx context.Context) *World {
	w, _ := ctx.Value(worldKey{}).(*World)
	if w == nil {
		panic("steps: no World in context (the runner's Before hook sets one)")
	}
	return w
}

// Assertions returns how many assertions about what the host sent the
// scenario has made: an assertion counts only once the scenario has
// observed the host (an exchange, a frame, a call at a fake it runs).
func (w *World) Assertions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.assertions
}

// Outcome returns how a step ended the scenario, if one did.
func (w *World) Outcome() *Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.outcome
}

// Secret registers values the suite generated that must never be shown
// (keys, tokens): they are redacted from every detail the scenario reports.
func (w *World) Secret(values ...string) { w.secrets.Add(values...) }

// Redact removes the scenario's secrets and anything that looks like a
// credential from text.
func (w *World) Redact(text string) string { return w.secrets.Text(text) }

// witnesses reports whether the scenario witnesses requirement id.
func (w *World) witnesses(id string) bool {
	for _, x := range w.scenario.ReqIDs {
		if x == id {
			return true
		}
	}
	return false
}

func (w *World) lookupPrecondition(id string) (PreconditionInfo, bool) {
	if w.scenario.Preconditions == nil {
		return PreconditionInfo{}, false
	}
	return w.scenario.Preconditions(id)
}

// settle classifies a step's error, records the first outcome, and returns
// what godog should see.
func (w *World) settle(err error) error {
	if err == nil {
		return nil
	}
	o := classify(err, w.witnesses, w.lookupPrecondition)
	w.mu.Lock()
	if o.Exchange == nil && o.Verdict == verdict.ExecutedFail {
		o.Exchange = w.seen
	}
	if w.outcome == nil {
		w.outcome = &o
	}
	w.mu.Unlock()
	return stopScenario(o, err)
}

// Settle is settle for code that runs a step's body outside the catalog
// (tests of the World itself).
func (w *World) Settle(err error) error { return w.settle(err) }

// Block returns a Blocked error: the suite cannot witness the requirement.
func (w *World) Block(cause verdict.Cause, format string, a ...any) error {
	return Block(cause, format, a...)
}

// Inapplicable says the condition cannot arise on this host.
func (w *World) Inapplicable(reason string) error { return &NotApplicable{Reason: reason} }

// Observe records that the scenario saw something the host sent or did
// other than through World's own exchanges (an AGTP frame, an event-stream
// frame, a request at a fake the suite runs, a log line). r, when non-nil,
// becomes the exchange a failure is reported with.
func (w *World) Observe(r *Response) {
	w.mu.Lock()
	w.observations++
	if r != nil {
		w.seen = r
	}
	w.mu.Unlock()
}

// Assert counts one assertion and returns the host's Failure when ok is
// false; the message says what was expected and what the host sent.
func (w *World) Assert(ok bool, format string, args ...any) error {
	w.mu.Lock()
	if w.observations > 0 {
		w.assertions++
	}
	seen := w.seen
	w.mu.Unlock()
	if !ok {
		return &Failure{Msg: fmt.Sprintf(format, args...), Exchange: seen}
	}
	return nil
}

// Set and Get keep named values ("the preflight id") between steps.
func (w *World) Set(name, value string) { w.mu.Lock(); w.vars[name] = value; w.mu.Unlock() }

// Get returns a named value; a missing one is a scenario that uses a step
// out of order.
func (w *World) Get(name string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.vars[name]
	if !ok {
		return "", Fault("no %q recorded by an earlier step", name)
	}
	return v, nil
}

// RequireSeams asks for a host with its test seams on.
func (w *World) RequireSeams() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return Fault("the host is already running; ask for seams before the first exchange")
	}
	w.seams = true
	return nil
}

// KeepState gives the scenario's host a state directory the suite keeps,
// so that the host can be restarted on it, and the host is the scenario's
// alone while it runs: restarting it disturbs no other scenario. On a
// fixture the scenario takes its turn on the fixture's restart lane (one
// host instance with its own state, lent to such scenarios one at a time);
// otherwise the host and the directory are the scenario's own.
func (w *World) KeepState() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return Fault("the host is already running; ask for a kept state before the first exchange")
	}
	if w.stateDir != "" || w.wantLane {
		return nil
	}
	if _, ok := w.fixtureLocked(); ok && !w.scenario.Isolate {
		w.wantLane = true
		return nil
	}
	dir, err := os.MkdirTemp("", "parley-state-*")
	if err != nil {
		return Fault("cannot make a state directory: %v", err)
	}
	w.stateDir = dir
	w.cleanups = append(w.cleanups, func() { _ = os.RemoveAll(dir) })
	return nil
}

// KeepStateOnCuttableDisk is KeepState on a disk whose power the suite can
// cut (internal/lazyfs): the host's state directory loses every write the
// host did not sync when the power goes. A target whose hosts keep their
// state elsewhere than on this machine's filesystem, or a machine without
// FUSE, cannot provide one: the scenario is blocked. On a fixture the
// scenario takes its turn on the fixture's power-cut lane.
func (w *World) KeepStateOnCuttableDisk() error {
	if _, ok := w.Target.(target.PowerCutter); !ok {
		return Block(verdict.CauseTarget, "the %s target cannot cut the power under a host: the host's state directory is not on a filesystem of this machine the suite can mount, or the suite cannot kill the host (use the exec or refhost target)", w.Target.Kind())
	}
	if err := lazyfs.Available(); err != nil {
		return Block(verdict.CauseTarget, "this machine cannot mount the filesystem that loses unsynced writes on a power cut (FUSE: /dev/fuse and the right to mount): %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return Fault("the host is already running; ask for a kept state before the first exchange")
	}
	if w.wantPower || w.disk != nil {
		return nil
	}
	if w.stateDir != "" || w.wantLane {
		return Fault("the scenario keeps its host's state both on an ordinary disk and on one whose power the suite cuts")
	}
	if _, ok := w.fixtureLocked(); ok && !w.scenario.Isolate {
		w.wantLane, w.wantPower = true, true
		return nil
	}
	disk, err := lazyfs.MountTemp()
	if err != nil {
		return Fault("cannot mount a state directory whose power the suite can cut: %v", err)
	}
	w.stateDir, w.disk = disk.Dir, disk
	w.cleanups = append(w.cleanups, func() { _ = disk.Close() })
	return nil
}

// PowerCut cuts the power under the scenario's host: its state directory
// loses every write the host did not sync, the host is killed where it
// stands, and it is started again on what its disk kept.
func (w *World) PowerCut(ctx context.Context) error {
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	disk := w.disk
	w.mu.Unlock()
	if disk == nil {
		return Fault("the scenario cuts the power under its host without keeping its state on a disk whose power the suite can cut (a Given step asks for that)")
	}
	pc, ok := w.Target.(target.PowerCutter)
	if !ok {
		return Block(verdict.CauseTarget, "the %s target cannot cut the power under a host", w.Target.Kind())
	}
	nh, err := pc.PowerCut(ctx, h.Config, disk)
	return w.restarted(nh, err, "started again after a power cut")
}

// Alone says the scenario needs its host to itself while it runs (it reads
// something host-wide): it must be tagged @exclusive, which gives it that
// on every target (a turn on its fixture's exclusive lane, or, against a
// deployed host, a turn after every shared scenario).
func (w *World) Alone() error {
	if !w.scenario.Exclusive && !w.scenario.Isolate {
		return Fault("the scenario needs its host to itself: tag it %s", "@exclusive")
	}
	return nil
}

// Fact records something the scenario learned about the host that a
// reader of the evidence should see (which body form it was sent, where it
// put a reason word); the run gathers every value of every key.
func (w *World) Fact(key, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.facts == nil {
		w.facts = map[string]map[string]bool{}
	}
	if w.facts[key] == nil {
		w.facts[key] = map[string]bool{}
	}
	w.facts[key][value] = true
}

// Note records what a scenario observed that a reader of the evidence
// should see even when it passes (how many trials a contention check ran,
// what they showed): the notes become the scenario's detail, and a passing
// requirement row carries the details of its scenarios.
func (w *World) Note(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, w.secrets.Text(fmt.Sprintf(format, a...)))
}

// Notes returns what the scenario recorded with Note, in order.
func (w *World) Notes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.notes...)
}

// Facts returns what the scenario recorded with Fact.
func (w *World) Facts() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]string, len(w.facts))
	for k, vs := range w.facts {
		for v := range vs {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// OnRestart registers f to run with the new host after a restart (a family
// that holds a connection reconnects there).
func (w *World) OnRestart(f func(*target.Host)) {
	w.mu.Lock()
	w.restarts = append(w.restarts, f)
	w.mu.Unlock()
}

// Restart stops the scenario's host, as a crash (SIGKILL, an abrupt close)
// or cleanly, and starts it again on its state. A target that cannot
// restart a host blocks the scenario; a host that does not come back is the
// host's failure.
func (w *World) Restart(ctx context.Context, crash bool) error {
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	kept := w.stateDir != ""
	w.mu.Unlock()
	if !kept {
		return Fault("the scenario restarts its host without keeping its state (a Given step asks for that)")
	}
	w.mu.Lock()
	change := w.change
	w.change = nil
	w.mu.Unlock()
	if change != nil {
		return w.restartChanged(ctx, h, change, crash)
	}
	r, ok := w.Target.(target.Restarter)
	if !ok {
		return Block(verdict.CauseTarget, "the %s target cannot stop a host and start it again on its state", w.Target.Kind())
	}
	nh, err := r.Restart(ctx, h.Config, crash)
	how := "restarted"
	if crash {
		how = "restarted after a crash"
	}
	return w.restarted(nh, err, how)
}

// ChangeAtRestart says the scenario's host is started under a changed
// configuration at its next restart (what an operator does when it
// changes a deployment and restarts the service): change turns the host's
// configuration into the changed one. A target with no RestartWith blocks
// the scenario here, before anything is done at the host; one that answers
// it cannot (a url host) blocks it at the restart, with its reason.
func (w *World) ChangeAtRestart(change func(target.Config) (target.Config, error)) error {
	if _, ok := w.Target.(target.Reconfigurer); !ok {
		return Block(verdict.CauseTarget, "the %s target cannot stop a host and start it again on its state under a changed configuration (use the refhost, exec or container target)", w.Target.Kind())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.change != nil {
		return Fault("the scenario changes its host's configuration twice before one restart")
	}
	w.change = change
	return nil
}

// restartChanged restarts the scenario's host under the changed
// configuration. The target keeps the changed host the scenario's alone:
// it is retired once the scenario releases it.
func (w *World) restartChanged(ctx context.Context, h *target.Host, change func(target.Config) (target.Config, error), crash bool) error {
	r, ok := w.Target.(target.Reconfigurer)
	if !ok {
		return Block(verdict.CauseTarget, "the %s target cannot stop a host and start it again on its state under a changed configuration (use the refhost, exec or container target)", w.Target.Kind())
	}
	changed, err := change(h.Config)
	if err != nil {
		return err
	}
	nh, err := r.RestartWith(ctx, h.Config, changed, crash)
	how := "restarted under a changed configuration"
	if crash {
		how = "restarted after a crash under a changed configuration"
	}
	return w.restarted(nh, err, how)
}

// restarted takes the host a restart (of any kind, said by how) returned.
func (w *World) restarted(nh *target.Host, err error, how string) error {
	var se *target.StartError
	switch {
	case errors.Is(err, target.ErrUnsatisfiable):
		return &Blocked{Cause: verdict.CauseTarget, Reason: err.Error(), Err: err}
	case errors.As(err, &se):
		return Fail("the host did not start again when %s on its state: %s", how, se.Error())
	case err != nil:
		return Fault("the %s target could not restart the host: %v", w.Target.Kind(), err)
	}
	w.mu.Lock()
	w.current = nh
	hooks := make([]func(*target.Host), len(w.restarts))
	copy(hooks, w.restarts)
	w.mu.Unlock()
	for _, f := range hooks {
		f(nh)
	}
	return nil
}

// CallsBack records that the scenario runs a server the host must reach (a
// fake peer or destination on the suite's loopback). A host in a network
// namespace of its own cannot, so the scenario is blocked there rather than
// failed.
func (w *World) CallsBack() error {
	w.mu.Lock()
	w.callsBack = true
	h := w.current
	w.mu.Unlock()
	if h != nil && h.Isolated {
		return Block(verdict.CauseTarget, isolatedReason)
	}
	return nil
}

const isolatedReason = "the host runs in a network namespace of its own (container target) and cannot reach the fake peers and destinations the suite runs on loopback; certify these requirements with the exec or refhost target"

// Config is the configuration of the scenario's host: its fixture's, with
// the state directory a restarting scenario keeps.
func (w *World) Config() (target.Config, error) {
	cfg, err := w.config()
	if err != nil {
		return target.Config{}, err
	}
	w.mu.Lock()
	stateDir, lane := w.stateDir, w.lane
	w.mu.Unlock()
	// A host of its own: an exclusive scenario leaves it changed, a kept
	// state is the scenario's alone, and an isolated run shares nothing.
	switch sc := w.scenario; {
	case lane != nil:
		cfg = cfg.WithLane(lane.Name)
	case sc.Isolate:
		cfg = cfg.WithInstance("isolate:" + sc.ID)
	case sc.Exclusive:
		cfg = cfg.WithInstance("exclusive:" + sc.ID)
	case stateDir != "":
		cfg = cfg.WithInstance("state:" + sc.ID)
	}
	return cfg, nil
}

// Fixture returns the fixture the scenario's host runs, when it runs one.
func (w *World) Fixture() (fixtures.Fixture, bool) { return w.fixtureLocked() }

// fixtureLocked reads only what never changes, so it may be called with
// w.mu held.
func (w *World) fixtureLocked() (fixtures.Fixture, bool) {
	if w.scenario.Fixtures == nil || w.scenario.Fixture == "" {
		return fixtures.Fixture{}, false
	}
	return fixtures.Lookup(w.scenario.Fixture)
}

// takeLane waits for the scenario's turn on one of its fixture's lanes and
// holds it until the scenario ends: a restart lane (whose state directory
// becomes the host's) for a scenario that restarts its host, the exclusive
// lane for one that changes host-wide state. Either way the scenario has
// the host alone while it runs, and no scenario that shares the fixture's
// host ever meets what it changed.
func (w *World) takeLane(ctx context.Context) error {
	if _, ok := w.Fixture(); !ok || w.scenario.Isolate {
		return nil
	}
	w.mu.Lock()
	restarts, power := w.wantLane, w.wantPower
	want := (restarts || w.scenario.Exclusive) && w.lane == nil
	w.mu.Unlock()
	if !want {
		return nil
	}
	kind := fixtures.LaneExclusive
	switch {
	case power:
		kind = fixtures.LanePower
	case restarts:
		kind = fixtures.LaneRestarts
	}
	l, err := w.scenario.Fixtures.TakeLane(ctx, w.scenario.Fixture, kind)
	if err != nil {
		if ctx.Err() != nil {
			return Fault("the run ended while the scenario waited for its turn on a host of fixture %s: %v", w.scenario.Fixture, err)
		}
		return Fault("cannot make a lane for fixture %s: %v", w.scenario.Fixture, err)
	}
	w.mu.Lock()
	w.lane = l
	if restarts {
		w.stateDir = l.Dir
	}
	if power {
		w.disk = l.Disk
	}
	w.cleanups = append(w.cleanups, l.Give)
	w.mu.Unlock()
	return nil
}

// Env is the run's fixture environment (the rosters' salt, where the fakes
// are served, the TLS material); the zero Env when the run has no set.
func (w *World) Env() fixtures.Env {
	if w.scenario.Fixtures == nil {
		return fixtures.Env{}
	}
	return w.scenario.Fixtures.Env
}

// FixtureConfig is the configuration of the scenario's fixture as
// published (no state directory, no instance).
func (w *World) FixtureConfig() (target.Config, error) {
	f, ok := w.Fixture()
	if !ok {
		return target.Config{}, Fault("the scenario runs on no fixture")
	}
	cfg, err := w.scenario.Fixtures.Config(f.Name)
	if err != nil {
		return target.Config{}, Fault("%v", err)
	}
	return cfg, nil
}

// FixtureMemo returns what build makes for key, once per run: a view of
// the fixture that every scenario of the run shares and none changes.
func (w *World) FixtureMemo(key string, build func() (any, error)) (any, error) {
	if w.scenario.Fixtures == nil {
		return build()
	}
	return w.scenario.Fixtures.Memo(key, build)
}

// Fakes is the run's server for the suite's fakes, where fixture hosts
// call the destinations and peers the scenarios lease.
func (w *World) Fakes() (*fixtures.Fakes, error) {
	if w.scenario.Fixtures == nil || w.scenario.Fixtures.Fakes == nil {
		return nil, Fault("the run serves no fakes (it has no fixture set)")
	}
	return w.scenario.Fixtures.Fakes, nil
}

// Lease takes an identity of the scenario's own from a roster of its
// fixture: its index and its name (fixtures.Env.ID). No other scenario of
// the run is given it.
func (w *World) Lease(roster string) (int, string, error) {
	f, ok := w.Fixture()
	if !ok {
		return 0, "", Fault("the scenario leases from roster %q but runs on no fixture (tag it @fixture:NAME)", roster)
	}
	i, err := w.scenario.Fixtures.Lease(f.Name, roster)
	if errors.Is(err, fixtures.ErrExhausted) && w.scenario.Fixtures.Dir != "" {
		// Hosts deployed from a written set have served earlier runs.
		return 0, "", Block(verdict.CauseTarget, "%v", err)
	}
	if err != nil {
		return 0, "", Fault("%v", err)
	}
	return i, w.scenario.Fixtures.Env.ID(f.Name, roster, i), nil
}

// Needs says the scenario needs an optional member of its fixture: a host
// that declares it does not serve the member blocks the scenario, naming it.
func (w *World) Needs(member string) error {
	f, ok := w.Fixture()
	if !ok {
		return Fault("the scenario needs fixture member %q but runs on no fixture", member)
	}
	if _, ok := f.Member(member); !ok {
		return Fault("fixture %s declares no optional member %q", f.Name, member)
	}
	w.mu.Lock()
	h := w.current
	w.needs = append(w.needs, member)
	w.mu.Unlock()
	if h != nil {
		return w.served(h)
	}
	return nil
}

// served blocks a scenario whose host declares it does not serve a member
// the scenario needs.
func (w *World) served(h *target.Host) error {
	w.mu.Lock()
	needs := append([]string(nil), w.needs...)
	w.mu.Unlock()
	for _, m := range needs {
		if !h.Serves(m) {
			return Block(verdict.CauseDeclined, "the host declares it does not serve member %q of fixture %s", m, w.scenario.Fixture)
		}
	}
	return nil
}

func (w *World) config() (target.Config, error) {
	f, ok := w.Fixture()
	if !ok {
		return target.Config{}, Fault("the scenario names no fixture (tag it @fixture:NAME; parley fixtures lists them)")
	}
	cfg, err := w.scenario.Fixtures.Config(f.Name)
	if err != nil {
		return target.Config{}, Fault("%v", err)
	}
	w.mu.Lock()
	seams, stateDir := w.seams, w.stateDir
	w.mu.Unlock()
	if seams && !cfg.Seams() {
		return target.Config{}, Fault("the scenario needs the host's seams, and fixture %s has them off", f.Name)
	}
	if stateDir != "" {
		if cfg, err = cfg.WithStateDir(stateDir); err != nil {
			return target.Config{}, Fault("the host configuration does not encode: %v", err)
		}
	}
	return cfg, nil
}

// Acquire asks the target for a host running cfg and says, by the error's
// type, whose fault it is when there is none.
func (w *World) Acquire(ctx context.Context, cfg target.Config) (*target.Host, error) {
	h, err := w.Target.Acquire(ctx, cfg)
	var (
		se *target.StartError
		de *target.DeclinedError
	)
	switch {
	case err == nil:
		w.mu.Lock()
		w.held = append(w.held, cfg)
		w.mu.Unlock()
		return h, nil
	case errors.As(err, &de):
		return nil, Block(verdict.CauseDeclined, "the host declined %s: %s", describeConfig(cfg), de.Reason)
	case errors.As(err, &se):
		return nil, &Failure{NotStarted: true, Msg: se.Error()}
	case errors.Is(err, target.ErrUnsatisfiable):
		return nil, Block(verdict.CauseTarget, "%v", err)
	case ctx.Err() != nil:
		return nil, Fault("the run was interrupted while starting a host: %v", err)
	default:
		return nil, Fault("the %s target could not start a host for %s: %v", w.Target.Kind(), describeConfig(cfg), err)
	}
}

// describeConfig names a configuration for a reader: its fixture, and its digest.
func describeConfig(cfg target.Config) string {
	if f := cfg.Fixture(); f != "" {
		return "fixture " + f + " (configuration " + cfg.Digest() + ")"
	}
	return "configuration " + cfg.Digest()
}

// Host returns the host the scenario drives, acquiring it from the target on
// first use.
func (w *World) Host(ctx context.Context) (*target.Host, error) {
	w.mu.Lock()
	if w.current != nil {
		h := w.current
		w.mu.Unlock()
		return h, nil
	}
	w.mu.Unlock()
	if err := w.takeLane(ctx); err != nil {
		return nil, err
	}
	cfg, err := w.Config()
	if err != nil {
		return nil, err
	}
	h, err := w.Acquire(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.current = h
	callsBack := w.callsBack
	w.mu.Unlock()
	if callsBack && h.Isolated {
		return nil, Block(verdict.CauseTarget, isolatedReason)
	}
	if err := w.served(h); err != nil {
		return nil, err
	}
	return h, nil
}

// State returns the family's per-scenario state, creating it with init on
// first use.
func (w *World) State(family string, init func() any) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == nil {
		w.state = map[string]any{}
	}
	st, ok := w.state[family]
	if !ok {
		st = init()
		w.state[family] = st
	}
	return st
}

// Cleanup registers f to run when the scenario ends.
func (w *World) Cleanup(f func()) { w.mu.Lock(); w.cleanups = append(w.cleanups, f); w.mu.Unlock() }

// Release tells the target the scenario is done with every host it
// acquired, once its outcome (logs included) is recorded.
func (w *World) Release() {
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	r, ok := w.Target.(target.Releaser)
	if !ok {
		return
	}
	for _, cfg := range held {
		r.Release(cfg)
	}
}

// Close runs the cleanups, newest first.
func (w *World) Close() {
	w.mu.Lock()
	fs := w.cleanups
	w.cleanups = nil
	w.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
