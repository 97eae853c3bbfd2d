package main

import (
	"testing"

	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/target/targettest"
)

// TestTheExecTargetRestartsAHostOnItsState: the exec target stops `parley
// refhost` (SIGTERM, then SIGKILL for a crash) and runs it again with the
// same configuration; its state directory keeps what it answered.
func TestTheExecTargetRestartsAHostOnItsState(t *testing.T) {
	t.Parallel()
	tgt, err := target.NewExec(self(t) + " refhost")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	targettest.RestartKeepsState(t, tgt, true, false)
}

// TestTheExecTargetRestartsAHostUnderAChangedConfiguration: the exec target
// stops `parley refhost` and runs it again with a configuration file holding
// the changed configuration, on the same state directory.
func TestTheExecTargetRestartsAHostUnderAChangedConfiguration(t *testing.T) {
	t.Parallel()
	tgt, err := target.NewExec(self(t) + " refhost")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	targettest.RestartWithKeepsStateUnderChange(t, tgt, true)
}
