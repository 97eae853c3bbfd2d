package agtp

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/scenarios"
)

var (
	declaresAgent  = regexp.MustCompile(`^agent "[a-z]+" has trust tier ([123]) and is granted "([^"]*)"$`)
	declaresRecipe = regexp.MustCompile(`^recipe "[a-z]+" is its own copy of room-booking, `)
)

// agtpScenarios are the corpus's AGTP scenarios (every outline row).
func agtpScenarios(t *testing.T) *scenarios.Corpus {
	t.Helper()
	c, err := scenarios.LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	out := &scenarios.Corpus{}
	for _, s := range c.Scenarios {
		if strings.HasPrefix(s.URI, family+"/") {
			out.Scenarios = append(out.Scenarios, s)
		}
	}
	if len(out.Scenarios) == 0 {
		t.Fatal("no AGTP scenario in the corpus")
	}
	return out
}

// Every AGTP scenario names exactly one fixture, an AGTP one.
func TestAGTPScenariosNameOneFixture(t *testing.T) {
	for _, s := range agtpScenarios(t).Scenarios {
		if len(s.Fixtures) != 1 {
			t.Errorf("%s:%d %q names fixtures %v, want exactly one", s.URI, s.Line, s.Name, s.Fixtures)
			continue
		}
		if f, ok := fixtures.Lookup(s.Fixture); !ok || f.Family != family {
			t.Errorf("%s:%d %q names fixture %s, which is no AGTP fixture", s.URI, s.Line, s.Name, s.Fixture)
		}
	}
}

// rosterUses counts, per fixture and roster, the identities a run of every
// AGTP scenario leases: the agents and recipes each declares, and the
// suite's reader and control agents where a step needs them.
func rosterUses(t *testing.T) map[string]map[string]int {
	uses := map[string]map[string]int{}
	for _, s := range agtpScenarios(t).Scenarios {
		if uses[s.Fixture] == nil {
			uses[s.Fixture] = map[string]int{}
		}
		reader, control := false, false
		for _, text := range s.Steps {
			if m := declaresAgent.FindStringSubmatch(text); m != nil {
				tier, _ := strconv.Atoi(m[1])
				roster, ok := fixtures.AGTPRoster(tier, splitScopes(m[2]))
				if !ok {
					t.Errorf("%s:%d declares an agent of no class: %s", s.URI, s.Line, text)
					continue
				}
				uses[s.Fixture][roster]++
			}
			if declaresRecipe.MatchString(text) {
				uses[s.Fixture][fixtures.AGTPRecipeRoster]++
			}
			reader = reader || strings.HasPrefix(text, "the room record ")
			control = control || strings.Contains(text, " holds no contract for ")
		}
		if reader {
			uses[s.Fixture][rosterOf(t, readerName)]++
		}
		if control {
			uses[s.Fixture][rosterOf(t, controlName)]++
		}
	}
	return uses
}

func rosterOf(t *testing.T, suiteAgent string) string {
	sa := suiteAgents[suiteAgent]
	r, ok := fixtures.AGTPRoster(sa.tier, sa.scopes)
	if !ok {
		t.Fatalf("the suite's agent %s is of no class", suiteAgent)
	}
	return r
}

// A default run of the AGTP scenarios never exhausts a roster, with a
// margin for scenarios added later: each roster holds at least its uses
// and a fifth more (two at least).
func TestRostersCoverADefaultRun(t *testing.T) {
	uses := rosterUses(t)
	var fxs []string
	for fx := range uses {
		fxs = append(fxs, fx)
	}
	sort.Strings(fxs)
	for _, fx := range fxs {
		f, ok := fixtures.Lookup(fx)
		if !ok {
			t.Errorf("no fixture %s", fx)
			continue
		}
		var rs []string
		for r := range uses[fx] {
			rs = append(rs, r)
		}
		sort.Strings(rs)
		var line []string
		for _, r := range rs {
			n := uses[fx][r]
			want := n + max(2, n/5)
			line = append(line, fmt.Sprintf("%s %d/%d", r, n, f.Rosters[r]))
			if f.Rosters[r] < want {
				t.Errorf("fixture %s: roster %s holds %d identities; a run leases %d of them, so it needs at least %d", fx, r, f.Rosters[r], n, want)
			}
		}
		t.Logf("%s: %s", fx, strings.Join(line, ", "))
	}
}
