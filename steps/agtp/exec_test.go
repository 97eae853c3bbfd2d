package agtp_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	agtpsteps "github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// buildTOMLHost builds the example host and returns the exec command that
// runs it through its adapter with the given environment.
func buildTOMLHost(t *testing.T) string {
	t.Helper()
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
	return "AGTP_HOST=" + bin + " sh " + adapter
}

func runAGTP(t *testing.T, command string) (*scenarios.Registry, *runner.Result) {
	t.Helper()
	tgt, err := target.NewExec(command)
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
	return reg, res
}

// TestExecAdapterCertifiesATOMLConfiguredHost runs the AGTP corpus through
// the exec target against docs/examples: an adapter that translates the
// suite's spec-level fixtures into a TOML file and PEM files and starts a
// host without seams (and without an HTTP surface), which declares the flat
// request body form in its ready line and serves plaintext on loopback
// beside TLS. Every wire-witnessed requirement must pass over both
// transports; the seam-witnessed ones are blocked (the host has no seam),
// never failed; and the suite must have sent the form the host declared.
func TestExecAdapterCertifiesATOMLConfiguredHost(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	reg, res := runAGTP(t, "AGTP_BODY_FORM=flat "+buildTOMLHost(t))
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
		if r.Result == verdict.Blocked && r.Cause != verdict.CauseSeamAbsent {
			t.Errorf("%s blocked for another reason than the absent seams: %s: %s", r.ID, r.Cause, r.Detail)
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
	t.Logf("exec adapter: %d requirements executed-pass, %d blocked (seams); %d hosts started; facts: %v", passed, blocked, res.Hosts, res.Facts)
}

// TestAHostWithoutThePlaintextListener: a host that serves AGTP over TLS
// only declares the fixtures' optional member plaintext-listener
// unsupported in its ready line. The scenarios over plaintext loopback are
// then blocked naming the member, never failed, and those over TLS 1.3 still
// run and pass.
func TestAHostWithoutThePlaintextListener(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	_, res := runAGTP(t, "AGTP_PLAINTEXT=off "+buildTOMLHost(t))
	var tlsPassed, plainBlocked int
	for _, s := range res.Scenarios {
		switch {
		case strings.Contains(s.Name, "[plaintext loopback]") || strings.Contains(s.Name, ", plaintext loopback]"):
			if s.Result != verdict.Blocked || s.Cause != verdict.CauseDeclined || !strings.Contains(s.Detail, fixtures.AGTPPlaintextMember) {
				t.Errorf("%s:%d %s: %s (%s: %s), want blocked naming member %s", s.URI, s.Line, s.Name, s.Result, s.Cause, s.Detail, fixtures.AGTPPlaintextMember)
				continue
			}
			plainBlocked++
		case s.Result == verdict.ExecutedPass:
			tlsPassed++
		case s.Result == verdict.Blocked && s.Cause == verdict.CauseSeamAbsent:
		case s.Result == verdict.Inapplicable && strings.Contains(s.Detail, "clock seam"):
			// A clock-seam variant of a TTL witness; its real-time rows run.
		default:
			t.Errorf("%s:%d %s over TLS: %s (%s: %s)", s.URI, s.Line, s.Name, s.Result, s.Cause, s.Detail)
		}
	}
	if tlsPassed == 0 || plainBlocked == 0 {
		t.Fatalf("%d TLS scenarios passed, %d plaintext ones were blocked: want both", tlsPassed, plainBlocked)
	}
	t.Logf("%d scenarios over TLS passed, %d over plaintext were blocked naming %s", tlsPassed, plainBlocked, fixtures.AGTPPlaintextMember)
}
