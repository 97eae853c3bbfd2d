package agtp_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/scenarios"
	agtpsteps "github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// bodyForms are the request body forms the drafts leave open.
var bodyForms = []string{target.BodyFormEnvelope, target.BodyFormFlat}

// formRun is the AGTP corpus run against a host that reads only one request
// body form and declares it: the reference host behind
// sabotage.ReadsOnlyBodyForm. Every request the steps send on the way is
// held to the texts' grammar (sent). The two runs, one per form, are made
// once per test process and read by both TestTheSuiteSendsTheDeclaredBodyForm
// and TestFixturesObeyTheGrammar: each is a whole AGTP run, the most a test
// here costs.
type formRun struct {
	res     *runner.Result
	configs []target.Config
	err     error
}

var (
	formRunsOnce sync.Once
	formRuns     = map[string]*formRun{}
	sent         = &sendLog{problems: map[string]bool{}}
)

// runsInEachForm makes (once) and returns the two runs by form.
func runsInEachForm(t *testing.T) map[string]*formRun {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the AGTP corpus once per request body form")
	}
	formRunsOnce.Do(func() {
		reg, corpus, err := scenarios.Load()
		// The grammar check sees what the steps send in both runs; other
		// tests here sending at the same time are held to it too.
		agtpsteps.SendHook = sent.record
		var wg sync.WaitGroup
		for _, form := range bodyForms {
			run := &formRun{err: err}
			formRuns[form] = run
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				inner := target.NewRefhost()
				inner.AGTPBodyForm = form
				tgt := &sabotage.Target{Inner: inner, Rule: sabotage.ReadsOnlyBodyForm(form)}
				defer tgt.Close()
				run.res, run.err = runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
				run.configs = tgt.Configurations()
			}()
		}
		wg.Wait()
		agtpsteps.SendHook = nil
	})
	return formRuns
}

// TestTheSuiteSendsTheDeclaredBodyForm: a host that reads only the flat
// form, or only the envelope, passes every AGTP requirement when it
// declares the form it reads, so the suite sends nothing else, and the
// bundle's facts say the suite sent exactly that form and where it found
// refusal reasons; and it fails when it declares the other, so the
// declaration is what decides the form.
func TestTheSuiteSendsTheDeclaredBodyForm(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	runs := runsInEachForm(t)
	for _, form := range bodyForms {
		t.Run("declared/"+form, func(t *testing.T) {
			run := runs[form]
			if run.err != nil {
				t.Fatal(run.err)
			}
			if len(run.res.Rows) == 0 {
				t.Fatal("no AGTP requirement ran")
			}
			for _, r := range run.res.Rows {
				if r.Result != verdict.ExecutedPass {
					t.Errorf("a host reading only the %s form, declaring it: %s is %s (%s)", form, r.ID, r.Result, r.Detail)
				}
			}
			facts := run.res.Facts
			if got := facts[agtpsteps.FactRequestForm]; strings.Join(got, ",") != form {
				t.Errorf("declared %s, the suite recorded sending %v", form, got)
			}
			if got := facts[agtpsteps.FactReasonPlacement]; strings.Join(got, ",") != "error.reason" {
				t.Errorf("the reference host nests reasons under error; the facts say %v", got)
			}
			if len(facts[agtpsteps.FactResponseForm]) == 0 {
				t.Error("no response body form recorded")
			}
			t.Logf("%s: facts %v", form, facts)
		})
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range bodyForms {
		other := target.BodyFormEnvelope
		if form == other {
			other = target.BodyFormFlat
		}
		t.Run("misdeclared/"+form, func(t *testing.T) {
			t.Parallel()
			inner := target.NewRefhost()
			inner.AGTPBodyForm = other
			tgt := &sabotage.Target{Inner: inner, Rule: sabotage.ReadsOnlyBodyForm(form)}
			defer tgt.Close()
			const ids = "@req:agtp.propose.body.wrapped-form,@req:agtp.rcns.delivery.optimistic-header"
			res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: ids})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) == 0 {
				t.Fatal("no AGTP requirement ran")
			}
			for _, r := range res.Rows {
				if r.Result != verdict.ExecutedFail {
					t.Errorf("a host reading only the %s form but declaring %s: %s is %s, want executed-fail (%s)", form, other, r.ID, r.Result, r.Detail)
				}
			}
		})
	}
}
