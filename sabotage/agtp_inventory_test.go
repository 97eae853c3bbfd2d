package sabotage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// noInventory is a host whose only defect is lacking the inventory surfaces
// the RCNS text names without describing: DISCOVER /contracts, DISCOVER
// /patterns and INSPECT target=rcns-attempt answer 404.
var noInventory = sabotage.Rule{ID: "none", Broken: "has no DISCOVER /contracts, DISCOVER /patterns or INSPECT target=rcns-attempt (404)",
	AGTPRequest: func(x *sabotage.AGTPExchange) *agtp.Response {
		m, p := x.Request.Method, x.Request.Path
		if (m == "DISCOVER" && (p == "/contracts" || p == "/patterns")) || (m == "INSPECT" && x.Params()["target"] == "rcns-attempt") {
			return agtp.ErrorResponse(404, "not-found", "this host has no such inventory surface")
		}
		return nil
	}}

// TestNoRequirementButTheInventoryNeedsTheInventory: against a host whose
// only defect is lacking the inventory paths, only the inventory's own
// requirements fail or block; every other AGTP requirement passes, so no
// check of another rule leans on a surface the text does not describe. The
// three inventory requirements about the missing paths must fail.
func TestNoRequirementButTheInventoryNeedsTheInventory(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("runs the AGTP corpus")
	}
	reg, corpus := load(t)
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: noInventory}
	defer tgt.Close()
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
	if err != nil {
		t.Fatal(err)
	}
	mustFail := map[string]bool{"agtp.inventory.contracts-own": true, "agtp.inventory.contracts-inspect-all": true,
		"agtp.inventory.patterns": true, "agtp.inventory.inspect-rcns-attempt": true}
	for _, r := range res.Rows {
		switch {
		case mustFail[r.ID]:
			if r.Result != verdict.ExecutedFail {
				t.Errorf("%s against a host without its surface: %s, want executed-fail (%s)", r.ID, r.Result, r.Detail)
			}
		case strings.HasPrefix(r.ID, "agtp.inventory."):
			if r.Result != verdict.ExecutedPass && r.Result != verdict.ExecutedFail && r.Result != verdict.Blocked {
				t.Errorf("%s: %s (%s)", r.ID, r.Result, r.Detail)
			}
		case r.Result != verdict.ExecutedPass:
			t.Errorf("%s, which is not about the inventory, is %s against a host lacking only the inventory paths (%s)", r.ID, r.Result, r.Detail)
		}
	}
}
