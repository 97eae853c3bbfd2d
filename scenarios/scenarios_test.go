package scenarios

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/parley-conformance/parley/fixtures"
)

// The demo family's fixtures, which the test corpus names.
func init() {
	for _, name := range []string{"demo-core", "demo-other", "elsewhere-core"} {
		family, _, _ := strings.Cut(name, "-")
		fixtures.Register(fixtures.Fixture{Name: name, Family: family, Purpose: "the test corpus's host",
			Section: func(fixtures.Env, fixtures.Fixture) (map[string]any, error) { return map[string]any{}, nil }})
	}
}

const goodRegistry = `family = "demo"
spec = "demo.txt"

[[requirement]]
id = "demo.area.first"
section = "1"
level = "MUST"
statement = "the first rule"
witness = "wire"
profile = "demo-core"

[[requirement]]
id = "demo.area.second"
section = "2"
level = "SHOULD"
statement = "the second rule"
witness = "unwitnessable"
rationale = "nothing on the wire shows it"
profile = "demo-core"
`

const goodFeature = `Feature: demo
  @req:demo.area.first @profile:demo-core @fixture:demo-core
  Scenario: first
    Given something
`

func bind(t *testing.T, registry, feature string) error {
	t.Helper()
	reg, err := loadRegistry(fstest.MapFS{"demo.toml": {Data: []byte(registry)}})
	if err != nil {
		return err
	}
	c, err := loadCorpus(fstest.MapFS{"demo/x.feature": {Data: []byte(feature)}})
	if err != nil {
		return err
	}
	if err := Bind(reg, c); err != nil {
		return err
	}
	return CheckFixtures(c, fixtures.FamilyOf)
}

// TestTheShippedRegistryBindsToTheShippedCorpus is the drift check CI relies on.
func TestTheShippedRegistryBindsToTheShippedCorpus(t *testing.T) {
	reg, err := LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	if err := Bind(reg, c); err != nil {
		t.Fatal(err)
	}
	if err := CheckFixtures(c, fixtures.FamilyOf); err != nil {
		t.Fatal(err)
	}
	if len(reg.Entries) == 0 || len(c.Scenarios) == 0 {
		t.Fatal("empty registry or corpus")
	}
}

func TestBindAcceptsAConsistentPair(t *testing.T) {
	if err := bind(t, goodRegistry, goodFeature); err != nil {
		t.Fatal(err)
	}
}

func TestBindRefuses(t *testing.T) {
	cases := []struct {
		name, registry, feature, want string
	}{
		{"a tag naming no entry", goodRegistry, strings.Replace(goodFeature, "@req:demo.area.first", "@req:demo.area.first @req:demo.area.ghost", 1), "names no registry entry"},
		{"an active MUST with neither scenario nor rationale", goodRegistry, strings.Replace(goodFeature, "@req:demo.area.first ", "@req:demo.area.first-renamed ", 1), "demo.area.first: active MUST with no scenario"},
		{"a scenario with no @req tag", goodRegistry, strings.Replace(goodFeature, "@req:demo.area.first ", "", 1), "no @req tag"},
		{"a scenario with no @profile tag", goodRegistry, strings.Replace(goodFeature, " @profile:demo-core", "", 1), "no @profile tag"},
		{"a profile that disagrees with the registry", goodRegistry, strings.Replace(goodFeature, "@profile:demo-core", "@profile:other", 1), "belongs to profile demo-core"},
		{"a tag naming an unwitnessable entry", goodRegistry, strings.Replace(goodFeature, "@req:demo.area.first", "@req:demo.area.first @req:demo.area.second", 1), "registered as unwitnessable"},
		{"a duplicate id", goodRegistry + strings.SplitN(goodRegistry, "[[requirement]]", 3)[0][0:0] + "\n[[requirement]]" + strings.SplitN(goodRegistry, "[[requirement]]", 3)[1], goodFeature, "duplicate id demo.area.first"},
		{"an unwitnessable entry without rationale", strings.Replace(goodRegistry, `rationale = "nothing on the wire shows it"`, "", 1), goodFeature, "needs a rationale"},
		{"a malformed id", strings.Replace(goodRegistry, `"demo.area.first"`, `"Demo.Area"`, 1), goodFeature, "id must be"},
		{"an unknown field", strings.Replace(goodRegistry, `level = "MUST"`, "level = \"MUST\"\nlevle = \"MUST\"", 1), goodFeature, "levle"},
		{"a bad level", strings.Replace(goodRegistry, `level = "MUST"`, `level = "MUSTN'T"`, 1), goodFeature, "is not MUST, SHOULD or MAY"},
		{"a binding rule in a spec profile", strings.Replace(goodRegistry, `witness = "wire"`, "witness = \"wire\"\nbasis = \"binding\"", 1), goodFeature, "belongs to profile demo-parley-binding"},
		{"a text rule in a binding profile", strings.ReplaceAll(goodRegistry, `profile = "demo-core"`, `profile = "demo-parley-binding"`), strings.Replace(goodFeature, "@profile:demo-core", "@profile:demo-parley-binding", 1), `its entries have basis = "binding"`},
		{"an unknown basis", strings.Replace(goodRegistry, `witness = "wire"`, "witness = \"wire\"\nbasis = \"folklore\"", 1), goodFeature, `basis "folklore" is not text`},
		{"a scenario naming no fixture", goodRegistry, strings.Replace(goodFeature, " @fixture:demo-core", "", 1), "no @fixture tag"},
		{"a fixture that does not exist", goodRegistry, strings.Replace(goodFeature, "@fixture:demo-core", "@fixture:demo-gone", 1), "@fixture:demo-gone names no fixture"},
		{"another family's fixture", goodRegistry, strings.Replace(goodFeature, "@fixture:demo-core", "@fixture:elsewhere-core", 1), "belongs to family elsewhere"},
		{"two requirements in one scenario", strings.Replace(goodRegistry, `witness = "unwitnessable"
rationale = "nothing on the wire shows it"`, `witness = "wire"`, 1), strings.Replace(goodFeature, "@req:demo.area.first", "@req:demo.area.first @req:demo.area.second", 1), "tags 2 requirements (demo.area.first, demo.area.second)"},
		{"two fixtures", goodRegistry, strings.Replace(goodFeature, "@fixture:demo-core", "@fixture:demo-core @fixture:demo-other", 1), "a scenario runs on one fixture"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := bind(t, c.registry, c.feature)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestRetiredIDsKeepTheirTombstone(t *testing.T) {
	reg := strings.Replace(goodRegistry, `profile = "demo-core"`, "profile = \"demo-core\"\nstatus = \"retired\"", 1)
	err := bind(t, reg, goodFeature)
	if err == nil || !strings.Contains(err.Error(), "is retired") {
		t.Fatalf("a scenario naming a retired id must be refused, got %v", err)
	}
}

func TestFilterFollowsGodogSemantics(t *testing.T) {
	tags := []string{"@req:a", "@profile:p"}
	cases := map[string]bool{
		"":                             true,
		"@req:a":                       true,
		"@req:b":                       false,
		"@req:b,@req:a":                true,
		"@req:a && @profile:p":         true,
		"@req:a && ~@profile:p":        false,
		"~@req:b":                      true,
		"@req:b && @req:a, @profile:p": true, // ',' binds loosest
	}
	for expr, want := range cases {
		f, err := ParseFilter(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if got := f.Match(tags); got != want {
			t.Errorf("%q matched %v, want %v", expr, got, want)
		}
	}
}

func TestFilterRefusesWhatGodogWouldMisread(t *testing.T) {
	for _, expr := range []string{"@a and @b", "not @a", "@a or @b", "(@a)", "@a,", "@a && ", "a", "@a @b"} {
		if _, err := ParseFilter(expr); err == nil {
			t.Errorf("%q: want a usage error", expr)
		}
	}
}

// TestEveryInterpretationIsRecorded: an id whose basis is an interpretation
// of the text, or parley's own binding choice, is named in
// docs/interpretations.md, where a reader finds the reading and why.
func TestEveryInterpretationIsRecorded(t *testing.T) {
	reg, err := LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/interpretations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range reg.Entries {
		if e.Basis != BasisText && !strings.Contains(string(doc), e.ID) {
			t.Errorf("%s has basis %s, and docs/interpretations.md does not name it", e.ID, e.Basis)
		}
	}
}
