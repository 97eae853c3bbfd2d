package target_test

import (
	"context"
	"errors"
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

// TestTheRefhostTargetRestartsAHostUnderAChangedConfiguration: the same
// host, on its state, runs a changed configuration after a crash, and is
// retired once released.
func TestTheRefhostTargetRestartsAHostUnderAChangedConfiguration(t *testing.T) {
	tgt := target.NewRefhost()
	defer tgt.Close()
	targettest.RestartWithKeepsStateUnderChange(t, tgt, true)
}

// A url host is not the suite's to stop or reconfigure: it answers that it
// cannot, so the scenarios are blocked, never failed.
func TestAURLHostCannotBeRestartedUnderAChangedConfiguration(t *testing.T) {
	var tgt target.Target = &target.URL{}
	r, ok := tgt.(target.Reconfigurer)
	if !ok {
		t.Fatal("the url target should answer RestartWith, saying it cannot")
	}
	cfg, _ := target.ParseConfig([]byte(`{}`))
	_, err := r.RestartWith(context.Background(), cfg, cfg, true)
	if !errors.Is(err, target.ErrCannotReconfigure) || !errors.Is(err, target.ErrUnsatisfiable) {
		t.Fatalf("want a blocking error saying why, got %v", err)
	}
}

// ChangedFrom keeps the host's key, so the pool finds the same host; the
// document, and so the digest, is the changed one.
func TestAChangedConfigurationIsCachedAsTheHostItChanged(t *testing.T) {
	base, _ := target.ParseConfig([]byte(`{"agl":{"a":1},"state_dir":"/x"}`))
	base = base.WithLane("l")
	other, _ := target.ParseConfig([]byte(`{"agl":{"a":2}}`))
	run, err := target.ChangedRun(base, other)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Changed() || run.Key() != base.Key() || run.Digest() == base.Digest() || run.StateDir() != "/x" || !run.Lane() || base.Changed() {
		t.Fatalf("changed %v key %s (base %s) state %q lane %v", run.Changed(), run.Key(), base.Key(), run.StateDir(), run.Lane())
	}
	elsewhere, _ := other.WithStateDir("/y")
	if _, err := target.ChangedRun(base, elsewhere); err == nil {
		t.Fatal("a changed configuration on another state directory should be refused")
	}
}

// TestTheContainerTargetRestartsAHostUnderAChangedConfiguration: a new
// container of the same image under the changed configuration, on the
// state directory the engine mounts at the same path. It skips, saying so,
// where no Docker engine answers.
func TestTheContainerTargetRestartsAHostUnderAChangedConfiguration(t *testing.T) {
	t.Parallel() // waits on the engine; the image is built once for the process
	image, _ := targettest.ReferenceImage(t)
	c, err := target.NewContainer(image)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	targettest.RestartWithKeepsStateUnderChange(t, c, true)
}
