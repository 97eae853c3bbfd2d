package steps

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/cucumber/godog"

	"github.com/parley-conformance/parley/verdict"
)

// How a step ends is a Go type, never message text: a step returns nil (it
// passed), a *Failure (the host's fault), a *Blocked (the suite could not
// witness, with a cause from the closed list), a *NotApplicable, or a
// *SuiteFault (a bug in parley). A *Unmet wraps a Failure that happened while
// establishing a precondition. No byte a host sends can turn one type into
// another: host text only ever lands in a message field.

// Failure is the host's fault: what the suite expected and what the host
// sent. It is the only error that yields executed-fail.
type Failure struct {
	Msg string
	// Exchange is the last exchange with the host when the failure was seen.
	Exchange *Response
	// NotStarted marks a host that did not start with the scenario's
	// configuration. It is never read as a failed precondition: every
	// scenario that needs the configuration fails on its own.
	NotStarted bool
}

func (f *Failure) Error() string { return f.Msg }

// Fail returns the host's fault.
func Fail(format string, a ...any) error { return &Failure{Msg: fmt.Sprintf(format, a...)} }

// Blocked says the suite could not witness the requirement.
type Blocked struct {
	Cause  verdict.Cause
	Reason string
	// ReliesOn names, for CausePrecondition, the requirements whose own
	// scenarios witness the setup that failed.
	ReliesOn []string
	// Err, when set, is the target's error the block came from, so that
	// errors.Is tells which capability was missing.
	Err error
}

func (b *Blocked) Error() string { return "blocked (" + b.Cause + "): " + b.Reason }

// Unwrap returns the target's error the block came from, if any.
func (b *Blocked) Unwrap() error { return b.Err }

// Block returns a Blocked error with a cause from the closed list.
func Block(cause verdict.Cause, format string, a ...any) error {
	return &Blocked{Cause: cause, Reason: fmt.Sprintf(format, a...)}
}

// NotApplicable says the condition the requirement is about cannot arise on
// this host.
type NotApplicable struct{ Reason string }

func (n *NotApplicable) Error() string { return "inapplicable: " + n.Reason }

// SuiteFault is a bug in parley: a step used out of order, a scenario that
// asks for something the schema does not describe, a step that panicked.
// It blocks the scenario and makes the run exit 3.
type SuiteFault struct{ Msg string }

func (f *SuiteFault) Error() string { return "suite fault: " + f.Msg }

// Fault returns a suite fault.
func Fault(format string, a ...any) error { return &SuiteFault{Msg: fmt.Sprintf(format, a...)} }

// Unmet is a failure met while establishing a precondition: a setup the
// scenario needs, which other requirements' own scenarios witness. When the
// scenario does not itself witness one of those requirements, it is blocked
// naming them, not failed: the reader is sent to the root cause.
type Unmet struct {
	Precondition string
	Err          error
}

func (u *Unmet) Error() string { return u.Err.Error() }
func (u *Unmet) Unwrap() error { return u.Err }

// Precondition marks err, when it is the host's fault, as a failure to
// establish the named precondition (an id of a [[precondition]] entry in the
// registry). Other errors pass through unchanged.
func Precondition(name string, err error) error {
	var f *Failure
	if err == nil || !errors.As(err, &f) || f.NotStarted {
		return err
	}
	var u *Unmet
	if errors.As(err, &u) {
		return err // the innermost precondition is the most precise
	}
	return &Unmet{Precondition: name, Err: err}
}

// PreconditionInfo is what the registry says of a precondition.
type PreconditionInfo struct {
	Statement string
	ReliesOn  []string
}

// Outcome is the verdict a scenario ended with, when a step ended it.
type Outcome struct {
	Verdict  string
	Cause    verdict.Cause
	ReliesOn []string
	Detail   string
	// Exchange is the last exchange with the host (for a failure).
	Exchange *Response
}

// classify turns a step's error into an outcome. witnesses reports whether
// the scenario itself witnesses a requirement id; lookup reads the
// registry's preconditions.
func classify(err error, witnesses func(string) bool, lookup func(string) (PreconditionInfo, bool)) Outcome {
	var (
		u  *Unmet
		f  *Failure
		b  *Blocked
		na *NotApplicable
		sf *SuiteFault
	)
	switch {
	case errors.As(err, &sf):
		return Outcome{Verdict: verdict.Blocked, Cause: verdict.CauseSuiteFault, Detail: sf.Error()}
	case errors.As(err, &u) && errors.As(u.Err, &f):
		info, ok := lookup(u.Precondition)
		if !ok {
			return Outcome{Verdict: verdict.Blocked, Cause: verdict.CauseSuiteFault,
				Detail: fmt.Sprintf("suite fault: precondition %q is not in the registry (scenarios/*.toml [[precondition]]); the host's failure was: %s", u.Precondition, f.Msg)}
		}
		for _, id := range info.ReliesOn {
			if witnesses(id) {
				// The scenario witnesses the very requirement the setup
				// rests on: the failure is its own.
				return Outcome{Verdict: verdict.ExecutedFail, Detail: f.Msg, Exchange: f.Exchange}
			}
		}
		return Outcome{Verdict: verdict.Blocked, Cause: verdict.CausePrecondition, ReliesOn: append([]string(nil), info.ReliesOn...),
			Detail:   fmt.Sprintf("precondition not met: %s (witnessed by %s); the host: %s", info.Statement, strings.Join(info.ReliesOn, ", "), f.Msg),
			Exchange: f.Exchange}
	case errors.As(err, &f):
		return Outcome{Verdict: verdict.ExecutedFail, Detail: f.Msg, Exchange: f.Exchange}
	case errors.As(err, &b):
		if !verdict.IsCause(b.Cause) {
			return Outcome{Verdict: verdict.Blocked, Cause: verdict.CauseSuiteFault, Detail: fmt.Sprintf("suite fault: blocked with cause %q, which is not in the closed list: %s", b.Cause, b.Reason)}
		}
		return Outcome{Verdict: verdict.Blocked, Cause: b.Cause, ReliesOn: b.ReliesOn, Detail: b.Reason}
	case errors.As(err, &na):
		return Outcome{Verdict: verdict.Inapplicable, Detail: na.Reason}
	default:
		// Every path that reads host bytes returns one of the types above;
		// anything else is a step that forgot to say whose fault it was.
		return Outcome{Verdict: verdict.Blocked, Cause: verdict.CauseSuiteFault,
			Detail: fmt.Sprintf("suite fault: a step returned an unclassified error (%T): %v", err, err)}
	}
}

// stopScenario is what a wrapped step returns to godog once its outcome is
// recorded: a failure fails the step, anything else skips the rest.
func stopScenario(o Outcome, err error) error {
	if o.Verdict == verdict.ExecutedFail {
		return err
	}
	return fmt.Errorf("%w: %s: %s", godog.ErrSkip, o.Verdict, o.Detail)
}

// panicFault turns a recovered panic into a suite fault with its stack.
func panicFault(p any) error {
	return Fault("a step panicked: %v\n%s", p, debug.Stack())
}
