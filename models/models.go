// Package models runs model-based requirements: seeded random operation
// sequences against a host, each answer checked against an executable model
// of the state machine a spec defines (one package per machine below this
// one, written from the spec's text), and on a mismatch the sequence shrunk
// to a minimal one that still fails. Generation and shrinking are
// pgregory.net/rapid's; this package adapts rapid to a run of parley, which
// is not a `go test` binary, and holds the run's seed and budget.
//
// docs/models.md says what each model covers and leaves out, how to replay
// a failing sequence and how to run long.
package models

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Environment variables a run reads when its flags say nothing.
const (
	EnvSeed   = "PARLEY_MODEL_SEED"
	EnvBudget = "PARLEY_MODEL_BUDGET"
)

// DefaultBudget is how many sequences a model requirement runs by default:
// small enough to keep the suite within a few seconds per model (docs/
// performance.md); --model-budget raises it for long (nightly) runs.
const DefaultBudget = 24

// TestSeed is the seed model sequences take in a test binary (go test)
// when nothing names one: a test that passed must pass again on the same
// code, and a fresh seed each run made go test fail on whichever seed
// happened to meet a disagreement. Exploring seeds is for parley runs and
// PARLEY_MODEL_SEED (docs/models.md, "Running long").
const TestSeed = 20261202

// Settings are a run's model settings: Seed 0 draws a fresh seed, Budget 0
// is DefaultBudget, ShrinkTime 0 keeps each model's own bound.
type Settings struct {
	Seed   uint64
	Budget int
	// ShrinkTime, when set, replaces the model's bound on minimizing a
	// failure (rapid bounds shrinking by time only): a test that compares
	// two minimal sequences sets it far beyond what shrinking needs, so a
	// loaded machine cannot cut one of them short.
	ShrinkTime time.Duration
}

var (
	setMu sync.Mutex
	set   Settings
)

// Configure sets the run's model settings (the CLI's --model-seed and
// --model-budget); settings it leaves zero fall back to the environment.
func Configure(s Settings) {
	setMu.Lock()
	defer setMu.Unlock()
	set = s
}

type settingsKey struct{}

// WithSettings returns ctx carrying s: a run given that context (runner.Run
// passes it to every step) uses s, whatever Configure holds, so that runs in
// one process, tests in parallel among them, keep settings of their own.
// Fields s leaves zero fall back as in Current.
func WithSettings(ctx context.Context, s Settings) context.Context {
	return context.WithValue(ctx, settingsKey{}, s)
}

// CurrentIn returns the settings in force for a run given ctx: those ctx
// carries (WithSettings), then Current's.
func CurrentIn(ctx context.Context) (Settings, error) {
	base, err := Current()
	s, ok := ctx.Value(settingsKey{}).(Settings)
	if !ok {
		return base, err
	}
	if s.Seed == 0 && err == nil {
		s.Seed = base.Seed
	}
	if s.Budget == 0 {
		s.Budget = DefaultBudget
		if err == nil {
			s.Budget = base.Budget
		}
	}
	return s, nil
}

// Current returns the settings in force: what Configure set, else the
// environment, else the defaults.
func Current() (Settings, error) {
	setMu.Lock()
	s := set
	setMu.Unlock()
	if s.Seed == 0 {
		if v := strings.TrimSpace(os.Getenv(EnvSeed)); v != "" {
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				return s, fmt.Errorf("%s=%q is not a seed (an unsigned integer): %v", EnvSeed, v, err)
			}
			s.Seed = n
		}
	}
	if s.Budget == 0 {
		if v := strings.TrimSpace(os.Getenv(EnvBudget)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return s, fmt.Errorf("%s=%q is not a budget (a number of sequences, at least 1)", EnvBudget, v)
			}
			s.Budget = n
		}
	}
	if s.Budget == 0 {
		s.Budget = DefaultBudget
	}
	if s.Seed == 0 && testing.Testing() {
		s.Seed = TestSeed
	}
	return s, nil
}

// Options bound one check.
type Options struct {
	Settings
	// Steps is the average number of operations in a sequence (rapid's
	// Repeat draws around it).
	Steps int
	// ShrinkTime bounds the time spent minimizing a failing sequence.
	ShrinkTime time.Duration
}

// Result is what a check found.
type Result struct {
	// Failed is true when some sequence falsified the property.
	Failed bool
	// Seed is the seed of the first failing sequence (replaying with it and
	// a budget of 1 runs that sequence first, and shrinks it again); on a
	// pass, the base seed the run started from.
	Seed uint64
	// Report is rapid's account of the run (the failure, then the minimal
	// sequence's log).
	Report string
}

// rapid keeps its settings in the process's flag set and reads
// testing.Short(), which panics in a process that never initialized the
// testing flags. One check runs at a time, since the settings are global.
var (
	runMu    sync.Mutex
	initOnce sync.Once
)

func initRapid() {
	initOnce.Do(func() {
		testing.Init() // registers test.* flags; a no-op inside go test
		if !flag.Parsed() {
			// Parse nothing: testing.Short() needs a parsed flag set, and a
			// parley binary parses its own flags with cobra.
			_ = flag.CommandLine.Parse(nil)
		}
	})
}

func setFlag(name, value string) error {
	if err := flag.Set(name, value); err != nil {
		return fmt.Errorf("models: setting rapid's %s: %v", name, err)
	}
	return nil
}

// Check runs prop over Budget random sequences from Seed (a fresh one when
// 0). prop fails a sequence with t.Fatalf; rapid then shrinks it.
func Check(o Options, prop func(*rapid.T)) (Result, error) {
	runMu.Lock()
	defer runMu.Unlock()
	initRapid()
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
		if seed == 0 {
			seed = 1
		}
	}
	steps := o.Steps
	if steps <= 0 {
		steps = 12
	}
	shrink := o.ShrinkTime
	if o.Settings.ShrinkTime > 0 {
		shrink = o.Settings.ShrinkTime
	}
	if shrink <= 0 {
		shrink = 20 * time.Second
	}
	for name, v := range map[string]string{
		"rapid.checks":     strconv.Itoa(max(o.Budget, 1)),
		"rapid.steps":      strconv.Itoa(steps),
		"rapid.seed":       strconv.FormatUint(seed, 10),
		"rapid.nofailfile": "true",
		"rapid.shrinktime": shrink.String(),
		"rapid.failfile":   "",
		"rapid.v":          "false",
		"rapid.log":        "false",
	} {
		if err := setFlag(name, v); err != nil {
			return Result{}, err
		}
	}
	if flag.Lookup("test.short") != nil && testing.Short() {
		// rapid divides its checks by 5 and its steps by 2 under -short;
		// a model's budget is the run's, not go test's.
		if err := setFlag("test.short", "false"); err != nil {
			return Result{}, err
		}
		defer func() { _ = flag.Set("test.short", "true") }()
	}
	tb := &recorder{name: "model"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(tb, prop)
	}()
	<-done
	res := Result{Failed: tb.failed, Seed: seed, Report: tb.String()}
	if s, ok := failingSeed(res.Report); ok {
		res.Seed = s
	}
	return res, nil
}

// failingSeed reads the seed rapid names for reproducing a failure.
func failingSeed(report string) (uint64, bool) {
	i := strings.Index(report, "-rapid.seed=")
	if i < 0 {
		return 0, false
	}
	rest := report[i+len("-rapid.seed="):]
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.ParseUint(rest[:end], 10, 64)
	return n, err == nil
}

// recorder is the rapid.TB a check reports to: it keeps what rapid logs and
// whether it failed. FailNow ends the goroutine Check runs rapid in.
type recorder struct {
	name   string
	mu     sync.Mutex
	lines  []string
	failed bool
}

var _ rapid.TB = (*recorder)(nil)

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) add(s string) {
	r.mu.Lock()
	r.lines = append(r.lines, s)
	r.mu.Unlock()
}
func (r *recorder) Logf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }
func (r *recorder) Log(args ...any)                 { r.add(fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any) {
	r.Logf(format, args...)
	r.SkipNow()
}
func (r *recorder) Skip(args ...any) { r.Log(args...); r.SkipNow() }
func (r *recorder) SkipNow()         { runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) {
	r.Logf(format, args...)
	r.Fail()
}
func (r *recorder) Error(args ...any) { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}
func (r *recorder) Fatal(args ...any) { r.Error(args...); r.FailNow() }
func (r *recorder) FailNow()          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}
