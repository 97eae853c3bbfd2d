package steps

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cucumber/godog"
)

// Kind says what a step does, which decides how its host failures read.
type Kind int

const (
	// Given describes the host or the scenario's fixtures; it makes no
	// exchange of its own.
	Given Kind = iota
	// Setup brings the host into a state the scenario needs through
	// exchanges (obtain a contract, register contracts and a grant). A host
	// failure in it is a failed precondition: the scenario is blocked naming
	// the requirements the precondition relies on, unless it witnesses one
	// of them itself.
	Setup
	// When acts on the host.
	When
	// Then checks what the host did.
	Then
)

func (k Kind) String() string {
	return [...]string{"Given", "Setup", "When", "Then"}[k]
}

// Def is one step definition.
type Def struct {
	Kind Kind
	// Precondition is, for a Setup step, the registry id of the
	// precondition it establishes.
	Precondition string
	Expr         *regexp.Regexp
	Fn           any
	// Waits is how much real time the step may spend waiting on purpose
	// (a lifetime running out, a delay the scenario asked the host for),
	// beyond its exchanges. The runner starts the scenarios that wait
	// longest first, so that their waiting overlaps the rest of the run
	// rather than ending it.
	Waits time.Duration
	// WaitUnit, when set, says the step waits as long as the first number
	// its text carries, in this unit ("pause for 1500 ms").
	WaitUnit time.Duration
	// Restarts says the step makes its scenario restart its host: the
	// scenario takes its turn on the fixture's restart lane, one after
	// another with the fixture's other such scenarios.
	Restarts bool
}

// Step is a definition just added to a catalog.
type Step struct {
	c *Catalog
	i int
}

// Waits records that the step may wait up to d of real time on purpose.
func (s Step) Waits(d time.Duration) { s.c.defs[s.i].Waits = d }

// TakesTurns records that the step puts its scenario on its fixture's
// restart lane, so the runner starts such scenarios early.
func (s Step) TakesTurns() { s.c.defs[s.i].Restarts = true }

// TakesTurns reports whether a definition matching text puts its scenario
// on a restart lane.
func (c *Catalog) TakesTurns(text string) bool {
	for _, i := range c.matching(text) {
		if c.defs[i].Restarts {
			return true
		}
	}
	return false
}

// WaitsAsWritten records that the step waits as long as the first number
// its expression captures, in unit.
func (s Step) WaitsAsWritten(unit time.Duration) { s.c.defs[s.i].WaitUnit = unit }

// Catalog is the suite's step definitions, compiled once per process and
// bound to each scenario as its steps need them. Family packages add to it through Given, Setup,
// When and Then; they never see godog's ScenarioContext, so no step can
// escape the classification its wrapper applies.
type Catalog struct {
	defs []Def

	wrapOnce    sync.Once
	wrappedDefs []Def
	// matches caches, per step text, the indexes of the definitions whose
	// expression matches it: outline rows and shared steps repeat texts,
	// so each is matched against the whole catalog once per process.
	matches sync.Map // string -> []int
}

var (
	ctxType   = reflect.TypeOf((*context.Context)(nil)).Elem()
	errorType = reflect.TypeOf((*error)(nil)).Elem()
)

func (c *Catalog) add(k Kind, precondition, expr string, fn any) Step {
	if c.wrappedDefs != nil {
		panic("steps: a definition was added after the catalog was bound: " + expr)
	}
	t := reflect.TypeOf(fn)
	if t == nil || t.Kind() != reflect.Func || t.NumIn() == 0 || t.In(0) != ctxType || t.NumOut() != 1 || t.Out(0) != errorType {
		panic(fmt.Sprintf("steps: %q: a step is func(context.Context, ...) error, got %T", expr, fn))
	}
	c.defs = append(c.defs, Def{Kind: k, Precondition: precondition, Expr: regexp.MustCompile(expr), Fn: fn})
	return Step{c, len(c.defs) - 1}
}

// Given adds a step that describes the host or a fixture.
func (c *Catalog) Given(expr string, fn any) Step { return c.add(Given, "", expr, fn) }

// Setup adds a step that establishes the named precondition.
func (c *Catalog) Setup(precondition, expr string, fn any) Step {
	if precondition == "" {
		panic("steps: a Setup step names its precondition: " + expr)
	}
	return c.add(Setup, precondition, expr, fn)
}

// When adds an action.
func (c *Catalog) When(expr string, fn any) Step { return c.add(When, "", expr, fn) }

// Then adds a check.
func (c *Catalog) Then(expr string, fn any) Step { return c.add(Then, "", expr, fn) }

// Wait is the most real time the definitions matching text may wait on
// purpose (zero for a text no definition matches).
func (c *Catalog) Wait(text string) time.Duration {
	var d time.Duration
	for _, i := range c.matching(text) {
		def := c.defs[i]
		d = max(d, def.Waits)
		if def.WaitUnit == 0 {
			continue
		}
		for _, arg := range def.Expr.FindStringSubmatch(text)[1:] {
			if n, err := strconv.Atoi(arg); err == nil {
				d = max(d, time.Duration(n)*def.WaitUnit)
				break
			}
		}
	}
	return d
}

// Defs returns the definitions, in the order they were added.
func (c *Catalog) Defs() []Def { return append([]Def(nil), c.defs...) }

// Preconditions lists the precondition ids Setup steps name.
func (c *Catalog) Preconditions() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range c.defs {
		if d.Precondition != "" && !seen[d.Precondition] {
			seen[d.Precondition] = true
			out = append(out, d.Precondition)
		}
	}
	sort.Strings(out)
	return out
}

// BindSteps registers with a scenario the definitions that match one of its
// step texts, each wrapped so that its error is classified and recorded on
// the scenario's World before godog sees it (the wrappers are built once).
// Only those: godog matches every step against every definition it was
// given, and records where each was registered, so binding the whole
// catalog to each of hundreds of scenarios cost more CPU than most of their
// exchanges. What godog decides is unchanged: a text no definition matches
// is still undefined, and one that several match is still ambiguous, since
// all of them are bound.
func (c *Catalog) BindSteps(sc *godog.ScenarioContext, texts []string) {
	defs := c.wrapped()
	bound := make(map[int]bool, len(texts))
	for _, t := range texts {
		for _, i := range c.matching(t) {
			if !bound[i] {
				bound[i] = true
				sc.Step(defs[i].Expr, defs[i].Fn)
			}
		}
	}
}

// matching returns the indexes of the definitions whose expression matches text.
func (c *Catalog) matching(text string) []int {
	if m, ok := c.matches.Load(text); ok {
		return m.([]int)
	}
	var out []int
	for i, d := range c.defs {
		if d.Expr.MatchString(text) {
			out = append(out, i)
		}
	}
	c.matches.Store(text, out)
	return out
}

func (c *Catalog) wrapped() []Def {
	c.wrapOnce.Do(func() {
		c.wrappedDefs = make([]Def, len(c.defs))
		for i, d := range c.defs {
			c.wrappedDefs[i] = d
			c.wrappedDefs[i].Fn = wrap(d)
		}
	})
	return c.wrappedDefs
}

// wrap returns a function of the same type as d.Fn that runs it and settles
// what it returned on the World.
func wrap(d Def) any {
	fn := reflect.ValueOf(d.Fn)
	return reflect.MakeFunc(fn.Type(), func(args []reflect.Value) (results []reflect.Value) {
		ctx, _ := args[0].Interface().(context.Context)
		w := From(ctx)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = panicFault(p)
				}
			}()
			out := fn.Call(args)
			err, _ = out[0].Interface().(error)
		}()
		if err != nil && d.Kind == Setup {
			err = Precondition(d.Precondition, err)
		}
		err = w.settle(err)
		if err == nil {
			return []reflect.Value{reflect.Zero(errorType)}
		}
		return []reflect.Value{reflect.ValueOf(&err).Elem()}
	}).Interface()
}
