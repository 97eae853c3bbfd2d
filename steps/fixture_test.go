package steps

import (
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/target"
)

// The package's tests run Worlds on fixtures of a family no scenario has:
// one with the seams off, one with them on.
func init() {
	for name, seams := range map[string]bool{"stepstest-host": false, "stepstest-seams": true} {
		fixtures.Register(fixtures.Fixture{Name: name, Family: "stepstest", Purpose: "a host the steps package's tests drive", Seams: seams,
			Section: func(fixtures.Env, fixtures.Fixture) (map[string]any, error) { return map[string]any{"name": name}, nil }})
	}
}

// testSet is a fixture set for one test.
func testSet(t testing.TB) *fixtures.Set {
	t.Helper()
	env, err := fixtures.NewEnv("")
	if err != nil {
		t.Fatal(err)
	}
	return fixtures.NewSet(env)
}

// onFixture makes a World on tgt whose scenario runs on fixture name.
func onFixture(t testing.TB, tgt target.Target, set *fixtures.Set, name string) *World {
	t.Helper()
	return NewWorld(tgt, Scenario{ID: t.Name(), Fixture: name, Fixtures: set})
}

// deployedAt is a url target at u that declares fixture name of set.
func deployedAt(t testing.TB, u string, set *fixtures.Set, name string) *target.URL {
	t.Helper()
	cfg, err := set.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	return &target.URL{HTTP: u, Declared: cfg}
}
