package agl

import (
	"slices"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
)

// TestPreconditionsAreDeclared holds the preconditions the AGL steps name to
// scenarios/agl.toml, both ways: a name missing there would turn a host's
// failure into a suite fault, and an entry no step names is dead.
func TestPreconditionsAreDeclared(t *testing.T) {
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range preconditions {
		if _, ok := reg.LookupPrecondition(id); !ok {
			t.Errorf("%s is named by steps/agl but not declared in scenarios/agl.toml", id)
		}
	}
	for _, p := range reg.Preconditions {
		if p.Family == family && !slices.Contains(preconditions, p.ID) {
			t.Errorf("scenarios/agl.toml declares %s, which no AGL step names", p.ID)
		}
	}
	c := &steps.Catalog{}
	Register(c)
	for _, id := range c.Preconditions() {
		if strings.HasPrefix(id, family+".") && !slices.Contains(preconditions, id) {
			t.Errorf("a Setup step names %s, which is not in preconditions", id)
		}
	}
}
