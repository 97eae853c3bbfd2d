package contractrefine

import (
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkGetLookup measures what GET /v1/preflight/{id} costs on a WAL of
// 5,000 decisions: the offset index this host keeps, against the baseline of
// scanning the file for the frame (what the spec describes), in the same run.
// It reports the baseline-to-index ratio as "x-faster"; the goal is that GET
// does not grow with the WAL, so the ratio must stay far above 1.
func BenchmarkGetLookup(b *testing.B) {
	const frames = 5000
	w, err := openWAL(b.TempDir(), slog.New(slog.DiscardHandler), false, false, nil, func(*rawFrame) {})
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	ids := make([]string, frames)
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		attrs := map[string]any{"preflight_id": ids[i], "decision_json": `{"outcome":"pass"}`, "reason": "contract: passed"}
		if err := w.append(KindPreflight, time.Now(), attrs, ids[i]); err != nil {
			b.Fatal(err)
		}
	}
	target := ids[frames/2]

	scan := func() {
		found := false
		_ = w.scan(func(_ []byte, fr *rawFrame) error {
			if !found && fr.Kind == KindPreflight && fr.stringAttr("preflight_id") == target {
				found = true
			}
			return nil
		})
		if !found {
			b.Fatal("scan missed the frame")
		}
	}
	lookup := func() {
		if _, ok, err := w.lookup(target); !ok || err != nil {
			b.Fatal("lookup missed the frame", err)
		}
	}

	// Baseline first, with a fixed count, then the indexed lookup b.N times.
	const baselineRuns = 20
	start := time.Now()
	for i := 0; i < baselineRuns; i++ {
		scan()
	}
	perScan := time.Since(start) / baselineRuns

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lookup()
	}
	b.StopTimer()
	perLookup := b.Elapsed() / time.Duration(b.N)
	if perLookup > 0 {
		b.ReportMetric(float64(perScan)/float64(perLookup), "x-faster")
	}
}

// BenchmarkSeamRead measures a read of the WAL seam filtered by one
// preflight_id on a WAL of 5,000 decisions, with one frame appended before
// each read (as a scenario appends and then reads back): the seam's index,
// which decodes only the new frame, against the baseline of decoding the
// whole file (what the seam did before), alternated in the same run. It
// reports the baseline-to-index ratio as "x-faster"; it must stay far
// above 1, since a run's reads otherwise grow with the square of its WAL.
func BenchmarkSeamRead(b *testing.B) {
	const frames = 5000
	w, err := openWAL(b.TempDir(), slog.New(slog.DiscardHandler), false, false, nil, func(*rawFrame) {})
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	n := 0
	appendOne := func() string {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		n++
		attrs := map[string]any{"preflight_id": id, "decision_json": `{"outcome":"pass"}`, "reason": "contract: passed"}
		if err := w.append(KindPreflight, time.Now(), attrs, id); err != nil {
			b.Fatal(err)
		}
		return id
	}
	for range frames {
		appendOne()
	}
	var baseline, indexed time.Duration
	for i := 0; i < b.N; i++ {
		id := appendOne()
		t0 := time.Now()
		got := 0
		_ = w.scan(func(_ []byte, fr *rawFrame) error {
			if attrText(fr.Attrs["preflight_id"]) == id {
				got++
			}
			return nil
		})
		t1 := time.Now()
		seen, err := w.matching(func(_ string, attrs map[string]string) bool { return attrs["preflight_id"] == id })
		baseline, indexed = baseline+t1.Sub(t0), indexed+time.Since(t1)
		if err != nil || got != 1 || len(seen) != 1 {
			b.Fatalf("frame %s: scan found %d, the seam %d (%v)", id, got, len(seen), err)
		}
	}
	if indexed > 0 {
		b.ReportMetric(float64(baseline)/float64(indexed), "x-faster")
	}
}
