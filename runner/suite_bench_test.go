package runner_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSuite runs the whole corpus against the reference host and
// reports its wall time, the CPU time it cost (user and system, every core)
// and the process's peak resident memory. Run it with -benchtime=1x (or a
// few) on a quiet machine: go test ./runner -run '^$' -bench BenchmarkSuite -benchtime 3x
func BenchmarkSuite(b *testing.B) {
	reg, corpus, err := scenarios.Load()
	if err != nil {
		b.Fatal(err)
	}
	tags := os.Getenv("PARLEY_TAGS")
	var (
		wall, cpu time.Duration
		hosts     int
	)
	for i := 0; i < b.N; i++ {
		tgt := target.NewRefhost()
		c0, t0 := cpuTime(), time.Now()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: tags})
		wall += time.Since(t0)
		cpu += cpuTime() - c0
		tgt.Close()
		if err != nil {
			b.Fatal(err)
		}
		if !res.Executed() {
			b.Fatal("nothing ran")
		}
		hosts += res.Hosts
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s/run")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MB")
	b.ReportMetric(float64(hosts)/float64(b.N), "hosts/run")
}
