package steps

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// A host the suite does not run on this machine's filesystem (a deployed
// url host) cannot have the power cut under it: the scenario is blocked,
// target-cannot-provide, before any exchange.
func TestAPowerCutIsBlockedWhereTheTargetCannotProvideOne(t *testing.T) {
	set := testSet(t)
	w := onFixture(t, deployedAt(t, "http://127.0.0.1:1", set, "stepstest-host"), set, "stepstest-host")
	err := w.KeepStateOnCuttableDisk()
	var b *Blocked
	if !errors.As(err, &b) || b.Cause != verdict.CauseTarget {
		t.Fatalf("want blocked %s, got %v", verdict.CauseTarget, err)
	}
}

// Cutting the power without having asked for a disk whose power can be cut
// is the scenario's fault, never the host's.
func TestAPowerCutWithoutACuttableDiskIsASuiteFault(t *testing.T) {
	set := testSet(t)
	tgt := target.NewRefhost()
	defer tgt.Close()
	w := onFixture(t, tgt, set, "stepstest-host")
	w.current = &target.Host{}
	err := w.PowerCut(context.Background())
	var f *SuiteFault
	if !errors.As(err, &f) {
		t.Fatalf("want a suite fault, got %v", err)
	}
}
