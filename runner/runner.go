// Package runner runs the feature corpus against a target with godog and
// turns what happened into verdicts: one per scenario, and per requirement
// the worst of its scenarios'.
package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/redact"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/steps/agl"
	"github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/steps/contractrefine"
	"github.com/parley-conformance/parley/steps/openwop"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
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
	// Concurrency is how many scenarios run at once (0: DefaultConcurrency).
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
	// Fixtures is the run's fixture set; nil builds a new one (a new salt
	// and TLS material) for hosts the target starts itself.
	Fixtures *fixtures.Set
	// Isolate gives every scenario a host of its own (the oracle that
	// verdicts do not depend on scenarios sharing hosts).
	Isolate bool
	// ExclusiveLast runs the scenarios that take their host alone after all
	// the others, one at a time: for hosts the suite cannot start afresh
	// (the url target), where an exclusive scenario changes the one host
	// every scenario of its fixture shares.
	ExclusiveLast bool
}

// ScenarioResult is one scenario's verdict (verdict.ScenarioResult).
type ScenarioResult = verdict.ScenarioResult

// Row is one requirement's verdict (verdict.Row).
type Row = verdict.Row

// Result is a whole run.
type Result struct {
	Seed      int64
	Tags      string
	Profiles  []string
	Started   time.Time
	Finished  time.Time
	Scenarios []ScenarioResult
	Rows      []Row
	// Facts are what scenarios recorded about the host (World.Fact), every
	// value of every key, sorted.
	Facts map[string][]string
	// Hosts and Restarts count the hosts the target started for the run
	// (fresh ones) and the restarts of a host on its state, when the
	// target starts hosts (target.Counter); -1 when it does not.
	Hosts, Restarts int
}

// DefaultConcurrency follows the machine: scenarios mostly wait on hosts
// (their commits reach the disk before they answer) and clocks, so several
// per core keep it busy (on 2 cores, 16 at once took two thirds of the wall
// time 8 did, for the same CPU); bounded so a large machine does not start
// hundreds of hosts at once.
func DefaultConcurrency() int {
	return min(max(8*runtime.GOMAXPROCS(0), 8), 32)
}

// SuiteFaults lists the scenarios a bug in parley blocked.
func (r *Result) SuiteFaults() []ScenarioResult {
	var out []ScenarioResult
	for _, s := range r.Scenarios {
		if s.Cause == verdict.CauseSuiteFault {
			out = append(out, s)
		}
	}
	return out
}

// Executed reports whether any requirement was witnessed at all (passed or
// failed): a run that witnessed nothing certifies nothing.
func (r *Result) Executed() bool {
	for _, row := range r.Rows {
		if row.Result == verdict.ExecutedPass || row.Result == verdict.ExecutedFail {
			return true
		}
	}
	return false
}

var (
	catalogOnce sync.Once
	catalog     *steps.Catalog
)

// Catalog is the suite's step definitions, built (and their patterns
// compiled) once per process.
func Catalog() *steps.Catalog {
	catalogOnce.Do(func() {
		c := &steps.Catalog{}
		steps.Common(c)
		agl.Register(c)
		agtp.Register(c)
		contractrefine.Register(c)
		openwop.Register(c)
		catalog = c
	})
	return catalog
}

// Run executes the selected scenarios and computes verdicts.
func Run(ctx context.Context, reg *scenarios.Registry, corpus *scenarios.Corpus, opt Options) (*Result, error) {
	if opt.Target == nil {
		return nil, fmt.Errorf("%w: no target", ErrUsage)
	}
	// A scenario naming a fixture the suite does not publish is a bug in
	// the suite, caught before any host starts.
	if err := scenarios.CheckFixtures(corpus, fixtures.FamilyOf); err != nil {
		return nil, fmt.Errorf("suite fault: %w", err)
	}
	filter, err := scenarios.ParseFilter(opt.Tags)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	profiles, err := knownProfiles(reg, opt.Profiles)
	if err != nil {
		return nil, err
	}

	corpus, err = longestWaitsFirst(corpus, Catalog(), func(s scenarios.Scenario) bool {
		return filter.Match(s.Tags)
	}, func(s scenarios.Scenario) bool {
		return filter.Match(s.Tags) && (profiles == nil || profiles[s.Profile])
	})
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

	if opt.Fixtures == nil {
		env, err := fixtures.NewEnv("")
		if err != nil {
			return nil, fmt.Errorf("suite fault: %w", err)
		}
		opt.Fixtures = fixtures.NewSet(env)
		defer opt.Fixtures.Close()
	}
	if err := opt.Fixtures.ServeFakes(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if len(selected) > 0 {
		got, facts, err := runPasses(ctx, reg, corpus, selected, godogFilter(filter, profiles), seed, opt)
		if err != nil {
			return nil, err
		}
		res.Scenarios, res.Facts = got, facts
	}
	res.Hosts, res.Restarts = -1, -1
	if c, ok := opt.Target.(target.Counter); ok {
		res.Hosts, res.Restarts = c.Started()
	}
	res.Finished = time.Now().UTC()
	res.Scenarios = resolvePreconditions(res.Scenarios)
	res.Rows = rows(res.Scenarios, profileSkipped)
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

// runPasses runs the selection in one godog pass, or, with ExclusiveLast,
// the shared scenarios first and then the exclusive ones one at a time.
func runPasses(ctx context.Context, reg *scenarios.Registry, corpus *scenarios.Corpus, selected []scenarios.Scenario, tags string, seed int64, opt Options) ([]ScenarioResult, map[string][]string, error) {
	var shared, exclusive []scenarios.Scenario
	for _, s := range selected {
		if s.Exclusive {
			exclusive = append(exclusive, s)
		} else {
			shared = append(shared, s)
		}
	}
	if !opt.ExclusiveLast || len(exclusive) == 0 || len(shared) == 0 {
		return runGodog(ctx, reg, corpus, selected, tags, seed, opt)
	}
	first, facts, err := runGodog(ctx, reg, corpus, shared, conjoin(tags, "~"+scenarios.ExclusiveTag), seed, opt)
	if err != nil {
		return nil, nil, err
	}
	last := opt
	last.Concurrency = 1
	if opt.CucumberJSON != "" {
		last.CucumberJSON = opt.CucumberJSON + ".exclusive"
		defer os.Remove(last.CucumberJSON)
	}
	second, facts2, err := runGodog(ctx, reg, corpus, exclusive, conjoin(tags, scenarios.ExclusiveTag), seed, last)
	if err != nil {
		return nil, nil, err
	}
	if opt.CucumberJSON != "" {
		if err := appendCucumber(opt.CucumberJSON, last.CucumberJSON); err != nil {
			return nil, nil, err
		}
	}
	for k, vs := range facts2 {
		facts[k] = append(facts[k], vs...)
		sort.Strings(facts[k])
		facts[k] = slices.Compact(facts[k])
	}
	all := append(first, second...)
	sort.Slice(all, func(i, j int) bool {
		if all[i].URI != all[j].URI {
			return all[i].URI < all[j].URI
		}
		return all[i].Line < all[j].Line
	})
	return all, facts, nil
}

// conjoin adds a conjunct to every alternative of a godog tag expression
// (godog has no parentheses: "," separates alternatives of "&&" terms).
func conjoin(tags, term string) string {
	if strings.TrimSpace(tags) == "" {
		return term
	}
	alts := strings.Split(tags, ",")
	for i, a := range alts {
		alts[i] = strings.TrimSpace(a) + " && " + term
	}
	return strings.Join(alts, ",")
}

// appendCucumber appends the features of the cucumber report at extra to
// the one at path (both JSON arrays).
func appendCucumber(path, extra string) error {
	var a, b []json.RawMessage
	for _, x := range []struct {
		file string
		into *[]json.RawMessage
	}{{path, &a}, {extra, &b}} {
		raw, err := os.ReadFile(x.file)
		if err != nil {
			return fmt.Errorf("cucumber report: %w", err)
		}
		if err := json.Unmarshal(raw, x.into); err != nil {
			return fmt.Errorf("cucumber report %s: %w", x.file, err)
		}
	}
	out, err := json.Marshal(append(a, b...))
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func runGodog(ctx context.Context, reg *scenarios.Registry, corpus *scenarios.Corpus, selected []scenarios.Scenario, tags string, seed int64, opt Options) ([]ScenarioResult, map[string][]string, error) {
	// Results are matched to scenarios by godog's pickle id, which names
	// one example row of an outline exactly.
	byPickle := make(map[string]scenarios.Scenario, len(selected))
	for _, s := range selected {
		byPickle[s.PickleID] = s
	}
	preconditions := func(id string) (steps.PreconditionInfo, bool) {
		p, ok := reg.LookupPrecondition(id)
		return steps.PreconditionInfo{Statement: p.Statement, ReliesOn: p.ReliesOn}, ok
	}

	var (
		mu      sync.Mutex
		results []ScenarioResult
		seen    = map[string]bool{}
		facts   = map[string]map[string]bool{}
		strays  []string
		began   = map[string]time.Time{}
		prog    = newProgress(opt.Progress, opt.Live, len(selected), nil)
	)
	record := func(pickle *godog.Scenario, w *steps.World, err error) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := byPickle[pickle.Id]
		if !ok || seen[pickle.Id] || s.URI != pickle.Uri || s.Name != pickle.Name {
			strays = append(strays, fmt.Sprintf("%s %q (pickle %s)", pickle.Uri, pickle.Name, pickle.Id))
			return
		}
		seen[pickle.Id] = true
		for k, vs := range w.Facts() {
			if facts[k] == nil {
				facts[k] = map[string]bool{}
			}
			for _, v := range vs {
				facts[k][v] = true
			}
		}
		r := classify(w, err)
		r.URI, r.Line, r.Name, r.ReqIDs = s.URI, s.Line, s.Name, s.ReqIDs
		if t0, ok := began[pickle.Id]; ok {
			r.DurationMs = time.Since(t0).Milliseconds()
		}
		results = append(results, r)
		prog.finished(r)
	}

	files := make([]godog.Feature, 0, len(corpus.Files))
	for _, f := range corpus.Files {
		files = append(files, godog.Feature{Name: f.Name, Contents: f.Contents})
	}
	// godog's cucumber formatter writes its report a rune at a time: into
	// a file directly that is a system call per rune (seconds for the
	// corpus), so it writes into a buffer that is flushed once.
	format, output := "progress", io.Writer(io.Discard)
	flush := func() error { return nil }
	if opt.CucumberJSON != "" {
		f, err := os.Create(opt.CucumberJSON)
		if err != nil {
			return nil, nil, fmt.Errorf("cucumber report: %w", err)
		}
		defer f.Close()
		buf := bufio.NewWriterSize(f, 1<<20)
		format, output = "cucumber", buf
		flush = func() error {
			if err := buf.Flush(); err != nil {
				return fmt.Errorf("cucumber report: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("cucumber report: %w", err)
			}
			return nil
		}
	}
	conc := opt.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency()
	}
	cat := Catalog()
	suite := godog.TestSuite{
		Name: "parley",
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			sc.Before(func(ctx context.Context, pickle *godog.Scenario) (context.Context, error) {
				mu.Lock()
				s := byPickle[pickle.Id]
				began[pickle.Id] = time.Now()
				mu.Unlock()
				w := steps.NewWorld(opt.Target, steps.Scenario{ReqIDs: s.ReqIDs, Preconditions: preconditions,
					ID: pickle.Id, Fixture: s.Fixture, Exclusive: s.Exclusive, Fixtures: opt.Fixtures, Isolate: opt.Isolate})
				// godog matches a scenario's steps only after its Before
				// hooks, so binding here what the steps match is in time.
				texts := make([]string, len(pickle.Steps))
				for i, st := range pickle.Steps {
					texts[i] = st.Text
				}
				cat.BindSteps(sc, texts)
				return steps.With(ctx, w), nil
			})
			sc.After(func(ctx context.Context, pickle *godog.Scenario, err error) (context.Context, error) {
				w := steps.From(ctx)
				w.Close()
				record(pickle, w, err)
				w.Release()
				return ctx, nil
			})
		},
		Options: &godog.Options{
			Format:          format,
			Output:          output,
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
	if err := flush(); err != nil {
		return nil, nil, err
	}
	if status == 2 {
		return nil, nil, errors.New("godog refused its options (see the message above)")
	}
	if len(strays) > 0 {
		return nil, nil, fmt.Errorf("suite fault: godog ran %d scenario(s) the selection does not name: %s", len(strays), strings.Join(strays, "; "))
	}
	var missing []string
	for id, s := range byPickle {
		if !seen[id] {
			missing = append(missing, fmt.Sprintf("%s:%d %s", s.URI, s.Line, s.Name))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, nil, fmt.Errorf("suite fault: %d selected scenario(s) did not run: %s", len(missing), strings.Join(missing, "; "))
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].URI != results[j].URI {
			return results[i].URI < results[j].URI
		}
		return results[i].Line < results[j].Line
	})
	out := make(map[string][]string, len(facts))
	for k, vs := range facts {
		for v := range vs {
			out[k] = append(out[k], v)
		}
		sort.Strings(out[k])
	}
	return results, out, nil
}

// classify turns how a scenario ended into a verdict. The verdict's type
// comes from the Go value a step ended with (steps.Outcome), never from the
// text of an error; every detail is redacted of the scenario's secrets.
func classify(w *steps.World, err error) (r ScenarioResult) {
	r = ScenarioResult{Assertions: w.Assertions()}
	notes := strings.Join(w.Notes(), "; ")
	defer func() {
		// What the scenario noted (World.Note) reaches its detail whatever
		// its verdict: a pass carries it alone.
		switch {
		case notes == "":
		case r.Detail == "":
			r.Detail = w.Redact(notes)
		default:
			r.Detail += " (noted: " + w.Redact(notes) + ")"
		}
	}()
	if o := w.Outcome(); o != nil {
		r.Result, r.Cause, r.ReliesOn, r.Detail = o.Verdict, o.Cause, o.ReliesOn, w.Redact(o.Detail)
		r.Exchange = exchange(w, o.Exchange)
		return r
	}
	switch {
	case err == nil && r.Assertions == 0:
		// A pass that asserted nothing about what the host sent proves nothing.
		r.Result, r.Cause, r.Detail = verdict.Blocked, verdict.CauseSuiteFault, "suite fault: vacuous pass refused: the scenario made no assertion about what the host sent"
	case err == nil:
		r.Result = verdict.ExecutedPass
	default:
		// No step recorded an outcome, yet godog saw an error: an undefined,
		// ambiguous or pending step, or a failing hook. All are parley's.
		r.Result, r.Cause, r.Detail = verdict.Blocked, verdict.CauseSuiteFault, "suite fault: "+w.Redact(err.Error())
	}
	return r
}

// rows folds scenario verdicts into requirement verdicts.
// resolvePreconditions turns a scenario blocked on a precondition into the
// host's failure when every requirement the precondition relies on passed
// in the scenarios that witness it: the setup failed in this scenario
// alone, so the host behaves differently here, and that is a failure of the
// requirement under test, not a root cause elsewhere to fix first. Only the
// scenarios that witness a requirement directly decide whether it passed.
func resolvePreconditions(results []ScenarioResult) []ScenarioResult {
	var direct []ScenarioResult
	for _, s := range results {
		if s.Cause != verdict.CausePrecondition {
			direct = append(direct, s)
		}
	}
	passed := map[string]bool{}
	for _, r := range rows(direct, nil) {
		passed[r.ID] = r.Result == verdict.ExecutedPass
	}
	out := make([]ScenarioResult, len(results))
	for i, s := range results {
		out[i] = s
		if s.Cause != verdict.CausePrecondition || len(s.ReliesOn) == 0 {
			continue
		}
		all := true
		for _, id := range s.ReliesOn {
			all = all && passed[id]
		}
		if !all {
			continue
		}
		out[i].Result, out[i].Cause = verdict.ExecutedFail, ""
		out[i].Detail = fmt.Sprintf("a setup failed in this scenario though %s passed in the scenarios that witness it, so the host behaves otherwise here: %s",
			strings.Join(s.ReliesOn, ", "), s.Detail)
		out[i].ReliesOn = nil
	}
	return out
}

func rows(results []ScenarioResult, profileSkipped map[string]bool) []Row {
	byID := map[string]*Row{}
	for _, s := range results {
		for _, id := range s.ReqIDs {
			r := byID[id]
			if r == nil {
				r = &Row{ID: id}
				byID[id] = r
			}
			r.Scenarios = append(r.Scenarios, s)
		}
	}
	out := make([]Row, 0, len(byID)+len(profileSkipped))
	for _, r := range byID {
		r.Fold()
		out = append(out, *r)
	}
	for id := range profileSkipped {
		if _, ran := byID[id]; !ran {
			out = append(out, Row{ID: id, Result: verdict.Skipped, Detail: "its profile is not certified in this run"})
		}
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

// exchange keeps the last exchange of a scenario that did not pass, for a
// reader of the report: bodies clipped, every header and body redacted of
// the scenario's secrets and of anything that looks like a credential.
func exchange(w *steps.World, r *steps.Response) *verdict.Exchange {
	if r == nil {
		return nil
	}
	headers := func(h map[string][]string) map[string][]string {
		if len(h) == 0 {
			return nil
		}
		out := make(map[string][]string, len(h))
		for k, vs := range h {
			for _, v := range vs {
				// Redacted as a header line, so that "Authorization: Bearer x"
				// is recognized for what it is.
				red, ok := strings.CutPrefix(w.Redact(k+": "+v), k+": ")
				if !ok {
					red = redact.Mark
				}
				out[k] = append(out[k], red)
			}
		}
		return out
	}
	body := func(b []byte) string {
		s := strings.ToValidUTF8(string(b), "\uFFFD")
		if len(s) > verdict.MaxExchangeBody {
			s = s[:verdict.MaxExchangeBody] + fmt.Sprintf("… (%d bytes in all)", len(b))
		}
		return w.Redact(s)
	}
	return &verdict.Exchange{Method: r.Method, Target: r.URL, RequestHeaders: headers(r.ReqHeader), RequestBody: body(r.ReqBody),
		Status: r.Status, ResponseHeaders: headers(r.Header), ResponseBody: body(r.Body)}
}
