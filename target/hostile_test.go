package target

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A hostile exec host: one that floods its outputs, logs a line longer than
// any buffer before its ready line, or ignores SIGTERM. The target stays
// within its bounds: the ready line is found, memory does not grow with
// the flood, and stopping ends within the kill delay.

func startExec(t *testing.T, command string, timeout time.Duration) (*Exec, *Host, error) {
	t.Helper()
	tgt, err := NewExec(command)
	if err != nil {
		t.Fatal(err)
	}
	tgt.StartTimeout = timeout
	t.Cleanup(func() { tgt.Close() })
	cfg, _ := ParseConfig([]byte(`{"contractrefine":{}}`))
	h, err := tgt.Acquire(context.Background(), cfg)
	return tgt, h, err
}

const ready = `echo '{"parley":"ready","http":"http://127.0.0.1:9"}'`

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func TestAnExecHostThatLogsALongLineIsStillSeenReady(t *testing.T) {
	t.Parallel()
	_, h, err := startExec(t, `head -c 300000 /dev/zero | tr '\0' x; echo; `+ready+`; sleep 30 #`, 10*time.Second)
	if err != nil || h == nil {
		t.Fatalf("the ready line after a 300 kB log line was not seen: %v", err)
	}
}

func TestAnExecHostThatFloodsDoesNotGrowTheSuite(t *testing.T) {
	before := heap()
	// 16 MB of short lines on stdout and on stderr before the ready line,
	// and more on both after it.
	flood := `yes parley-flood | head -c 16777216; echo; yes parley-flood | head -c 16777216 >&2; ` + ready + `; yes parley-flood & yes parley-flood >&2 & sleep 30 #`
	tgt, h, err := startExec(t, flood, 60*time.Second)
	if err != nil || h == nil {
		tgt.Close()
		t.Fatalf("a flooding host was not seen ready: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	grew := heap() - before
	// Close returns once the process group has ended (SIGKILL after the
	// kill delay at the latest); one that hung would hold the test.
	tgt.Close()
	if grew > 64<<20 {
		t.Fatalf("the suite's heap grew by %d MB under a flood", grew>>20)
	}
	logs, _ := h.Logs()
	if len(logs) > maxLogLines+1 {
		t.Fatalf("the host log kept %d lines", len(logs))
	}
}

func TestAnExecHostThatIgnoresSIGTERMIsKilled(t *testing.T) {
	t.Parallel()
	tgt, _, err := startExec(t, `trap '' TERM; `+ready+`; while :; do sleep 1; done #`, 10*time.Second)
	if err != nil {
		tgt.Close()
		t.Fatal(err)
	}
	// Only SIGKILL ends this host: Close returning is the check (a target
	// that never escalated would hold the test until go test gives up).
	tgt.Close()
}

func TestAnExecHostThatNeverGetsReadyTimesOut(t *testing.T) {
	t.Parallel()
	_, _, err := startExec(t, `yes parley-noise >&2 & sleep 30 #`, 500*time.Millisecond)
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("want the host's start failure, got %v", err)
	}
}
