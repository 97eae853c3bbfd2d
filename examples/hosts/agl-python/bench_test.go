package aglpython

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
)

// BenchmarkExecStarts runs the AGL scenarios against aglhost.py through the
// exec target twice per iteration, with a host per scenario (--isolate, as
// parley ran before fixtures) and with a host per fixture, and reports the
// hosts each started, their wall times and the ratios, measured in the same
// run: go test ./examples/hosts/agl-python -run '^$' -bench ExecStarts -benchtime 1x
func BenchmarkExecStarts(b *testing.B) {
	py, err := interpreter()
	if err != nil {
		b.Skip("python3 is not installed")
	}
	script, err := filepath.Abs("aglhost.py")
	if err != nil {
		b.Fatal(err)
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		b.Fatal(err)
	}
	run := func(isolate bool) (int, time.Duration) {
		tgt, err := target.NewExec(command(py, script))
		if err != nil {
			b.Fatal(err)
		}
		defer tgt.Close()
		t0 := time.Now()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Isolate: isolate,
			Tags: "@profile:agl-core,@profile:agl-operation-store", Concurrency: 4})
		if err != nil {
			b.Fatal(err)
		}
		return res.Hosts, time.Since(t0)
	}
	var isoHosts, sharedHosts int
	var isoWall, sharedWall time.Duration
	for i := 0; i < b.N; i++ {
		h, w := run(true)
		isoHosts, isoWall = isoHosts+h, isoWall+w
		h, w = run(false)
		sharedHosts, sharedWall = sharedHosts+h, sharedWall+w
	}
	n := float64(b.N)
	b.ReportMetric(float64(isoHosts)/n, "isolated-hosts/run")
	b.ReportMetric(float64(sharedHosts)/n, "shared-hosts/run")
	b.ReportMetric(float64(isoHosts)/float64(max(sharedHosts, 1)), "fewer-starts-x")
	b.ReportMetric(isoWall.Seconds()/n, "isolated-wall-s/run")
	b.ReportMetric(sharedWall.Seconds()/n, "shared-wall-s/run")
}
