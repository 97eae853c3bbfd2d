// Package scratch puts a test process's temporary files (os.TempDir, so
// t.TempDir and the state directories and stores of the hosts a test
// starts) on a RAM-backed file system where the machine has one.
//
// The hosts under test fsync every commit before they answer, as they must.
// On a disk that made a whole run of the corpus spend about a third of its
// wall time and half of its system time waiting on flushes, for nothing a
// test observes: a crash (SIGKILL, or a halted instance) keeps what the
// kernel holds whatever the medium, and the power-cut scenarios lose
// unsynced writes through their own lazyfs mount (internal/lazyfs), not
// through the medium. So tests put their scratch on tmpfs, and the code
// under test is unchanged.
package scratch

import (
	"flag"
	"os"
)

// OnTmpfs points TMPDIR at a fresh directory on /dev/shm when that is a
// tmpfs this process can write, and returns what removes it (a no-op when
// nothing was changed). It changes nothing when TMPDIR is set already (the
// caller chose), or when the test binary runs benchmarks (which measure the
// hosts' commits, fsync included, on a real disk). Call it from TestMain
// before the tests run.
func OnTmpfs() (remove func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return func() {}
	}
	if _, set := os.LookupEnv("TMPDIR"); set || !isTmpfs(shm) {
		return func() {}
	}
	dir, err := os.MkdirTemp(shm, "parley-test-")
	if err != nil {
		return func() {}
	}
	if err := os.Setenv("TMPDIR", dir); err != nil {
		_ = os.Remove(dir)
		return func() {}
	}
	return func() {
		_ = os.Unsetenv("TMPDIR")
		_ = os.RemoveAll(dir)
	}
}

const shm = "/dev/shm"
