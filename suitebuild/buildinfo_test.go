package suitebuild

import (
	"os/exec"
	"regexp"
	"testing"
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

func TestAPseudoVersionCarriesItsCommit(t *testing.T) {
	m := pseudo.FindStringSubmatch("v0.0.0-20261130204313-025c8458e727")
	if m == nil || m[1] != "025c8458e727" {
		t.Fatalf("got %v", m)
	}
}
