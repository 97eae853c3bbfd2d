package fairness_test

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// specProfiles are the profiles of family whose ids are not parley's
// binding: the ones a faithful host must pass.
func specProfiles(reg *scenarios.Registry, family string) []string {
	set := map[string]bool{}
	for _, e := range reg.Entries {
		if strings.HasPrefix(e.ID, family+".") && !strings.HasSuffix(e.Profile, scenarios.BindingProfileSuffix) {
			set[e.Profile] = true
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestAFaithfulReadingPassesEverySpecProfile is the fairness rule held to
// hosts: each faithful reading (sabotage.FaithfulReadings: a host that
// never retries, keeps every record, answers a failed composition 464
// composition-impossible, names the attempt record's members its own way,
// refuses a sweep 403, ...) passes every spec profile of its family; only
// the binding ids it names may fail, and they must, so the reading is seen
// to have taken effect (a reading with no binding id must have changed some
// exchange instead). PARLEY_READINGS=name,name runs only those readings.
func TestAFaithfulReadingPassesEverySpecProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each family's spec profiles once per reading")
	}
	reg, corpus := load(t)
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("PARLEY_READINGS"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	readings := sabotage.FaithfulReadings()
	if len(readings) == 0 {
		t.Fatal("no faithful readings")
	}
	// Every reading's runs (its spec profiles, and its binding ids) are
	// made at once before any is judged: each mostly waits on hosts (a
	// binding id that fails under a reading fails by a bounded wait for
	// what never comes), and go test's -parallel would let only two
	// overlap.
	type job struct {
		spec, binding       *runner.Result
		specErr, bindingErr error
	}
	jobs := make([]job, len(readings))
	var runs []func()
	for i, rd := range readings {
		if len(only) > 0 && !only[rd.Name] {
			continue
		}
		var tags []string
		for _, p := range specProfiles(reg, rd.Family) {
			tags = append(tags, "@profile:"+p)
		}
		var btags []string
		for _, id := range rd.Binding {
			btags = append(btags, "@req:"+id)
		}
		runs = append(runs, func() {
			res, err := runUnder(reg, corpus, rd.Rule, strings.Join(tags, ","))
			jobs[i].spec, jobs[i].specErr = res, err
		})
		if len(btags) > 0 {
			runs = append(runs, func() {
				res, err := runUnder(reg, corpus, rd.Rule, strings.Join(btags, ","))
				jobs[i].binding, jobs[i].bindingErr = res, err
			})
		}
	}
	concurrently(runs)
	for i, rd := range readings {
		if len(only) > 0 && !only[rd.Name] {
			continue
		}
		t.Run(rd.Name, func(t *testing.T) {
			if err := errors.Join(jobs[i].specErr, jobs[i].bindingErr); err != nil {
				t.Fatal(err)
			}
			profiles := specProfiles(reg, rd.Family)
			res := jobs[i].spec
			inSpec := map[string]bool{}
			for _, p := range profiles {
				inSpec[p] = true
			}
			passed := 0
			for _, r := range res.Rows {
				e, ok := reg.Lookup(r.ID)
				if !ok || !inSpec[e.Profile] || e.Witness == scenarios.WitnessUnwitnessable {
					continue
				}
				switch r.Result {
				case verdict.ExecutedPass, verdict.Inapplicable:
					passed++
				default:
					t.Errorf("a host that %s: %s (%s) is %s: %s", rd.Host, r.ID, e.Profile, r.Result, firstLine(r.Detail))
				}
			}
			if passed == 0 {
				t.Fatalf("no spec-profile id of %s ran (%v)", rd.Family, profiles)
			}
			if len(rd.Binding) == 0 {
				if rd.Applied() == 0 {
					t.Errorf("the reading changed no exchange: the spec profiles never met the choice it makes")
				}
				return
			}
			for _, id := range rd.Binding {
				e, ok := reg.Lookup(id)
				if !ok || e.Basis != scenarios.BasisBinding {
					t.Fatalf("%s is named as the reading's binding id, but the registry has it %v (basis %q)", id, ok, e.Basis)
				}
			}
			for _, r := range jobs[i].binding.Rows {
				for _, id := range rd.Binding {
					if r.ID == id && r.Result != verdict.ExecutedFail {
						t.Errorf("binding id %s is %s under the reading, want executed-fail: the reading did not take effect", id, r.Result)
					}
				}
			}
		})
	}
}

// runUnder runs the scenarios tags selects against a reference host that
// rule changes.
func runUnder(reg *scenarios.Registry, corpus *scenarios.Corpus, rule sabotage.Rule, tags string) (*runner.Result, error) {
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
	defer tgt.Close()
	ctx := models.WithSettings(context.Background(), models.Settings{Budget: readingModelBudget})
	return runner.Run(ctx, reg, corpus, runner.Options{Target: tgt, Tags: tags})
}

// readingModelBudget is the model ids' budget under a reading: the first
// eight of the 24 sequences go test's fixed seed draws (models.TestSeed).
// Model runs are serialized in a process (rapid's settings are global), so
// eleven readings' model rows at the full budget made this test's tail;
// the full budget runs against the reference host in every whole run.
const readingModelBudget = 8

// concurrently makes the runs at once, a few at a time (each starts its own
// hosts), and returns when all have ended.
func concurrently(runs []func()) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			run()
		}()
	}
	wg.Wait()
}

func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }
