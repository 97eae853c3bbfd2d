// Package steps holds what every family's step definitions share: the
// per-scenario World (the host it drives, the last exchange, named values,
// the assertion count) and a small vocabulary of wire assertions. Steps stay
// thin: they talk to a host through its wire or a documented seam and assert
// on what came back; they never ask the reference host's code for an answer.
package steps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/target"
)

// Verdicts, the OpenWOP vocabulary.
const (
	ExecutedPass = "executed-pass"
	ExecutedFail = "executed-fail"
	Skipped      = "skipped"
	Inapplicable = "inapplicable"
	Blocked      = "blocked"
)

// Limits on every exchange: a hung or hostile host must not hang or exhaust
// the suite.
const (
	ExchangeTimeout = 10 * time.Second
	MaxBodyBytes    = 4 << 20
)

// World is one scenario's state. It is created fresh for every scenario, so
// concurrent scenarios never share one.
type World struct {
	Target target.Target
	HTTP   *http.Client

	// Last is the most recent exchange.
	Last *Response

	mu         sync.Mutex
	assertions int
	override   *Outcome
	vars       map[string]string
	callsBack  bool
	sections   map[string]map[string]any
	state      map[string]any
	seams      bool
	current    *target.Host
	cleanups   []func()
}

// Outcome is a verdict a step set explicitly (blocked, skipped or
// inapplicable), with the reason a person needs.
type Outcome struct {
	Verdict string
	Reason  string
}

// NewWorld returns a World for one scenario.
func NewWorld(t target.Target) *World {
	return &World{
		Target: t,
		HTTP: &http.Client{
			Timeout: ExchangeTimeout,
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

// Assertions returns how many assertions the scenario has made.
func (w *World) Assertions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.assertions
}

// Outcome returns the verdict a step set explicitly, if any.
func (w *World) Outcome() *Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.override
}

func (w *World) setOutcome(verdict, reason string) error {
	w.mu.Lock()
	w.override = &Outcome{Verdict: verdict, Reason: reason}
	w.mu.Unlock()
	return fmt.Errorf("%w: %s: %s", godog.ErrSkip, verdict, reason)
}

// Block records that the suite could not witness the requirement (a seam
// absent, a configuration the target cannot take) and stops the scenario.
func (w *World) Block(reason string) error { return w.setOutcome(Blocked, reason) }

// Inapplicable records that the condition cannot arise on this host.
func (w *World) Inapplicable(reason string) error { return w.setOutcome(Inapplicable, reason) }

// Assert counts one assertion and fails the step when ok is false.
func (w *World) Assert(ok bool, format string, args ...any) error {
	w.mu.Lock()
	w.assertions++
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf(format, args...)
	}
	return nil
}

// Set and Get keep named values ("the preflight id") between steps.
func (w *World) Set(name, value string) { w.mu.Lock(); w.vars[name] = value; w.mu.Unlock() }

// Get returns a named value or an error naming what is missing.
func (w *World) Get(name string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.vars[name]
	if !ok {
		return "", fmt.Errorf("scenario error: no %q recorded by an earlier step", name)
	}
	return v, nil
}

// Configure edits the scenario's host configuration for one family. Given
// steps describe the host; the host itself is acquired at the first exchange,
// so that every Given step has had its say.
func (w *World) Configure(family string, edit func(section map[string]any)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return errors.New("scenario error: the host is already running; configure it before the first exchange")
	}
	if w.sections == nil {
		w.sections = map[string]map[string]any{}
	}
	sec := w.sections[family]
	if sec == nil {
		sec = map[string]any{}
		w.sections[family] = sec
	}
	edit(sec)
	return nil
}

// RequireSeams asks for a host with its test seams on.
func (w *World) RequireSeams() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return errors.New("scenario error: the host is already running; ask for seams before the first exchange")
	}
	w.seams = true
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
		return w.Block(isolatedReason)
	}
	return nil
}

const isolatedReason = "the host runs in a network namespace of its own (container target) and cannot reach the fake peers and destinations the suite runs on loopback; certify these requirements with the exec or refhost target"

// Host returns the host the scenario drives, acquiring it from the target on
// first use. A configuration the target cannot take blocks the scenario
// instead of failing it.
func (w *World) Host(ctx context.Context) (*target.Host, error) {
	w.mu.Lock()
	if w.current != nil {
		h := w.current
		w.mu.Unlock()
		return h, nil
	}
	if len(w.sections) == 0 {
		w.mu.Unlock()
		return nil, errors.New("scenario error: no Given step described the host")
	}
	fams := map[string]any{}
	for k, v := range w.sections {
		fams[k] = v
	}
	seams := w.seams
	w.mu.Unlock()

	cfg, err := target.NewConfig(fams, seams)
	if err != nil {
		return nil, err
	}
	// Implementers build hosts to schemas/host-config.json: a step that asks
	// for something the schema does not describe is a suite fault.
	if err := schemas.ValidateJSON("host-config.json", cfg.JSON()); err != nil {
		return nil, fmt.Errorf("scenario error: the host configuration %s does not satisfy schemas/host-config.json: %v", cfg.JSON(), err)
	}
	h, err := w.Target.Acquire(ctx, cfg)
	if errors.Is(err, target.ErrUnsatisfiable) {
		return nil, w.Block(err.Error())
	}
	if err != nil {
		// Not an observation of any requirement: the suite could not witness.
		return nil, w.Block(fmt.Sprintf("the target could not start a host with configuration %s: %v", cfg.JSON(), err))
	}
	w.mu.Lock()
	w.current = h
	callsBack := w.callsBack
	w.mu.Unlock()
	if callsBack && h.Isolated {
		return nil, w.Block(isolatedReason)
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
