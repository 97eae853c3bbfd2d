package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestATerminatedRunStopsItsHosts: SIGTERM is how CI runners, timeout(1)
// and container schedulers cancel a job. The run ends as an interrupted one
// (exit 3, no bundle), with every host it started stopped and its scratch
// removed. The hosts run in process groups of their own, so a run that died
// without stopping them would leave them running.
func TestATerminatedRunStopsItsHosts(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pids, scratch, out := t.TempDir(), t.TempDir(), t.TempDir()
	// The adapter records each host's pid, then becomes the reference host.
	adapter := filepath.Join(t.TempDir(), "adapter.sh")
	body := "echo $$ > " + pids + "/$$.pid\nexec env PARLEY_AS_MAIN=1 " + exe + " refhost \"$1\"\n"
	if err := os.WriteFile(adapter, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--quiet", "--target", "exec", "--exec", "sh "+adapter, "--out", out)
	cmd.Env = append(os.Environ(), "PARLEY_AS_MAIN=1", "TMPDIR="+scratch)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until some host has started (its pid recorded), however long
	// the machine takes; the run ending first is a failure of its own.
	for started := false; !started; {
		select {
		case err := <-exited:
			t.Fatalf("the run ended before any host started (%v):\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
			entries, _ := os.ReadDir(pids)
			started = len(entries) > 0
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitIncomplete {
		t.Fatalf("a terminated run exited %v, want %d:\n%s", err, exitIncomplete, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("the run does not say it was interrupted:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "bundle.dsse.json")); err == nil {
		t.Error("a terminated run wrote a bundle")
	}

	entries, _ := os.ReadDir(pids)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".pid"))
		if err != nil {
			continue
		}
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("host %d still runs after the run that started it was terminated", pid)
		}
	}
	left, _ := os.ReadDir(scratch)
	for _, e := range left {
		t.Errorf("the terminated run left %s in its scratch directory", e.Name())
	}
}

// running reports whether pid is a live process. A dead one whose parent
// exited before reaping it stays a zombie where PID 1 does not reap (as in
// some containers): it answers signal 0, yet has stopped.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(st), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
