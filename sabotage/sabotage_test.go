package sabotage_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/sabotage/sabotagetest"
	"github.com/parley-conformance/parley/scenarios"
)

func load(t *testing.T) (*scenarios.Registry, *scenarios.Corpus) {
	t.Helper()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	return reg, corpus
}

// TestEveryScenarioFailsAgainstSomeSabotagedHost runs each rule against the
// scenarios of the requirement it breaks, and holds docs/sabotage.md to what
// it saw (sabotagetest.Matrix). go test runs it per family, in parallel, in
// the shard packages sabotage/shard/<family>; here it runs every family at
// once only when asked, so that nothing runs twice:
//
//   - PARLEY_UPDATE_DOCS=1 rewrites docs/sabotage.md from a run of every rule;
//   - PARLEY_SABOTAGE_ALL=1 runs every family here;
//   - PARLEY_SABOTAGE_FAMILY=agtp runs one family here, for iterating on it.
func TestEveryScenarioFailsAgainstSomeSabotagedHost(t *testing.T) {
	update := os.Getenv("PARLEY_UPDATE_DOCS") == "1"
	family := os.Getenv("PARLEY_SABOTAGE_FAMILY")
	if !update && family == "" && os.Getenv("PARLEY_SABOTAGE_ALL") != "1" {
		t.Skip("the shard packages sabotage/shard/<family> run this per family; PARLEY_UPDATE_DOCS=1, PARLEY_SABOTAGE_ALL=1 or PARLEY_SABOTAGE_FAMILY=<family> runs it here")
	}
	sabotagetest.Matrix(t, family, update)
}

// TestEveryFamilyHasAShard: a family's rules and scenarios are proved only
// by its shard package; a family without one (a new spec) would go unproved.
func TestEveryFamilyHasAShard(t *testing.T) {
	_, corpus := load(t)
	shards := sabotagetest.Shards(t)
	for _, f := range sabotagetest.Families(corpus) {
		if !contains(shards, f) {
			t.Errorf("family %s has rules or scenarios but no shard package sabotage/shard/%s: copy another family's and rename it", f, f)
		}
	}
}

func scenarioKey(uri string, line int64) string { return fmt.Sprintf("features/%s:%d", uri, line) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestProxyIsTransparent is the control: the same proxy with a rule that
// changes nothing must leave every requirement passing, so a sabotage
// failure is the rule's doing and not the proxy's. The shard packages run it
// per family; PARLEY_SABOTAGE_ALL=1 runs it here for every family at once.
func TestProxyIsTransparent(t *testing.T) {
	if os.Getenv("PARLEY_SABOTAGE_ALL") != "1" {
		t.Skip("the shard packages sabotage/shard/<family> run this per family; PARLEY_SABOTAGE_ALL=1 runs it here")
	}
	sabotagetest.Transparent(t, "")
}

// TestShardPartsSplitTheMatrixExactly: the parts of a family's shard
// packages run every rule once, and report every scenario once, in the part
// that runs every rule of its requirements.
func TestShardPartsSplitTheMatrixExactly(t *testing.T) {
	_, corpus := load(t)
	for _, family := range sabotagetest.Families(corpus) {
		var rules []sabotage.Rule
		for _, r := range sabotage.Rules() {
			if sabotagetest.FamilyOfRule(r) == family {
				rules = append(rules, r)
			}
		}
		for _, parts := range []int{1, 2, 3, 4, 7} {
			ruleIn, scenarioIn := map[string]int{}, map[string]int{}
			for part := 1; part <= parts; part++ {
				rs, ss := sabotagetest.Partition(corpus, rules, parts, part)
				for k := range rs {
					ruleIn[k] = part
				}
				for k := range ss {
					if _, dup := scenarioIn[k]; dup {
						t.Errorf("%s, %d parts: scenario %s is in two parts", family, parts, k)
					}
					scenarioIn[k] = part
				}
			}
			for _, r := range rules {
				if ruleIn[r.Key()] == 0 {
					t.Errorf("%s, %d parts: rule %s is in no part", family, parts, r.Key())
				}
			}
			for _, s := range corpus.Scenarios {
				if sabotagetest.FamilyOfScenario(s) != family {
					continue
				}
				k := sabotagetest.ScenarioKey(s.URI, s.Line)
				p := scenarioIn[k]
				if p == 0 {
					t.Errorf("%s, %d parts: scenario %s is in no part", family, parts, k)
				}
				for _, r := range rules {
					for _, id := range s.ReqIDs {
						if r.ID == id && ruleIn[r.Key()] != p {
							t.Errorf("%s, %d parts: scenario %s is in part %d, its rule %s in part %d", family, parts, k, p, r.Key(), ruleIn[r.Key()])
						}
					}
				}
			}
		}
	}
}
