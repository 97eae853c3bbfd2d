package sabotage_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/internal/lazyfs"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

const (
	crashID    = "contractrefine.preflight.wal.decision-survives-crash"
	restartID  = "contractrefine.preflight.wal.decision-survives-restart"
	powerCutID = "contractrefine.preflight.wal.decision-survives-power-cut"
)

// TestABufferedWALLosesItsDecisionsUnderSIGKILL is the proof that the WAL
// durability scenarios see what they are about. testdata/walhost is a small
// ContractRefine host, a process of its own run through the exec target;
// with -wal buffered it answers a decision while the decision's frame waits
// in a user-space buffer, which it writes out only at a clean stop. Killed
// with SIGKILL right after an answer it loses the decision, and the suite
// must say so on the crash id, every time (20 trials); the clean-restart id
// passes against it, since SIGTERM flushes the buffer; and with -wal fsync
// (each frame written and fsync'd before the answer) both ids pass, so the
// failure is the buffer's and nothing else about the little host.
func TestABufferedWALLosesItsDecisionsUnderSIGKILL(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("builds a host and kills it twenty times")
	}
	bin := walhost(t)
	reg, corpus := load(t)
	run := func(t *testing.T, wal string) map[string]runner.Row {
		tgt, err := target.NewExec(bin + " -wal " + wal)
		if err != nil {
			t.Fatal(err)
		}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + crashID + ",@req:" + restartID})
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string]runner.Row{}
		for _, r := range res.Rows {
			rows[r.ID] = r
		}
		for _, s := range res.Scenarios {
			if s.Result != verdict.ExecutedPass && s.Result != verdict.ExecutedFail {
				t.Errorf("%s:%d ended %s (%s): %s", s.URI, s.Line, s.Result, s.Cause, s.Detail)
			}
		}
		return rows
	}

	t.Run("fsync", func(t *testing.T) {
		rows := run(t, "fsync")
		for _, id := range []string{crashID, restartID} {
			if rows[id].Result != verdict.ExecutedPass {
				t.Errorf("a host that fsyncs each frame before it answers: %s is %s: %s", id, rows[id].Result, rows[id].Detail)
			}
		}
	})
	const trials = 20
	for i := range trials {
		rows := run(t, "buffered")
		crash, restart := rows[crashID], rows[restartID]
		if crash.Result != verdict.ExecutedFail {
			t.Errorf("trial %d: a host whose frames wait in a buffer lost nothing the suite saw: %s is %s (%s)", i+1, crashID, crash.Result, crash.Detail)
		} else if !strings.Contains(crash.Detail, "restarted") {
			t.Errorf("trial %d: %s failed, but not on a decision lost across the restart: %s", i+1, crashID, crash.Detail)
		}
		if restart.Result != verdict.ExecutedPass {
			t.Errorf("trial %d: the buffered host flushes at a clean stop, yet %s is %s (%s)", i+1, restartID, restart.Result, restart.Detail)
		}
		if i == 0 {
			t.Logf("%s: %s", crashID, crash.Detail)
		}
	}
}

// TestAnUnsyncedWALLosesDecisionsOnlyToAPowerCut is the proof that the
// power-cut scenario sees what SIGKILL cannot. With -wal nosync testdata/
// walhost writes each frame to its file before it answers and never fsyncs
// it: the kernel holds the frame, so the host passes the crash and restart
// scenarios, and only a power cut under its state directory (internal/
// lazyfs) loses the decisions, on the power-cut id, every time. With -wal
// fsync all three ids pass, so the failure is the missing fsync's.
func TestAnUnsyncedWALLosesDecisionsOnlyToAPowerCut(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("builds a host and cuts the power under it")
	}
	if err := lazyfs.Available(); err != nil {
		t.Skipf("FUSE is not usable here, so the suite cannot cut the power under a host: %v", err)
	}
	bin := walhost(t)
	reg, corpus := load(t)
	ids := []string{crashID, restartID, powerCutID}
	run := func(t *testing.T, wal string) map[string]runner.Row {
		tgt, err := target.NewExec(bin + " -wal " + wal)
		if err != nil {
			t.Fatal(err)
		}
		defer tgt.Close()
		var tags []string
		for _, id := range ids {
			tags = append(tags, "@req:"+id)
		}
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: strings.Join(tags, ",")})
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string]runner.Row{}
		for _, r := range res.Rows {
			rows[r.ID] = r
		}
		for _, s := range res.Scenarios {
			if s.Result != verdict.ExecutedPass && s.Result != verdict.ExecutedFail {
				t.Errorf("%s:%d ended %s (%s): %s", s.URI, s.Line, s.Result, s.Cause, s.Detail)
			}
		}
		return rows
	}
	t.Run("fsync", func(t *testing.T) {
		rows := run(t, "fsync")
		for _, id := range ids {
			if rows[id].Result != verdict.ExecutedPass {
				t.Errorf("a host that fsyncs each frame before it answers: %s is %s: %s", id, rows[id].Result, rows[id].Detail)
			}
		}
	})
	const trials = 3
	for i := range trials {
		rows := run(t, "nosync")
		cut := rows[powerCutID]
		if cut.Result != verdict.ExecutedFail {
			t.Errorf("trial %d: a host that never fsyncs its frames lost nothing to a power cut the suite saw: %s is %s (%s)", i+1, powerCutID, cut.Result, cut.Detail)
		} else if !strings.Contains(cut.Detail, "restarted") {
			t.Errorf("trial %d: %s failed, but not on a decision lost across the power cut: %s", i+1, powerCutID, cut.Detail)
		}
		for _, id := range []string{crashID, restartID} {
			if rows[id].Result != verdict.ExecutedPass {
				t.Errorf("trial %d: SIGKILL and SIGTERM keep the page cache, yet %s is %s against a host that only skips fsync (%s)", i+1, id, rows[id].Result, rows[id].Detail)
			}
		}
		if i == 0 {
			t.Logf("%s: %s", powerCutID, cut.Detail)
		}
	}
}

// walhost builds testdata/walhost once for the process (both proofs run
// it) and returns the binary.
func walhost(t *testing.T) string {
	t.Helper()
	walhostOnce.Do(func() {
		dir, err := os.MkdirTemp("", "parley-walhost-")
		if err != nil {
			walhostErr = err
			return
		}
		walhostBin = filepath.Join(dir, "walhost")
		if out, err := exec.Command("go", "build", "-o", walhostBin, "./testdata/walhost").CombinedOutput(); err != nil {
			walhostErr = fmt.Errorf("build walhost: %v\n%s", err, out)
		}
	})
	if walhostErr != nil {
		t.Fatal(walhostErr)
	}
	return walhostBin
}

var (
	walhostOnce sync.Once
	walhostBin  string
	walhostErr  error
)
