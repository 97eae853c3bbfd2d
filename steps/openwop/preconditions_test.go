package openwop

import (
	"strings"
	"testing"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/steps"
)

// TestEveryPreconditionIsRegistered: a precondition a step names but the
// registry does not declare turns a host's failure into a suite fault at
// run time; catch it here instead.
func TestEveryPreconditionIsRegistered(t *testing.T) {
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		t.Fatal(err)
	}
	c := &steps.Catalog{}
	Register(c)
	ids := append(c.Preconditions(), Preconditions()...)
	for _, id := range ids {
		if !strings.HasPrefix(id, family+".precondition.") {
			t.Errorf("precondition %s is not under %s.precondition.", id, family)
		}
		if _, ok := reg.LookupPrecondition(id); !ok {
			t.Errorf("precondition %s is not declared in scenarios/%s.toml", id, family)
		}
	}
	for _, p := range reg.Preconditions {
		if p.Family != family {
			continue
		}
		found := false
		for _, id := range ids {
			found = found || id == p.ID
		}
		if !found {
			t.Errorf("scenarios/%s.toml declares precondition %s, which no step names", family, p.ID)
		}
	}
}
