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
	"strconv"
	"strings"
	"sync"
	"time"
)

// Devel is the version of a build nothing names: no module version was
// stamped and no checkout says which commit it is.
const Devel = "(devel)"

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
	s := Suite{Version: Devel, Commit: "unknown"}
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
		var when time.Time
		rev, when, modified = fromCheckout()
		if rev != "" && s.Version == Devel {
			// The version `go install <module>@<commit>` stamps on this
			// commit (no release is tagged), so that a bundle made from a
			// checkout names the version the docs pin.
			s.Version = PseudoVersion(rev, when)
			if modified {
				s.Version += "+dirty" // as the toolchain marks a dirty build
			}
		}
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

// PseudoVersion is the Go pseudo-version of a commit of a module with no
// release tag before it: v0.0.0-<UTC commit time>-<12 hex of the commit>.
func PseudoVersion(rev string, when time.Time) string {
	return "v0.0.0-" + when.UTC().Format("20060102150405") + "-" + rev[:12]
}

// fromCheckout asks git for the revision of the source tree this file was
// compiled from, and its commit time, when the binary was built in place
// (not -trimpath) and the tree is still there.
func fromCheckout() (rev string, when time.Time, modified bool) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", time.Time{}, false
	}
	dir := filepath.Dir(filepath.Dir(file))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "log", "-1", "--format=%H %ct", "HEAD").Output()
	if err != nil {
		return "", time.Time{}, false
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || len(f[0]) != 40 {
		return "", time.Time{}, false
	}
	secs, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	return f[0], time.Unix(secs, 0), err == nil && len(strings.TrimSpace(string(st))) > 0
}
