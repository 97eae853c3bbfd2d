package lazyfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func mount(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("FUSE is not usable here: %v", err)
	}
	f, err := MountTemp()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An appended line that was fsync'd survives a power cut; one that was
// only written is read back until the cut and lost by it.
func TestAPowerCutLosesOnlyWhatWasNotSynced(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir, "wal")
	w, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("one\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p); got != "one\ntwo\n" {
		t.Fatalf("before the cut the file reads %q, want both lines", got)
	}
	if got := read(t, filepath.Join(f.Backing, "wal")); got != "one\n" {
		t.Fatalf("the disk holds %q before the cut, want only the synced line", got)
	}
	if f.Unsynced() != 1 {
		t.Fatalf("Unsynced = %d, want 1", f.Unsynced())
	}
	f.PowerCut()
	if _, err := w.WriteString("three\n"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write after the cut: %v, want EIO", err)
	}
	if err := w.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a sync after the cut: %v, want EIO", err)
	}
	f.Resume()
	if got := read(t, p); got != "one\n" {
		t.Fatalf("after the cut the file reads %q, want only the synced line", got)
	}
	// Appending again lands after what survived.
	if _, err := w.WriteString("four\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	f.PowerCut()
	f.Resume()
	if got := read(t, p); got != "one\nfour\n" {
		t.Fatalf("after a synced append and a second cut the file reads %q", got)
	}
}

// A truncate is a write like any other: lost unless synced. A new file
// written, synced and renamed keeps its content.
func TestTruncateAndRename(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir, "f")
	if err := os.WriteFile(p, []byte("abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Size() != 2 {
		t.Fatalf("size after truncate %d, want 2", st.Size())
	}
	w.Close()
	f.PowerCut()
	f.Resume()
	if got := read(t, p); got != "abcdef" {
		t.Fatalf("an unsynced truncate survived the cut: %q", got)
	}
	tmp := filepath.Join(f.Dir, "tmp")
	w, err = os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("new")
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	f.PowerCut()
	f.Resume()
	if got := read(t, p); got != "new" {
		t.Fatalf("a synced, renamed file reads %q after the cut", got)
	}
}
