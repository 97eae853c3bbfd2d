package scratch

import (
	"os"
	"strings"
	"testing"
)

// OnTmpfs moves TMPDIR to a directory of its own on /dev/shm where that is
// a tmpfs, removes it afterwards, and leaves a TMPDIR the caller set alone.
func TestOnTmpfs(t *testing.T) {
	t.Setenv("TMPDIR", "/somewhere/chosen")
	remove := OnTmpfs()
	if got := os.Getenv("TMPDIR"); got != "/somewhere/chosen" {
		t.Fatalf("a TMPDIR the caller set became %q", got)
	}
	remove()
	if got := os.Getenv("TMPDIR"); got != "/somewhere/chosen" {
		t.Fatalf("removing changed the caller's TMPDIR to %q", got)
	}
	os.Unsetenv("TMPDIR")
	if !isTmpfs(shm) {
		t.Skipf("%s is not a tmpfs here", shm)
	}
	remove = OnTmpfs()
	dir := os.TempDir()
	if !strings.HasPrefix(dir, shm+"/parley-test-") {
		t.Fatalf("TMPDIR is %q, want a directory of its own on %s", dir, shm)
	}
	if err := os.WriteFile(dir+"/x", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s outlived remove: %v", dir, err)
	}
	if _, set := os.LookupEnv("TMPDIR"); set {
		t.Fatal("TMPDIR is still set after remove")
	}
}
