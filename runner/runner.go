// Package runner runs the feature corpus against a target with godog and
// turns what happened into verdicts: one per scenario, and per requirement
// the worst of its scenarios'.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/steps/agl"
	"github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/steps/contractrefine"
	"github.com/parley-conformance/parley/steps/openwop"
	"github.com/parley-conformance/parley/target"
)

// ErrUsage marks a mistake in how the run was asked for (exit code 2).
var ErrUsage = errors.New("usage")

// Options says what to run and how.
type Options struct {
	Target target.Target
	// Tags is a godog tag expression; empty selects everything.
	Tags string
	// Profiles to certify; empty means every profile. Requirements of other
	// profiles are reported skipped.
	Profiles []string
	// Concurrency is how many scenarios run at once (default 4).
	Concurrency int
	// Seed orders scenarios; 0 picks one at random. The seed used is in the result.
	Seed int64
	// Progress receives a line per finished scenario; nil for none.
	Progress io.Writer
	// Live redraws one status line on Progress instead (for a terminal);
	// scenarios that did not pass still get a line of their own.
	Live bool
	// CucumberJSON, when set, is the path godog writes its cucumber report to.
	CucumberJSON string
}

// ScenarioResult is one scenario's verdict.
type ScenarioResult struct {
	URI        string   `json:"uri"`
	Line       int64    `json:"line"`
	Name       string   `json:"name"`
	ReqIDs     []string `json:"-"`
	Result     string   `json:"result"`
	Assertions int      `json:"assertions"`
	Detail     string   `json:"detail,omitempty"`
}

// Row is one requirement's verdict.
type Row struct {
	ID         string           `json:"id"`
	Scenarios  []ScenarioResult `json:"scenarios"`
	Result     string           `json:"result"`
	Assertions int              `json:"assertions"`
	Detail     string           `json:"detail,omitempty"`
}

// Result is a whole run.
type Result struct {
	Seed      int64
	Tags      string
	Profiles  []string
	Started   time.Time
	Finished  time.Time
	Scenarios []ScenarioResult
	Rows      []Row
}

// severity orders verdicts from best to worst; a requirement takes the worst.
var severity = map[string]int{
	steps.ExecutedPass: 0,
	steps.Inapplicable: 1,
	steps.Skipped:      2,
	steps.Blocked:      3,
	steps.ExecutedFail: 4,
}

// Worst returns the worse of two verdicts.
func Worst(a, b string) string {
	if severity[b] > severity[a] {
		return b
	}
	return a
}

// Run executes the selected scenarios and computes verdicts.
func Run(ctx context.Context, reg *scenarios.Registry, corpus *scenarios.Corpus, opt Options) (*Result, error) {
	if opt.Target == nil {
		return nil, fmt.Errorf("%w: no target", ErrUsage)
	}
	filter, err := scenarios.ParseFilter(opt.Tags)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	profiles, err := knownProfiles(reg, opt.Profiles)
	if err != nil {
		return nil, err
	}

	// Select scenarios ourselves, so that an empty selection is an error and
	// the godog filter below can be checked against it.
	var selected []scenarios.Scenario
	profileSkipped := map[string]bool{}
	for _, s := range corpus.Scenarios {
		if !filter.Match(s.Tags) {
			continue
		}
		if profiles != nil && !profiles[s.Profile] {
			for _, id := range s.ReqIDs {
				profileSkipped[id] = true
			}
			continue
		}
		selected = append(selected, s)
	}
	if len(selected) == 0 && len(profileSkipped) == 0 {
		return nil, fmt.Errorf("%w: tag filter %q selects no scenario (see `parley requirements` for ids and profiles)", ErrUsage, opt.Tags)
	}

	seed := opt.Seed
	if seed == 0 {
		seed = rand.Int64N(1<<53) + 1
	}
	res := &Result{Seed: seed, Tags: opt.Tags, Started: time.Now().UTC()}
	for p := range profiles {
		res.Profiles = append(res.Profiles, p)
	}
	sort.Strings(res.Profiles)

	if len(selected) > 0 {
		got, err := runGodog(ctx, corpus, selected, godogFilter(filter, profiles), seed, opt)
		if err != nil {
			return nil, err
		}
		res.Scenarios = got
	}
	res.Finished = time.Now().UTC()
	res.Rows = rows(reg, res.Scenarios, profileSkipped)
	return res, nil
}

func knownProfiles(reg *scenarios.Registry, want []string) (map[string]bool, error) {
	if len(want) == 0 {
		return nil, nil
	}
	all := map[string]bool{}
	for _, e := range reg.Entries {
		all[e.Profile] = true
	}
	out := map[string]bool{}
	for _, p := range want {
		if !all[p] {
			var names []string
			for n := range all {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("%w: unknown profile %q (known: %s)", ErrUsage, p, strings.Join(names, ", "))
		}
		out[p] = true
	}
	return out, nil
}

// godogFilter combines the user's filter with the profile selection. godog
// has no parentheses, so (A, B) && (p1, p2) is distributed into ORs of ANDs.
func godogFilter(f *scenarios.Filter, profiles map[string]bool) string {
	user := f.String()
	if profiles == nil {
		return user
	}
	var ps []string
	for p := range profiles {
		ps = append(ps, scenarios.ProfileTagPrefix+p)
	}
	sort.Strings(ps)
	if user == "" {
		return strings.Join(ps, ",")
	}
	var alts []string
	for _, alt := range strings.Split(user, ",") {
		for _, p := range ps {
			alts = append(alts, strings.TrimSpace(alt)+" && "+p)
		}
	}
	return strings.Join(alts, ",")
}

func scenarioKey(uri string, name string, tags []string) string {
	return uri + "\x00" + name + "\x00" + strings.Join(tags, " ")
}

func runGodog(ctx context.Context, corpus *scenarios.Corpus, selected []scenarios.Scenario, tags string, seed int64, opt Options) ([]ScenarioResult, error) {
	// Index the selection; outline rows share a name, so several scenarios
	// may share a key and are matched in turn.
	byKey := map[string][]scenarios.Scenario{}
	for _, s := range selected {
		k := scenarioKey(s.URI, s.Name, s.Tags)
		byKey[k] = append(byKey[k], s)
	}

	var (
		mu        sync.Mutex
		results   []ScenarioResult
		done      int
		notPassed int
		total     = len(selected)
	)
	record := func(sc *godog.Scenario, w *steps.World, err error) {
		var tags []string
		for _, t := range sc.Tags {
			tags = append(tags, t.Name)
		}
		r := classify(w, err)
		r.Name = sc.Name
		r.URI = sc.Uri
		mu.Lock()
		defer mu.Unlock()
		k := scenarioKey(sc.Uri, sc.Name, tags)
		if q := byKey[k]; len(q) > 0 {
			r.Line, r.ReqIDs = q[0].Line, q[0].ReqIDs
			byKey[k] = q[1:]
		} else {
			r.Result, r.Detail = steps.Blocked, "suite fault: godog ran a scenario the selection did not contain"
		}
		results = append(results, r)
		done++
		if r.Result != steps.ExecutedPass {
			notPassed++
		}
		switch {
		case opt.Progress == nil:
		case opt.Live:
			if r.Result != steps.ExecutedPass {
				fmt.Fprintf(opt.Progress, "\r\033[K%-13s %s:%d %s\n", r.Result, r.URI, r.Line, r.Name)
			}
			fmt.Fprintf(opt.Progress, "\r\033[K[%d/%d] %d not passed · %s", done, total, notPassed, clip(r.Name, 60))
			if done == total {
				fmt.Fprintln(opt.Progress)
			}
		default:
			fmt.Fprintf(opt.Progress, "[%*d/%d] %-13s %s:%d %s\n", len(fmt.Sprint(total)), done, total, r.Result, r.URI, r.Line, r.Name)
		}
	}

	files := make([]godog.Feature, 0, len(corpus.Files))
	for _, f := range corpus.Files {
		files = append(files, godog.Feature{Name: f.Name, Contents: f.Contents})
	}
	format := "progress"
	if opt.CucumberJSON != "" {
		format = "cucumber:" + opt.CucumberJSON
	}
	conc := opt.Concurrency
	if conc <= 0 {
		conc = 4
	}
	suite := godog.TestSuite{
		Name: "parley",
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
				return steps.With(ctx, steps.NewWorld(opt.Target)), nil
			})
			sc.After(func(ctx context.Context, s *godog.Scenario, err error) (context.Context, error) {
				w := steps.From(ctx)
				w.Close()
				record(s, w, err)
				return ctx, nil
			})
			steps.RegisterCommon(sc)
			agl.Register(sc)
			agtp.Register(sc)
			contractrefine.Register(sc)
			openwop.Register(sc)
		},
		Options: &godog.Options{
			Format:          format,
			Output:          io.Discard,
			Strict:          true,
			NoColors:        true,
			Concurrency:     conc,
			Randomize:       seed,
			Tags:            tags,
			FeatureContents: files,
			DefaultContext:  ctx,
		},
	}
	// godog reports its own failures through the exit status; the verdicts
	// come from the hooks above, so the status is only checked for option errors.
	status := suite.Run()
	os.Unsetenv("GODOG_SEED")
	if status == 2 {
		return nil, errors.New("godog refused its options (see the message above)")
	}
	var missing []string
	for _, q := range byKey {
		for _, s := range q {
			missing = append(missing, fmt.Sprintf("%s:%d %s", s.URI, s.Line, s.Name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("suite fault: %d selected scenario(s) did not run: %s", len(missing), strings.Join(missing, "; "))
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].URI != results[j].URI {
			return results[i].URI < results[j].URI
		}
		return results[i].Line < results[j].Line
	})
	return results, nil
}

// classify turns how a scenario ended into a verdict.
func classify(w *steps.World, err error) ScenarioResult {
	r := ScenarioResult{Assertions: w.Assertions()}
	if o := w.Outcome(); o != nil {
		r.Result, r.Detail = o.Verdict, o.Reason
		return r
	}
	switch {
	case err == nil && r.Assertions == 0:
		// A pass that asserted nothing proves nothing.
		r.Result, r.Detail = steps.ExecutedFail, "vacuous pass refused: the scenario made no assertion"
	case err == nil:
		r.Result = steps.ExecutedPass
	case errors.Is(err, godog.ErrUndefined), errors.Is(err, godog.ErrPending), errors.Is(err, godog.ErrAmbiguous):
		r.Result, r.Detail = steps.Blocked, "suite fault: "+err.Error()
	case errors.Is(err, godog.ErrSkip):
		r.Result, r.Detail = steps.Blocked, "suite fault: a step skipped without saying why: "+err.Error()
	case strings.Contains(err.Error(), "scenario error:"):
		r.Result, r.Detail = steps.Blocked, "suite fault: "+err.Error()
	default:
		r.Result, r.Detail = steps.ExecutedFail, err.Error()
	}
	return r
}

// rows folds scenario verdicts into requirement verdicts.
func rows(reg *scenarios.Registry, results []ScenarioResult, profileSkipped map[string]bool) []Row {
	byID := map[string]*Row{}
	for _, s := range results {
		for _, id := range s.ReqIDs {
			r := byID[id]
			if r == nil {
				r = &Row{ID: id, Result: steps.ExecutedPass}
				byID[id] = r
			}
			r.Scenarios = append(r.Scenarios, s)
			r.Assertions += s.Assertions
			r.Result = Worst(r.Result, s.Result)
		}
	}
	for id := range profileSkipped {
		if _, ran := byID[id]; !ran {
			byID[id] = &Row{ID: id, Result: steps.Skipped, Detail: "its profile is not certified in this run"}
		}
	}
	out := make([]Row, 0, len(byID))
	for _, r := range byID {
		if r.Result != steps.ExecutedPass && r.Detail == "" {
			for _, s := range r.Scenarios {
				if s.Result == r.Result {
					r.Detail = fmt.Sprintf("%s:%d %s: %s", s.URI, s.Line, s.Name, s.Detail)
					break
				}
			}
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
