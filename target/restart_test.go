package target_test

import (
	"testing"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/target/targettest"
)

// TestTheRefhostTargetRestartsAHostOnItsState: a decision a host answered is
// read back after the host was closed cleanly and after it crashed, from the
// state directory its configuration names.
func TestTheRefhostTargetRestartsAHostOnItsState(t *testing.T) {
	tgt := target.NewRefhost()
	defer tgt.Close()
	targettest.RestartKeepsState(t, tgt, false, true)
}
