package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// The test binary doubles as the parley command when PARLEY_AS_MAIN is set,
// so the exec target can be tested against `parley refhost` without a build.
// As tests, most wait on hosts (of their own, through the exec and url
// targets): four run at once, not go test's default of one per core
// (-parallel on the command line wins).
func TestMain(m *testing.M) {
	if os.Getenv("PARLEY_AS_MAIN") == "1" {
		os.Exit(execute(os.Args[1:]))
	}
	// A run caps the heap of its process (softHeapLimit) unless GOMEMLIMIT
	// is set: sized for one run, that cap made the collector run without
	// pause here, where four runs share the process.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		os.Setenv("GOMEMLIMIT", "off")
	}
	testpar.Main(m, 4, scratch.OnTmpfs())
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return "PARLEY_AS_MAIN=1 " + exe
}

const slice = "@profile:contractrefine-tool-binding"

func TestRunWritesAVerifiableBundleAndReports(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code := execute([]string{"run", "--quiet", "--tags", slice, "--out", out}); code != exitOK {
		t.Fatalf("run exited %d", code)
	}
	for _, f := range []string{"bundle.dsse.json", "ephemeral.pub", "junit.xml", "cucumber.json", "report.html"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	var cuc []map[string]any
	b, _ := os.ReadFile(filepath.Join(out, "cucumber.json"))
	if err := json.Unmarshal(b, &cuc); err != nil || len(cuc) == 0 {
		t.Errorf("cucumber.json is not a cucumber report: %v", err)
	}
	bundle, pub := filepath.Join(out, "bundle.dsse.json"), filepath.Join(out, "ephemeral.pub")
	if code := execute([]string{"verify", bundle, "--key", pub}); code != exitOK {
		t.Fatalf("verify of a fresh bundle exited %d", code)
	}
	raw, _ := os.ReadFile(bundle)
	raw[len(raw)/2] ^= 0x20
	changed := filepath.Join(out, "changed.dsse.json")
	if err := os.WriteFile(changed, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := execute([]string{"verify", changed, "--key", pub}); code != exitFailed {
		t.Fatalf("verify of a changed bundle exited %d, want %d", code, exitFailed)
	}
	if code := execute([]string{"report", bundle, "--key", pub, "--out", filepath.Join(out, "again.html")}); code != exitOK {
		t.Fatalf("report exited %d", code)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	for _, args := range [][]string{
		{"run", "--out", out, "--tags", "@req:no.such.requirement"},
		{"run", "--out", out, "--tags", "@profile:contractrefine-preflight and @req:x"},
		{"run", "--out", out, "--tags", "not @x"},
		{"run", "--out", out, "--target", "bogus"},
		{"run", "--out", out, "--target", "exec"},
		{"run", "--out", out, "--target", "url", "--url", "http://127.0.0.1:1"},
		{"run", "--out", out, "--profile", "no-such-profile"},
		{"run", "--out", out, "--format", "pdf"},
		{"run", "--out", out, "--key", filepath.Join(out, "missing.key")},
		{"run", "--no-such-flag"},
		{"verify", filepath.Join(out, "b.json")},
		{"requirements", "--family", "nope"},
		{"frobnicate"},
	} {
		if code := execute(args); code != exitUsage {
			t.Errorf("parley %s exited %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
}

func TestEnvironmentSuppliesFlagsAndFlagsWin(t *testing.T) {
	out := t.TempDir()
	t.Setenv("PARLEY_TAGS", "@req:no.such.requirement")
	if code := execute([]string{"run", "--quiet", "--out", out}); code != exitUsage {
		t.Fatalf("PARLEY_TAGS was not applied: exit %d", code)
	}
	if code := execute([]string{"run", "--quiet", "--out", out, "--tags", slice}); code != exitOK {
		t.Fatalf("--tags did not win over PARLEY_TAGS: exit %d", code)
	}
}

func TestKeygenAndSignedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code := execute([]string{"keygen", "--out", dir}); code != exitOK {
		t.Fatalf("keygen exited %d", code)
	}
	st, err := os.Stat(filepath.Join(dir, "parley.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, want 0600 (%v)", st.Mode().Perm(), err)
	}
	if code := execute([]string{"keygen", "--out", dir}); code != exitUsage {
		t.Fatalf("keygen over an existing key exited %d, want %d", code, exitUsage)
	}
	out := filepath.Join(dir, "out")
	if code := execute([]string{"run", "--quiet", "--tags", slice, "--out", out, "--key", filepath.Join(dir, "parley.key")}); code != exitOK {
		t.Fatalf("signed run exited %d", code)
	}
	if _, err := os.Stat(filepath.Join(out, "ephemeral.pub")); err == nil {
		t.Error("a run signed with --key wrote an ephemeral key")
	}
	if code := execute([]string{"verify", filepath.Join(out, "bundle.dsse.json"), "--key", filepath.Join(dir, "parley.pub")}); code != exitOK {
		t.Fatalf("verify with the signing key exited %d", code)
	}
	other := t.TempDir()
	execute([]string{"keygen", "--out", other})
	if code := execute([]string{"verify", filepath.Join(out, "bundle.dsse.json"), "--key", filepath.Join(other, "parley.pub")}); code != exitFailed {
		t.Fatalf("verify with another key exited %d, want %d", code, exitFailed)
	}
}

// TestExecTargetCertifiesTheRefhostAsAnExternalHost runs `parley refhost`
// through the exec adapter contract.
func TestExecTargetCertifiesTheRefhostAsAnExternalHost(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", self(t) + " refhost", "--tags", "@profile:contractrefine-preflight", "--out", out})
	if code != exitOK {
		t.Fatalf("exec run exited %d", code)
	}
	st := readStatement(t, out)
	if st.Predicate.Target.Kind != "exec" || st.Predicate.Totals.ExecutedPass != st.Predicate.Totals.Requirements {
		t.Fatalf("want every requirement passed through exec: %+v", st.Predicate.Totals)
	}
}

// TestAHostThatNeverStartsFailsEveryRequirement: a host that exits without
// its ready line is the host's failure, for every requirement it was asked
// to serve, never a blocked (and never a green) run.
func TestAHostThatNeverStartsFailsEveryRequirement(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", "/bin/false", "--out", out}); code != exitFailed {
		t.Fatalf("a host that never starts: exit %d, want %d", code, exitFailed)
	}
	st := readStatement(t, out)
	tot := st.Predicate.Totals
	if tot.Requirements == 0 || tot.ExecutedFail != tot.Requirements {
		t.Fatalf("want every requirement executed-fail: %+v", tot)
	}
	for _, r := range st.Predicate.Requirements {
		if !strings.Contains(r.Detail, "the host did not start with this configuration") {
			t.Fatalf("%s: the detail does not say the host did not start: %s", r.ID, r.Detail)
		}
	}
}

// declining writes an adapter that declines the enforce-mode fixture (or
// every fixture) and runs the reference host for the rest.
func declining(t *testing.T, all bool) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "adapter.sh")
	cond := `grep -q '"fixture":"contractrefine-enforce"' "$1"`
	if all {
		cond = "true"
	}
	body := "if " + cond + "; then echo '{\"parley\":\"declined\",\"reason\":\"this host has no enforce mode\"}'; exit 0; fi\nexec env " + self(t) + " refhost \"$1\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return "sh " + script
}

// TestADeclinedConfigurationIsBlockedWithItsReason: an adapter that declines
// a configuration blocks the scenarios that need it, with its reason; that
// fails the run unless a partial certification is asked for, which the
// bundle records.
func TestADeclinedConfigurationIsBlockedWithItsReason(t *testing.T) {
	t.Parallel()
	adapter := declining(t, false)
	out := t.TempDir()
	args := []string{"run", "--quiet", "--target", "exec", "--exec", adapter, "--tags", slice, "--out", out}
	if code := execute(args); code != exitFailed {
		t.Fatalf("a run with declined configurations exited %d, want %d", code, exitFailed)
	}
	st := readStatement(t, out)
	var blocked int
	for _, r := range st.Predicate.Requirements {
		switch r.Result {
		case verdict.Blocked:
			blocked++
			if r.Cause != verdict.CauseDeclined || !strings.Contains(r.Detail, "this host has no enforce mode") || !strings.Contains(r.Detail, "contractrefine-enforce") {
				t.Errorf("%s: blocked as %s (%s), want configuration-declined naming the fixture, with the host's reason", r.ID, r.Cause, r.Detail)
			}
		case verdict.ExecutedPass:
		default:
			t.Errorf("%s: %s (%s)", r.ID, r.Result, r.Detail)
		}
	}
	if blocked == 0 || st.Predicate.AllowBlocked {
		t.Fatalf("want some blocked requirements and no allowBlocked in the bundle: %+v", st.Predicate.Totals)
	}
	if code := execute(append(args, "--allow-blocked")); code != exitOK {
		t.Fatalf("with --allow-blocked: exit %d, want %d", code, exitOK)
	}
	if st := readStatement(t, out); !st.Predicate.AllowBlocked {
		t.Fatal("the bundle of an --allow-blocked run does not record it")
	}
}

// TestARunThatWitnessesNothingNeverSucceeds: when every configuration is
// declined nothing was witnessed, and even --allow-blocked does not make
// that a certification.
func TestARunThatWitnessesNothingNeverSucceeds(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", declining(t, true), "--tags", slice, "--out", out, "--allow-blocked"})
	if code != exitIncomplete {
		t.Fatalf("a run that witnessed nothing exited %d, want %d", code, exitIncomplete)
	}
}

// TestURLTargetBlocksWhatIsNotDeployedAndFailsWhatItBreaks deploys one
// reference host from the advisory fixture and lists it as the host of the
// enforce fixture (its ready line says so: a host that lies about what it
// runs): the enforce scenarios run against it and fail, and every other
// fixture's scenarios, which no listed host runs, are blocked.
func TestURLTargetBlocksWhatIsNotDeployedAndFailsWhatItBreaks(t *testing.T) {
	t.Parallel()
	dir, _ := writeFixtures(t)
	var ready target.ReadyLine
	if err := json.Unmarshal(deploy(t, filepath.Join(dir, "contractrefine-advisory.json")), &ready); err != nil {
		t.Fatal(err)
	}
	ready.Fixture = "contractrefine-enforce"
	line, _ := json.Marshal(ready)
	hosts := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(hosts, []byte(`{"contractrefine-enforce": `+string(line)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	code := execute([]string{"run", "--quiet", "--target", "url", "--fixtures", dir, "--hosts", hosts, "--tags", slice, "--out", out})
	if code != exitFailed {
		t.Fatalf("exit %d, want %d", code, exitFailed)
	}
	st := readStatement(t, out)
	tot := st.Predicate.Totals
	if tot.Blocked == 0 || tot.ExecutedFail == 0 {
		t.Fatalf("want some blocked and some failed: %+v", tot)
	}
	for _, r := range st.Predicate.Requirements {
		if r.Result == verdict.Blocked && (r.Cause != verdict.CauseTarget || !strings.Contains(r.Detail, "no host runs fixture") && !strings.Contains(r.Detail, "starts it again on its state")) {
			t.Errorf("%s: blocked as %s: %s; want target-cannot-provide naming the fixture no host runs, or the restart", r.ID, r.Cause, r.Detail)
		}
	}
}

func readStatement(t *testing.T, out string) evidence.Statement {
	t.Helper()
	st, err := verifyBundle(filepath.Join(out, "bundle.dsse.json"), filepath.Join(out, "ephemeral.pub"))
	if err != nil {
		t.Fatal(err)
	}
	return *st
}

// TestNothingSecretLeavesTheRun: the TLS private key the suite hands an AGTP
// host and the role keys of an AGL host are in their configurations, which
// the bundle lists; neither reaches the bundle, the report or the JUnit file.
func TestNothingSecretLeavesTheRun(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	tags := "@req:agtp.rcns.gate.server-policy-disabled,@req:agl.authority.issued-only-by-service"
	if code := execute([]string{"run", "--quiet", "--tags", tags, "--out", out}); code != exitOK {
		t.Fatalf("run exited %d", code)
	}
	st := readStatement(t, out)
	var keyed, redacted int
	for _, c := range st.Predicate.Target.Configurations {
		doc := string(c.Document)
		if strings.Contains(doc, "key_pem") || strings.Contains(doc, "operator_key") {
			keyed++
		}
		if strings.Contains(doc, "[redacted]") {
			redacted++
		}
	}
	if keyed == 0 || redacted != keyed {
		t.Fatalf("%d configurations carry keys, %d show them redacted", keyed, redacted)
	}
	payload, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"bundle payload": payload}
	for _, f := range []string{"report.html", "junit.xml", "cucumber.json"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	// A PEM key body, or an AGL role key (steps/agl makes them "op_<hex>").
	secret := regexp.MustCompile(`PRIVATE KEY-----(\\n|\n)[A-Za-z0-9+/]|"(op|authz|resolver)_[0-9a-f]{8,}`)
	for name, b := range files {
		if m := secret.Find(b); m != nil {
			t.Errorf("%s shows a secret (%q)", name, m)
		}
	}
}

// TestTheSubjectIsTheHostBuild: an exec host that names its build in the
// ready line is the bundle's subject, and verify --subject refuses the
// bundle for another build; a host that names none is "undeclared", never
// the hash of the interpreter that ran it.
func TestTheSubjectIsTheHostBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	digest := strings.Repeat("5a", 32)
	script := filepath.Join(dir, "host.sh")
	// The adapter runs the reference host and rewrites its ready line to
	// name another build, as an implementer's adapter would name theirs.
	body := "exec env " + self(t) + ` refhost "$1" | sed -u 's/"subject":{[^}]*}}/"subject":{"name":"acme-host","digest":{"sha256":"` + digest + `"}}/'` + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", "sh " + script, "--tags", slice, "--out", out}); code != exitOK {
		t.Fatalf("run exited %d", code)
	}
	st := readStatement(t, out)
	if s := st.Subject[0]; s.Name != "acme-host" || s.Digest["sha256"] != digest {
		t.Fatalf("subject %+v, want acme-host sha256:%s", s, digest)
	}
	bundle, pub := filepath.Join(out, "bundle.dsse.json"), filepath.Join(out, "ephemeral.pub")
	if code := execute([]string{"verify", bundle, "--key", pub, "--subject", "acme-host=sha256:" + digest}); code != exitOK {
		t.Fatalf("verify --subject of the right build exited %d", code)
	}
	if code := execute([]string{"verify", bundle, "--key", pub, "--subject", "acme-host=sha256:" + strings.Repeat("00", 32)}); code != exitFailed {
		t.Fatalf("verify --subject of another build exited %d, want %d", code, exitFailed)
	}

	// python3, sh or go would be the first word of many commands: none is
	// the subject.
	undeclaredOut := filepath.Join(dir, "undeclared")
	plain := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(plain, []byte("exec env "+self(t)+` refhost "$1" | sed -u 's/,"subject":{[^}]*}}//'`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", "sh " + plain, "--tags", slice, "--out", undeclaredOut}); code != exitOK {
		t.Fatalf("run exited %d", code)
	}
	st = readStatement(t, undeclaredOut)
	if s := st.Subject[0]; s.Name != "undeclared" || len(s.Digest) != 0 {
		t.Fatalf("a host that names no build got subject %+v", s)
	}
	if code := execute([]string{"verify", filepath.Join(undeclaredOut, "bundle.dsse.json"), "--key", filepath.Join(undeclaredOut, "ephemeral.pub"), "--subject", "acme-host=sha256:" + digest}); code != exitFailed {
		t.Fatalf("verify --subject of an undeclared bundle exited %d, want %d", code, exitFailed)
	}
}

// TestReportsAgreeWithTheVerdictsAndNothingStaleRemains: cucumber.json says
// what the bundle says (a blocked scenario is not "skipped" there), and a
// later run narrowed with --format leaves no earlier bundle in --out.
func TestReportsAgreeWithTheVerdictsAndNothingStaleRemains(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code := execute([]string{"run", "--quiet", "--target", "exec", "--exec", declining(t, false), "--tags", slice, "--out", out}); code != exitFailed {
		t.Fatalf("exit %d, want %d", code, exitFailed)
	}
	st := readStatement(t, out)
	blocked := map[string]bool{}
	for _, r := range st.Predicate.Requirements {
		for _, s := range r.Scenarios {
			if s.Result == verdict.Blocked {
				blocked[fmt.Sprintf("%s:%d", s.URI, s.Line)] = true
			}
		}
	}
	var features []struct {
		URI      string `json:"uri"`
		Elements []struct {
			Line  int64 `json:"line"`
			Steps []struct {
				Result struct {
					Status string `json:"status"`
					Error  string `json:"error_message"`
				} `json:"result"`
			} `json:"steps"`
		} `json:"elements"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "cucumber.json"))
	if err := json.Unmarshal(b, &features); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range features {
		for _, e := range f.Elements {
			if !blocked[fmt.Sprintf("%s:%d", f.URI, e.Line)] {
				continue
			}
			seen++
			failed := false
			for _, s := range e.Steps {
				if s.Result.Status == "failed" && strings.Contains(s.Result.Error, "blocked (configuration-declined)") {
					failed = true
				}
			}
			if !failed {
				t.Errorf("%s:%d is blocked in the bundle but cucumber.json does not say so", f.URI, e.Line)
			}
		}
	}
	if seen == 0 || seen != len(blocked) {
		t.Fatalf("cucumber.json has %d of the %d blocked scenarios", seen, len(blocked))
	}

	if code := execute([]string{"run", "--quiet", "--tags", slice, "--out", out, "--format", "junit"}); code != exitOK {
		t.Fatalf("narrowed run exited %d", code)
	}
	for _, f := range []string{"bundle.dsse.json", "ephemeral.pub", "cucumber.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s of the earlier run is still in --out", f)
		}
	}
}

// TestAProfileThatLeavesOutEveryTaggedScenarioSaysSo: tags that choose only
// scenarios the profiles leave out run nothing; the run says nothing was
// witnessed (exit 3) and still writes every report, cucumber.json an empty
// list, rather than failing on a report godog never wrote.
func TestAProfileThatLeavesOutEveryTaggedScenarioSaysSo(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code := execute([]string{"run", "--quiet", "--out", out, "--tags", "@req:agl.delegation.attenuates", "--profile", "agl-core"}); code != exitIncomplete {
		t.Fatalf("exit %d, want %d", code, exitIncomplete)
	}
	raw, err := os.ReadFile(filepath.Join(out, "cucumber.json"))
	if err != nil || strings.TrimSpace(string(raw)) != "[]" {
		t.Fatalf("cucumber.json is %q (%v), want an empty list", raw, err)
	}
}
