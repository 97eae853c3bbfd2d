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

// The targets whose hosts keep their state on this machine's filesystem and
// which kill their hosts themselves can cut the power under a host; a
// container's state lives behind the engine's mount and a url host is not
// the suite's to kill, so those cannot.
func TestWhichTargetsCutThePower(t *testing.T) {
	for name, tgt := range map[string]target.Target{"refhost": target.NewRefhost(), "exec": &target.Exec{}} {
		if _, ok := tgt.(target.PowerCutter); !ok {
			t.Errorf("the %s target cannot cut the power", name)
		}
	}
	for name, tgt := range map[string]target.Target{"container": &target.Container{}, "url": &target.URL{}, "deployed": &target.Deployed{}} {
		if _, ok := tgt.(target.PowerCutter); ok {
			t.Errorf("the %s target claims to cut the power under its hosts", name)
		}
	}
}
