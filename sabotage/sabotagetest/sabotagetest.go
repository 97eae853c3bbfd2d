// Package sabotagetest runs the sabotage proofs for one family at a time, so
// that each family's proofs are a test package of their own
// (sabotage/shard/<family>): go test runs them in parallel, and none comes
// near go test's default timeout. The rules and scenarios of a family are
// found by their ids and paths, not listed, so a new rule or scenario is
// picked up by its family's shard without an edit here.
package sabotagetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/lazyfs"
	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Load reads the registry and the corpus.
func Load(t testing.TB) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	return reg, corpus
}

// FamilyOfRule is the family a rule breaks: its requirement id's first
// segment.
func FamilyOfRule(r sabotage.Rule) string { f, _, _ := strings.Cut(r.ID, "."); return f }

// FamilyOfScenario is the family of a scenario: its feature file's directory.
func FamilyOfScenario(s scenarios.Scenario) string { f, _, _ := strings.Cut(s.URI, "/"); return f }

// Families lists every family a rule or a scenario belongs to.
func Families(corpus *scenarios.Corpus) []string {
	set := map[string]bool{}
	for _, r := range sabotage.Rules() {
		set[FamilyOfRule(r)] = true
	}
	for _, s := range corpus.Scenarios {
		set[FamilyOfScenario(s)] = true
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Shards lists the families that have a shard package: a directory
// sabotage/shard/<family>_<part>.
func Shards(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(repoRoot(t), "sabotage", "shard"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() {
			f, _, _ := strings.Cut(e.Name(), "_")
			set[f] = true
		}
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Here is the shard the calling test package is: its directory
// sabotage/shard/<family>_<part> names the family and the part (from 1),
// and the number of directories of that family is the number of parts. A
// family is split into more parts by copying one of its directories under
// the next number; nothing else changes.
func Here(t testing.TB) (family string, part, parts int) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	family, n, ok := strings.Cut(filepath.Base(wd), "_")
	if _, err := fmt.Sscanf(n, "%d", &part); !ok || err != nil || part < 1 {
		t.Fatalf("a shard package's directory is sabotage/shard/<family>_<part>, not %s", wd)
	}
	ents, err := os.ReadDir(filepath.Dir(wd))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if f, _, _ := strings.Cut(e.Name(), "_"); e.IsDir() && f == family {
			parts++
		}
	}
	if part > parts {
		t.Fatalf("shard %s is part %d of %d: number the parts of a family from 1", wd, part, parts)
	}
	return family, part, parts
}

// Partition splits the rules of a family into parts, each with the
// scenarios it proves. A scenario runs under the rules of its requirement
// ids only (a rule runs @req:<its id>), so requirement ids that share a
// scenario are kept in one part, and every scenario's rules are in its part;
// the groups are dealt to the parts by size, largest first, in a fixed
// order. It returns the rule keys and the scenario keys of part (from 1).
func Partition(corpus *scenarios.Corpus, rules []sabotage.Rule, parts, part int) (map[string]bool, map[string]bool) {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		parent[x] = x
		return x
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra != rb {
			if ra < rb {
				parent[rb] = ra
			} else {
				parent[ra] = rb
			}
		}
	}
	for _, r := range rules {
		find(r.ID)
	}
	for _, s := range corpus.Scenarios {
		for _, id := range s.ReqIDs[min(1, len(s.ReqIDs)):] {
			union(s.ReqIDs[0], id)
		}
	}
	// Weight: scenario runs, the rules of a group times its scenarios.
	weight := map[string]int{}
	for _, r := range rules {
		weight[find(r.ID)]++
	}
	var groups []string
	for g := range weight {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if weight[groups[i]] != weight[groups[j]] {
			return weight[groups[i]] > weight[groups[j]]
		}
		return groups[i] < groups[j]
	})
	load := make([]int, parts)
	owner := map[string]int{}
	for _, g := range groups {
		best := 0
		for i := range load {
			if load[i] < load[best] {
				best = i
			}
		}
		owner[g] = best + 1
		load[best] += weight[g]
	}
	ruleKeys, scenarioKeys := map[string]bool{}, map[string]bool{}
	for _, r := range rules {
		if owner[find(r.ID)] == part {
			ruleKeys[r.Key()] = true
		}
	}
	for _, s := range corpus.Scenarios {
		in := false
		for _, id := range s.ReqIDs {
			in = in || owner[find(id)] == part
		}
		// A scenario of no rule's requirement is the first part's to
		// report.
		if in || (part == 1 && !hasRule(s, weight, find)) {
			scenarioKeys[ScenarioKey(s.URI, s.Line)] = true
		}
	}
	return ruleKeys, scenarioKeys
}

func hasRule(s scenarios.Scenario, weight map[string]int, find func(string) string) bool {
	for _, id := range s.ReqIDs {
		if weight[find(id)] > 0 {
			return true
		}
	}
	return false
}

// MatrixHere runs the part of its family's matrix the calling shard package
// is (Here), and, in the first part, the family's pass-through control.
// The two run side by side: each mostly waits on hosts.
func MatrixHere(t *testing.T) {
	family, part, parts := Here(t)
	t.Run("matrix", func(t *testing.T) { t.Parallel(); matrix(t, family, part, parts, false) })
	if part == 1 && onlyIDs() == nil {
		t.Run("transparent", func(t *testing.T) { t.Parallel(); Transparent(t, family) })
	}
}

func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no source path")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// ScenarioKey names a scenario as docs/sabotage.md does.
func ScenarioKey(uri string, line int64) string { return fmt.Sprintf("features/%s:%d", uri, line) }

// Matrix runs each rule of family ("" for every family) against the
// scenarios of the requirement it breaks. Every rule must make that
// requirement executed-fail (a rule that breaks nothing the suite sees is
// dead), and every scenario of the family, every outline row, must end
// executed-fail under at least one rule (a check that can never fail is
// dead). The runs are independent and mostly wait on the network, so they
// are made concurrently (bounded). docs/sabotage.md lists, per scenario, the
// rules that fail it; Matrix holds the document to what it observed (for a
// family, to that family's rules and rows). With update set (and every
// family), it rewrites the document first.
func Matrix(t *testing.T, family string, update bool) { matrix(t, family, 1, 1, update) }

// MatrixModelSeed is the seed of the model-based requirements' sequences in
// the matrix (unless PARLEY_MODEL_SEED says another): with a fresh seed each
// run, a rule the models catch on most seeds, not all, could miss a row the
// document lists and fail a run that changed nothing.
const MatrixModelSeed = models.TestSeed

func matrix(t *testing.T, family string, part, parts int, update bool) {
	reg, corpus := Load(t)
	ctx := context.Background()
	// The matrix needs a model id's verdict, not its minimal sequence (the
	// replay proofs in sabotage/proofs hold shrinking to what it prints),
	// and model runs are serialized in a process (rapid's settings are
	// global): a failing row stops shrinking at once.
	settings := models.Settings{ShrinkTime: time.Millisecond}
	if os.Getenv(models.EnvSeed) == "" {
		settings.Seed = MatrixModelSeed
	}
	ctx = models.WithSettings(ctx, settings)
	rules := sabotage.Rules()
	if family != "" {
		var mine []sabotage.Rule
		for _, r := range rules {
			if FamilyOfRule(r) == family {
				mine = append(mine, r)
			}
		}
		rules = mine
	}
	var inPart map[string]bool
	if parts > 1 {
		var keep map[string]bool
		keep, inPart = Partition(corpus, rules, parts, part)
		var mine []sabotage.Rule
		for _, r := range rules {
			if keep[r.Key()] {
				mine = append(mine, r)
			}
		}
		rules = mine
	}
	only := onlyIDs()
	if only != nil {
		var mine []sabotage.Rule
		for _, r := range rules {
			if only[r.ID] {
				mine = append(mine, r)
			}
		}
		rules = mine
		if len(rules) == 0 {
			t.Skipf("%s names no id this part has a rule for", EnvIDs)
		}
	}
	type outcome struct {
		res  *runner.Result
		err  error
		took time.Duration
	}
	results := make([]outcome, len(rules))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, rule := range rules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			res, err := runner.Run(ctx, reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + rule.ID})
			results[i] = outcome{res, err, time.Since(start)}
		}()
	}
	wg.Wait()
	// The slowest runs, for whoever balances the shards (go test -v).
	slow := make([]int, len(rules))
	for i := range slow {
		slow[i] = i
	}
	sort.Slice(slow, func(a, b int) bool { return results[slow[a]].took > results[slow[b]].took })
	for _, i := range slow[:min(5, len(slow))] {
		detail, longest := "", verdict.ScenarioResult{}
		if r := results[i].res; r != nil {
			for _, row := range r.Rows {
				if row.ID == rules[i].ID {
					detail = row.Detail
				}
			}
			for _, sc := range r.Scenarios {
				if sc.DurationMs > longest.DurationMs {
					longest = sc
				}
			}
		}
		t.Logf("slowest: %s took %s, longest scenario %s:%d (%d ms, %s): %.300s", rules[i].Key(), results[i].took.Round(time.Millisecond),
			longest.URI, longest.Line, longest.DurationMs, longest.Result, detail)
	}

	failedBy := map[string][]string{}
	for i, rule := range rules {
		t.Run("rule/"+rule.Key(), func(t *testing.T) {
			if _, ok := reg.Lookup(rule.ID); !ok {
				t.Fatalf("a rule for %s, which is not in the registry", rule.ID)
			}
			r := results[i]
			if r.err != nil {
				t.Fatal(r.err)
			}
			var row *runner.Row
			for j := range r.res.Rows {
				if r.res.Rows[j].ID == rule.ID {
					row = &r.res.Rows[j]
				}
			}
			switch {
			case row != nil && noPowerCut(row.ID):
				t.Skipf("FUSE is not usable on this machine, so %s is blocked: %s", row.ID, row.Detail)
			case row == nil:
				t.Errorf("no row for %s in the result", rule.ID)
			case row.Result != verdict.ExecutedFail:
				t.Errorf("against a host that %s, %s is %s, want executed-fail (seed %d; %s)", rule.Broken, rule.ID, row.Result, r.res.Seed, row.Detail)
			}
			for _, s := range r.res.Scenarios {
				if s.Result == verdict.ExecutedFail {
					k := ScenarioKey(s.URI, s.Line)
					failedBy[k] = append(failedBy[k], rule.Key())
				}
			}
		})
	}

	var proofs []sabotage.Proof
	for _, s := range corpus.Scenarios {
		k := ScenarioKey(s.URI, s.Line)
		if (family != "" && FamilyOfScenario(s) != family) || (inPart != nil && !inPart[k]) || !taggedWithAny(s, only) {
			continue
		}
		proofs = append(proofs, sabotage.Proof{Scenario: k, Name: s.Name, ReqIDs: s.ReqIDs, FailedBy: failedBy[k]})
		if len(failedBy[k]) == 0 && !(len(s.ReqIDs) == 1 && noPowerCut(s.ReqIDs[0])) {
			t.Errorf("scenario %s %q fails against no sabotaged host: add a rule (sabotage/) that breaks what it checks", k, s.Name)
		}
	}

	path := filepath.Join(repoRoot(t), "docs", "sabotage.md")
	if update && family == "" {
		if err := os.WriteFile(path, []byte(sabotage.Matrix(rules, proofs)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	const regen = "regenerate it with PARLEY_UPDATE_DOCS=1 go test ./sabotage -run TestEveryScenarioFailsAgainstSomeSabotagedHost"
	if family == "" {
		head := sabotage.Matrix(rules, nil)
		if !strings.Contains(doc, head[:strings.Index(head, "## Scenarios")]) {
			t.Errorf("docs/sabotage.md does not list the current rules; %s", regen)
		}
	} else {
		for _, r := range rules {
			if !strings.Contains(doc, "\n| `"+r.Key()+"` |") {
				t.Errorf("docs/sabotage.md does not list rule %s; %s", r.Key(), regen)
			}
		}
	}
	listed := sabotage.ParseMatrix(doc)
	for _, p := range proofs {
		keys, ok := listed[p.Scenario]
		if !ok {
			t.Errorf("docs/sabotage.md does not list scenario %s; %s", p.Scenario, regen)
			continue
		}
		// The document lists every rule that failed the scenario when it
		// was generated; a run must see at least one of them fail it again
		// (a race may let another slip in a given run, never all of them).
		again := false
		for _, k := range keys {
			for _, f := range p.FailedBy {
				again = again || f == k
			}
		}
		if !again && !(len(p.ReqIDs) == 1 && noPowerCut(p.ReqIDs[0])) {
			t.Errorf("docs/sabotage.md says %s fails against %v, but none of them failed it in this run (it failed against %v); %s if the rules changed", p.Scenario, keys, p.FailedBy, regen)
		}
		delete(listed, p.Scenario)
	}
	if only != nil {
		return // the document's other rows belong to ids this run left out
	}
	inCorpus := map[string]bool{}
	for _, s := range corpus.Scenarios {
		inCorpus[ScenarioKey(s.URI, s.Line)] = true
	}
	for k := range listed {
		if !inCorpus[k] && (family == "" || (part == 1 && strings.HasPrefix(k, "features/"+family+"/"))) {
			t.Errorf("docs/sabotage.md lists scenario %s, which is not in the corpus; %s", k, regen)
		}
	}
}

// EnvIDs names the requirement ids (comma-separated) a matrix run is
// restricted to: PARLEY_SABOTAGE_IDS=<id> go test ./sabotage/shard/... proves
// one id (every rule for it fails it, each of its scenarios fails under
// some rule) in seconds instead of running every rule.
const EnvIDs = "PARLEY_SABOTAGE_IDS"

// onlyIDs is the set EnvIDs names, nil when it names none.
func onlyIDs() map[string]bool {
	v := strings.TrimSpace(os.Getenv(EnvIDs))
	if v == "" {
		return nil
	}
	set := map[string]bool{}
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			set[id] = true
		}
	}
	return set
}

// taggedWithAny says s witnesses one of ids (every scenario when ids is nil).
func taggedWithAny(s scenarios.Scenario, ids map[string]bool) bool {
	if ids == nil {
		return true
	}
	for _, id := range s.ReqIDs {
		if ids[id] {
			return true
		}
	}
	return false
}

// noPowerCut says id is a power-cut id on a machine where the suite cannot
// cut the power (no FUSE): its scenarios are blocked there, not failed.
func noPowerCut(id string) bool {
	return strings.HasSuffix(id, "power-cut") && lazyfs.Available() != nil
}

// Transparent is the control: the proxies with a rule that changes nothing
// must leave every requirement of family ("" for all) passing, so a
// sabotage failure is the rule's doing and not the proxies'. The rule has
// the HTTP answer hook and both AGTP/1.0 hooks, so every exchange of the
// family passes through a proxy that buffers it (over TLS 1.3 and
// plaintext loopback alike, for AGTP).
func Transparent(t *testing.T, family string) {
	reg, corpus := Load(t)
	noop := sabotage.Rule{ID: "none", Response: func(*sabotage.Exchange, *sabotage.Response) {},
		AGTPRequest: func(*sabotage.AGTPExchange) *agtp.Response { return nil },
		AGTP:        func(*sabotage.AGTPExchange, *agtp.Response) {}}
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: noop}
	defer tgt.Close()
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: FamilyTags(corpus, family)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("no requirement of family %q ran", family)
	}
	for _, r := range res.Rows {
		if r.Result != verdict.ExecutedPass {
			t.Errorf("%s through a pass-through proxy: %s (%s)", r.ID, r.Result, r.Detail)
		}
	}
}

// FamilyTags is a tag expression selecting the scenarios of family: any of
// the profiles its scenarios name ("" selects everything).
func FamilyTags(corpus *scenarios.Corpus, family string) string {
	if family == "" {
		return ""
	}
	set := map[string]bool{}
	for _, s := range corpus.Scenarios {
		if FamilyOfScenario(s) == family {
			set[scenarios.ProfileTagPrefix+s.Profile] = true
		}
	}
	var tags []string
	for tag := range set {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	return strings.Join(tags, ",")
}
