// Package benchpair measures a subject against its baseline in one
// benchmark, alternating them iteration by iteration so that a machine's
// load drifts over both alike, and reports the ratio. Shared machines are
// noisy; a ratio measured this way is what parley's performance goals are
// stated in (docs/performance.md).
package benchpair

import (
	"testing"
	"time"
)

// Run calls baseline and subject once each per iteration and reports
// ns/op for both and subject/baseline as the metric named ratio. It returns
// the mean time per call of each, for a benchmark that reports a rate of
// its own (operations per second) beside the ratio.
func Run(b *testing.B, ratio string, baseline, subject func(b *testing.B)) (basePerOp, subjPerOp time.Duration) {
	b.Helper()
	var base, subj time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		baseline(b)
		t1 := time.Now()
		subject(b)
		t2 := time.Now()
		base += t1.Sub(t0)
		subj += t2.Sub(t1)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "baseline-ns/op")
	b.ReportMetric(float64(subj.Nanoseconds())/n, "subject-ns/op")
	if base > 0 {
		b.ReportMetric(float64(subj)/float64(base), ratio)
	}
	return base / time.Duration(b.N), subj / time.Duration(b.N)
}
