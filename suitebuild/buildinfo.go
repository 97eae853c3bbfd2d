// Package suitebuild says which build of parley is running, for the evidence
// bundle: the module version and VCS revision the Go toolchain stamped into
// the binary, or, when it stamped none (a `go run` in a checkout, or a build
// with -buildvcs=false), the revision of the checkout the binary was built
// from.
package suitebuild

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Base is the suite's version when the toolchain stamped none.
const Base = "0.2.0"

// Suite is the running build: its version and its commit ("unknown" when
// nothing says; a "+dirty" suffix when the checkout had local changes).
type Suite struct {
	Version string
	Commit  string
	// Modified says the build's source tree had local changes (the
	// "+dirty" on Commit).
	Modified bool
}

// String is the build in the form `parley --version` prints: the module
// version, the commit, and whether the tree it was built from was dirty.
func (s Suite) String() string {
	commit, _, _ := strings.Cut(s.Commit, "+")
	return fmt.Sprintf("parley %s\ncommit %s\ndirty %t\n", s.Version, commit, s.Modified)
}

var (
	once   sync.Once
	cached Suite
)

// Read returns the running build, computed once per process.
func Read() Suite {
	once.Do(func() { cached = read() })
	return cached
}

// pseudo matches the commit at the end of a Go pseudo-version
// (v0.0.0-20261130204313-025c8458e727).
var pseudo = regexp.MustCompile(`-\d{14}-([0-9a-f]{12})(\+.*)?$`)

func read() Suite {
	s := Suite{Version: Base + "+devel", Commit: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		// `go install module@version` and builds in module mode stamp the
		// module's version; a pseudo-version carries its commit.
		s.Version = v
		if m := pseudo.FindStringSubmatch(v); m != nil {
			s.Commit = m[1]
		}
	}
	var rev string
	var modified bool
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	if rev == "" {
		rev, modified = fromCheckout()
	}
	if rev != "" {
		s.Commit = rev
		if modified {
			s.Commit += "+dirty"
			s.Modified = true
		}
	}
	return s
}

// fromCheckout asks git for the revision of the source tree this file was
// compiled from, when the binary was built in place (not -trimpath) and
// the tree is still there.
func fromCheckout() (rev string, modified bool) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", false
	}
	dir := filepath.Dir(filepath.Dir(file))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	rev = strings.TrimSpace(string(out))
	if len(rev) != 40 {
		return "", false
	}
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	return rev, err == nil && len(strings.TrimSpace(string(st))) > 0
}
