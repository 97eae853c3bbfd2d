package sqlitetpl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestSeedCopiesTheTemplateBuiltOnce(t *testing.T) {
	builds := 0
	build := func(p string) error { builds++; return os.WriteFile(p, []byte("empty store"), 0o600) }
	dir := t.TempDir()
	for _, name := range []string{"a.db", "b.db"} {
		if err := Seed("test-copy", filepath.Join(dir, name), build); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "empty store" {
			t.Fatalf("%s holds %q", name, b)
		}
	}
	if builds != 1 {
		t.Fatalf("the template was built %d times", builds)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*seed-*")); len(left) != 0 {
		t.Fatalf("seed files left behind: %v", left)
	}
}

// A store that exists (kept across a restart) is never overwritten, and two
// hosts seeding one shared path at once leave one whole copy.
func TestSeedNeverOverwrites(t *testing.T) {
	data := bytes.Repeat([]byte("page"), 1<<16)
	build := func(p string) error { return os.WriteFile(p, data, 0o600) }
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.db")
	os.WriteFile(kept, []byte("state"), 0o600)
	if err := Seed("test-race", kept, build); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "state" {
		t.Fatalf("a kept store was overwritten: %q", b[:min(len(b), 16)])
	}
	shared := filepath.Join(dir, "shared.db")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := Seed("test-race", shared, build); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, _ := os.ReadFile(shared); !bytes.Equal(b, data) {
		t.Fatalf("the shared store holds %d bytes, want %d", len(b), len(data))
	}
}

func TestSeedReportsABuildFailure(t *testing.T) {
	err := Seed("test-fail", filepath.Join(t.TempDir(), "x.db"), func(string) error { return errors.New("disk full") })
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk full")) {
		t.Fatalf("got %v", err)
	}
}
