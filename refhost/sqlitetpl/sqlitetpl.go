// Package sqlitetpl starts a new SQLite store from a copy of an empty one.
//
// Creating a store runs its schema: parsing the DDL, writing the pages and
// syncing them costs several milliseconds, and a conformance run starts a
// host (and so a store) for hundreds of configurations. The process builds
// each kind of store once, empty, and a new store begins as a copy of those
// bytes; the caller then opens it as usual (its schema statements, all IF
// NOT EXISTS, find everything in place).
package sqlitetpl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

var (
	mu        sync.Mutex
	templates = map[string]*template{}
)

type template struct {
	once sync.Once
	data []byte
	err  error
}

// Seed makes path a copy of the empty store of kind, unless a file is at
// path already (a store kept across a restart, or one another host sharing
// it made first). build creates an empty store of that kind at the path it
// is given and closes it; it runs once per kind per process.
//
// The copy is written beside path, synced, and linked into place, so that a
// store another process or host opens at path is never half written, and
// two hosts seeding one path at once end with one store.
func Seed(kind, path string, build func(path string) error) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data, err := templateFor(kind, build)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".seed-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

func templateFor(kind string, build func(string) error) ([]byte, error) {
	mu.Lock()
	t := templates[kind]
	if t == nil {
		t = &template{}
		templates[kind] = t
	}
	mu.Unlock()
	t.once.Do(func() {
		dir, err := os.MkdirTemp("", "parley-sqlitetpl-*")
		if err != nil {
			t.err = err
			return
		}
		defer os.RemoveAll(dir)
		p := filepath.Join(dir, "empty.db")
		if err := build(p); err != nil {
			t.err = fmt.Errorf("building the empty %s store: %w", kind, err)
			return
		}
		// Closed cleanly, the store has folded its write-ahead log into
		// the main file; one left behind would mean the copy lacks pages.
		if _, err := os.Stat(p + "-wal"); err == nil {
			t.err = fmt.Errorf("building the empty %s store: its write-ahead log was not checkpointed on close", kind)
			return
		}
		t.data, t.err = os.ReadFile(p)
	})
	return t.data, t.err
}
