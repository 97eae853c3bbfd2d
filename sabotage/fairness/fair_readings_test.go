package fairness_test

import (
	"context"
	"fmt"
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
//
// The readings of a family run their spec profiles together, on one host
// that makes all their choices at once (sabotage.Combine): such a host is
// faithful too, and one run of a family's profiles costs what one reading's
// did. A reading another would hide runs on a host of its own
// (Reading.Alone). When a host of several readings fails an id, the id is
// run again under each of them alone, to say whose choice it fails.
func TestAFaithfulReadingPassesEverySpecProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each family's spec profiles once per host of readings")
	}
	reg, corpus := load(t)
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("PARLEY_READINGS"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	var readings []sabotage.Reading
	for _, rd := range sabotage.FaithfulReadings() {
		if len(only) == 0 || only[rd.Name] {
			readings = append(readings, rd)
		}
	}
	if len(readings) == 0 {
		t.Fatal("no faithful readings")
	}
	hosts := readingHosts(readings)
	// Every run (each host's spec profiles, each reading's binding ids) is
	// made at once before any is judged: each mostly waits on hosts (a
	// binding id that fails under a reading fails by a bounded wait for
	// what never comes), and go test's -parallel would let only two
	// overlap.
	type result struct {
		res *runner.Result
		err error
	}
	spec := make([]result, len(hosts))
	binding := make([]result, len(readings))
	var runs []func()
	for i, h := range hosts {
		runs = append(runs, func() {
			spec[i].res, spec[i].err = runUnder(reg, corpus, h.rule(), specTags(reg, h.family))
		})
	}
	for i, rd := range readings {
		var btags []string
		for _, id := range rd.Binding {
			btags = append(btags, "@req:"+id)
		}
		if len(btags) > 0 {
			runs = append(runs, func() {
				binding[i].res, binding[i].err = runUnder(reg, corpus, rd.Rule, strings.Join(btags, ","))
			})
		}
	}
	concurrently(runs)
	for i, h := range hosts {
		t.Run("spec/"+h.name(), func(t *testing.T) {
			if spec[i].err != nil {
				t.Fatal(spec[i].err)
			}
			inSpec := map[string]bool{}
			for _, p := range specProfiles(reg, h.family) {
				inSpec[p] = true
			}
			passed := 0
			var failed []verdict.Row
			for _, r := range spec[i].res.Rows {
				e, ok := reg.Lookup(r.ID)
				if !ok || !inSpec[e.Profile] || e.Witness == scenarios.WitnessUnwitnessable {
					continue
				}
				switch r.Result {
				case verdict.ExecutedPass, verdict.Inapplicable:
					passed++
				default:
					failed = append(failed, r)
				}
			}
			if passed == 0 {
				t.Fatalf("no spec-profile id of %s ran (%v)", h.family, specProfiles(reg, h.family))
			}
			for _, msg := range h.blame(reg, corpus, failed) {
				t.Error(msg)
			}
		})
	}
	for i, rd := range readings {
		t.Run(rd.Name, func(t *testing.T) {
			if err := binding[i].err; err != nil {
				t.Fatal(err)
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
			for _, r := range binding[i].res.Rows {
				for _, id := range rd.Binding {
					if r.ID == id && r.Result != verdict.ExecutedFail {
						t.Errorf("binding id %s is %s under the reading, want executed-fail: the reading did not take effect", id, r.Result)
					}
				}
			}
		})
	}
}

// readingHost is one host of faithful readings: the readings of a family
// that run together, or one that runs alone.
type readingHost struct {
	family   string
	readings []sabotage.Reading
}

// readingHosts puts the readings of each family on one host, and each
// reading marked Alone on one of its own.
func readingHosts(readings []sabotage.Reading) []readingHost {
	var hosts []readingHost
	byFamily := map[string]int{}
	for _, rd := range readings {
		if rd.Alone != "" {
			hosts = append(hosts, readingHost{family: rd.Family, readings: []sabotage.Reading{rd}})
			continue
		}
		i, ok := byFamily[rd.Family]
		if !ok {
			i = len(hosts)
			byFamily[rd.Family] = i
			hosts = append(hosts, readingHost{family: rd.Family})
		}
		hosts[i].readings = append(hosts[i].readings, rd)
	}
	return hosts
}

func (h readingHost) rule() sabotage.Rule {
	var rules []sabotage.Rule
	for _, rd := range h.readings {
		rules = append(rules, rd.Rule)
	}
	return sabotage.Combine(rules...)
}

func (h readingHost) name() string {
	var names []string
	for _, rd := range h.readings {
		names = append(names, rd.Name)
	}
	return strings.Join(names, "+")
}

// blame says, for each spec-profile row the host failed, whose choice it
// fails: with several readings on the host, the failed ids run again under
// each reading alone.
func (h readingHost) blame(reg *scenarios.Registry, corpus *scenarios.Corpus, failed []verdict.Row) []string {
	if len(failed) == 0 {
		return nil
	}
	say := func(host string, r verdict.Row) string {
		e, _ := reg.Lookup(r.ID)
		return fmt.Sprintf("a host that %s: %s (%s) is %s: %s", host, r.ID, e.Profile, r.Result, firstLine(r.Detail))
	}
	var out []string
	if len(h.readings) == 1 {
		for _, r := range failed {
			out = append(out, say(h.readings[0].Host, r))
		}
		return out
	}
	var tags []string
	for _, r := range failed {
		tags = append(tags, "@req:"+r.ID)
	}
	alone := map[string]bool{}
	for _, rd := range h.readings {
		res, err := runUnder(reg, corpus, rd.Rule, strings.Join(tags, ","))
		if err != nil {
			out = append(out, fmt.Sprintf("running the failed ids under %s alone: %v", rd.Name, err))
			continue
		}
		for _, r := range res.Rows {
			if r.Result != verdict.ExecutedPass && r.Result != verdict.Inapplicable {
				alone[r.ID] = true
				out = append(out, say(rd.Host, r))
			}
		}
	}
	for _, r := range failed {
		if !alone[r.ID] {
			out = append(out, say("makes the choices of "+h.name()+" at once (each alone passes it)", r))
		}
	}
	return out
}

// specTags selects the spec profiles of family.
func specTags(reg *scenarios.Registry, family string) string {
	var tags []string
	for _, p := range specProfiles(reg, family) {
		tags = append(tags, "@profile:"+p)
	}
	return strings.Join(tags, ",")
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
