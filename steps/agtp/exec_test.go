package agtp_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	agtpsteps "github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestExecAdapterCertifiesATOMLConfiguredHost runs the AGTP corpus through
// the exec target against docs/examples: an adapter that translates the
// suite's spec-level configuration into a TOML file and PEM files and
// starts a host without seams, which declares the flat request body form in
// its ready line. Every wire-witnessed requirement must pass over both
// transports; the seam-witnessed ones are blocked (the host has no seams),
// never failed; and the suite must have sent the form the host declared.
func TestExecAdapterCertifiesATOMLConfiguredHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an external host")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the example adapter needs jq")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "agtp-toml-host")
	build := exec.Command("go", "build", "-o", bin, "./docs/examples/agtp-toml-host")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example host: %v\n%s", err, out)
	}
	adapter, err := filepath.Abs("../../docs/examples/agtp-exec-adapter.sh")
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := target.NewExec("AGTP_BODY_FORM=flat AGTP_HOST=" + bin + " sh " + adapter)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
	if err != nil {
		t.Fatal(err)
	}
	var passed, blocked int
	for _, r := range res.Rows {
		e, _ := reg.Lookup(r.ID)
		want := verdict.ExecutedPass
		if e.Witness == scenarios.WitnessSeam {
			want = verdict.Blocked
		}
		if r.Result != want {
			t.Errorf("%s (%s witness) through the exec adapter: %s, want %s (%s)", r.ID, e.Witness, r.Result, want, r.Detail)
		}
		if r.Result == verdict.Blocked && (r.Cause != verdict.CauseDeclined || !strings.Contains(r.Detail, "no test seams")) {
			t.Errorf("%s blocked for another reason than the declined seams: %s: %s", r.ID, r.Cause, r.Detail)
		}
		switch r.Result {
		case verdict.ExecutedPass:
			passed++
		case verdict.Blocked:
			blocked++
		}
	}
	if got := res.Facts[agtpsteps.FactRequestForm]; strings.Join(got, ",") != target.BodyFormFlat {
		t.Errorf("the host declared the flat body form; the suite sent %v", got)
	}
	t.Logf("exec adapter: %d requirements executed-pass, %d blocked (seams); facts: %v", passed, blocked, res.Facts)
}
