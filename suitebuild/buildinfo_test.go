package suitebuild

import (
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestABuildInTheCheckoutKnowsItsCommit: tests are built in place, without
// VCS stamping when GOFLAGS says -buildvcs=false, so the commit comes from
// the checkout; it must still be the checkout's.
func TestABuildInTheCheckoutKnowsItsCommit(t *testing.T) {
	want, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout here: %v", err)
	}
	s := Read()
	if !regexp.MustCompile(`^` + string(want[:40]) + `(\+dirty)?$`).MatchString(s.Commit) {
		t.Fatalf("commit %q, want %s", s.Commit, want[:40])
	}
	if s.Version == "" {
		t.Fatal("no version")
	}
}

// A build the toolchain did not stamp names the version the go command
// would give its commit: the pseudo-version of HEAD, which the docs' pins
// take the same form as.
func TestACheckoutBuildIsNamedByItsPseudoVersion(t *testing.T) {
	out, err := exec.Command("git", "log", "-1", "--format=%H %ct", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout here: %v", err)
	}
	s := Read()
	if regexp.MustCompile(`^v\d`).MatchString(s.Version) && !pseudo.MatchString(s.Version) {
		t.Skipf("the toolchain stamped a release version, %s", s.Version)
	}
	var rev string
	var secs int64
	if _, err := fmt.Sscanf(string(out), "%s %d", &rev, &secs); err != nil {
		t.Fatal(err)
	}
	want := PseudoVersion(rev, time.Unix(secs, 0))
	if s.Modified {
		want += "+dirty"
	}
	if s.Version != want {
		t.Fatalf("version %q, want %q", s.Version, want)
	}
}

func TestAPseudoVersionCarriesItsCommit(t *testing.T) {
	m := pseudo.FindStringSubmatch("v0.0.0-20261130204313-025c8458e727")
	if m == nil || m[1] != "025c8458e727" {
		t.Fatalf("got %v", m)
	}
}

func TestTheVersionLinesNameVersionCommitAndDirtyFlag(t *testing.T) {
	got := Suite{Version: "v0.0.0-20261201174216-610c020385c1", Commit: "610c020385c1eb8115f725d217e400f774a07217+dirty", Modified: true}.String()
	want := "parley v0.0.0-20261201174216-610c020385c1\ncommit 610c020385c1eb8115f725d217e400f774a07217\ndirty true\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
