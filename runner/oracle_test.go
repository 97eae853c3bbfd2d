package runner_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
)

// TestVerdictsDoNotDependOnSharingHosts is the oracle for fixtures and
// leases: the whole corpus runs on the reference host with scenarios sharing
// one host per fixture in two scenario orders, and again with a host per
// scenario (--isolate) in a third; every requirement must get the same
// verdict in every run. A scenario that sees another's state through a
// shared host, or a fixture that differs from what its scenarios describe,
// shows up here. The first run is the one TestRefhostPassesEveryRequirement
// holds to passing (firstRun, made once for both). (Three runs, not more:
// each is a whole run, and the orders are what finds a leak between
// scenarios; more orders run nightly with PARLEY_ORACLE_RUNS.)
func TestVerdictsDoNotDependOnSharingHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole corpus three times")
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	tags := os.Getenv("PARLEY_TAGS")
	type run struct {
		name    string
		seed    int64
		isolate bool
		res     *runner.Result
	}
	n := 3
	if v, err := strconv.Atoi(os.Getenv("PARLEY_ORACLE_RUNS")); err == nil && v > n {
		n = v
	}
	// Run 0 is the first run; then seeds 2..n, every third run isolating
	// each scenario on its own host.
	runs := []run{{name: "shared, first run"}}
	for i := 1; i < n; i++ {
		r := run{seed: int64(i + 1), isolate: i%3 == 2}
		mode := "shared"
		if r.isolate {
			mode = "isolated"
		}
		r.name = fmt.Sprintf("%s, seed %d", mode, r.seed)
		runs = append(runs, r)
	}
	// The runs are independent: parallel subtests (go test's -parallel,
	// GOMAXPROCS by default, bounds them), compared once all have ended.
	t.Run("runs", func(t *testing.T) {
		t.Run("first", func(t *testing.T) {
			t.Parallel()
			first := firstRun()
			if first.err != nil {
				t.Fatal(first.err)
			}
			runs[0].res = first.res
			runs[0].name = fmt.Sprintf("shared, seed %d (%d hosts)", first.res.Seed, first.res.Hosts)
		})
		for i := 1; i < len(runs); i++ {
			t.Run(strings.ReplaceAll(runs[i].name, ", ", "-"), func(t *testing.T) {
				t.Parallel()
				tgt := target.NewRefhost()
				res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Seed: runs[i].seed, Isolate: runs[i].isolate, Tags: tags})
				_ = tgt.Close()
				if err != nil {
					t.Fatal(err)
				}
				runs[i].res = res
				runs[i].name += fmt.Sprintf(" (%d hosts)", res.Hosts)
			})
		}
	})
	for _, rn := range runs {
		if rn.res == nil {
			t.Fatalf("the %s run did not complete", rn.name)
		}
	}
	base, baseDetail := map[string]string{}, map[string]string{}
	for _, r := range runs[0].res.Rows {
		base[r.ID] = r.Result
		baseDetail[r.ID] = r.Detail
	}
	for _, rn := range runs[1:] {
		for _, r := range rn.res.Rows {
			if base[r.ID] != r.Result {
				t.Errorf("%s: %s in the %s run (%s), %s in the %s run (%s)", r.ID, base[r.ID], runs[0].name, firstLine(strings.TrimSpace(baseDetail[r.ID])), r.Result, rn.name, firstLine(strings.TrimSpace(r.Detail)))
			}
		}
		if len(rn.res.Rows) != len(base) {
			t.Errorf("the %s run has %d requirement rows, the %s run %d", rn.name, len(rn.res.Rows), runs[0].name, len(base))
		}
	}
	for _, rn := range runs {
		t.Log(rn.name)
		if faults := rn.res.SuiteFaults(); len(faults) > 0 {
			t.Errorf("%s: %d scenarios were suite faults, first: %s:%d %s", rn.name, len(faults), faults[0].URI, faults[0].Line, firstLine(faults[0].Detail))
		}
	}
	// Sharing must share: the isolated runs start a host per scenario.
	if shared, isolated := runs[0].res.Hosts, runs[2].res.Hosts; shared >= isolated {
		t.Errorf("sharing started %d hosts and isolating %d", shared, isolated)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
