package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// freeAddr is a loopback address nothing listens on right now, on a port
// below the kernel's ephemeral range (Linux's starts at 32768): the caller
// binds it later (the fakes' address is written into the fixtures first),
// and a port from the ephemeral range could be handed to another parallel
// test's socket in between.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

// writeFixtures runs parley fixtures and reads back its manifest.
func writeFixtures(t *testing.T) (string, fixtures.Manifest) {
	t.Helper()
	dir := t.TempDir()
	if code := execute([]string{"fixtures", "--out", dir, "--fakes", freeAddr(t)}); code != exitOK {
		t.Fatalf("parley fixtures exited %d", code)
	}
	var m fixtures.Manifest
	b, err := os.ReadFile(filepath.Join(dir, fixtures.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Fixtures) == 0 || len(m.Fixtures) > 25 {
		t.Fatalf("the suite publishes %d fixtures, want between 1 and 25", len(m.Fixtures))
	}
	return dir, m
}

// deploy starts `parley refhost FILE` the way an operator would, and
// returns its ready line.
func deploy(t *testing.T, config string) json.RawMessage {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "refhost", config)
	cmd.Env = append(os.Environ(), "PARLEY_AS_MAIN=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- append([]byte(nil), sc.Bytes()...)
		}
		close(line)
	}()
	select {
	case b, ok := <-line:
		if !ok {
			t.Fatalf("parley refhost %s printed no ready line", config)
		}
		return b
	case <-time.After(2 * time.Minute):
		t.Fatalf("parley refhost %s printed no ready line in two minutes", config)
	}
	return nil
}

// One reference host per fixture, started by hand, certifies the corpus
// through the url target: nothing fails, and what cannot be witnessed on a
// host the suite did not start (restarts, crashes) is blocked, not failed.
func TestHostsDeployedFromTheFixturesCertifyThroughTheURLTarget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("deploys a host per fixture and runs the whole corpus")
	}
	dir, m := writeFixtures(t)
	hosts := map[string]json.RawMessage{}
	for _, e := range m.Fixtures {
		hosts[e.Name] = deploy(t, filepath.Join(dir, e.Config))
	}
	hostsFile := filepath.Join(t.TempDir(), "hosts.json")
	b, _ := json.MarshalIndent(hosts, "", "  ")
	if err := os.WriteFile(hostsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code := execute([]string{"run", "--quiet", "--allow-blocked", "--target", "url", "--fixtures", dir, "--hosts", hostsFile, "--out", out})
	st := readStatement(t, out)
	if code != exitOK {
		t.Errorf("the run exited %d", code)
	}
	pass, all := 0, len(st.Predicate.Requirements)
	for _, r := range st.Predicate.Requirements {
		switch r.Result {
		case verdict.ExecutedPass, verdict.Inapplicable:
			pass++
		case verdict.ExecutedFail:
			t.Errorf("%s failed on a deployed reference host: %s", r.ID, r.Detail)
		case verdict.Blocked:
			t.Logf("blocked %s (%s): %s", r.ID, r.Cause, firstLine(r.Detail))
		}
	}
	t.Logf("%d of %d requirements certified through the url target", pass, all)
	if pass*10 < all*9 {
		t.Errorf("%d of %d requirements certified through the url target, want at least 90%%", pass, all)
	}
	// A second run against the same hosts leases identities the first did not.
	if _, err := os.Stat(filepath.Join(dir, fixtures.LeasesFile)); err != nil {
		t.Errorf("the run recorded no leases in the fixture set: %v", err)
	}
}

// Bad input to the url target is a usage error naming what to fix, never a
// failed requirement and never a hang.
func TestDeployedHostsBadInputIsAUsageError(t *testing.T) {
	t.Parallel()
	dir, m := writeFixtures(t)
	first := m.Fixtures[0]
	other := m.Fixtures[len(m.Fixtures)-1]
	write := func(doc string) string {
		p := filepath.Join(t.TempDir(), "hosts.json")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addr := "http://" + freeAddr(t)
	cases := []struct {
		name  string
		args  []string
		wants string
	}{
		{"no HOSTS.json", []string{"--fixtures", dir, "--hosts", filepath.Join(dir, "missing.json")}, "--hosts"},
		{"no fixture set", []string{"--fixtures", filepath.Join(dir, "nowhere"), "--hosts", write("{}")}, "parley fixtures --out"},
		{"hosts without fixtures", []string{"--hosts", write("{}")}, "--fixtures DIR"},
		{"malformed", []string{"--fixtures", dir, "--hosts", write("{\n  \"" + first.Name + "\": {\"parley\": \"ready\",,}\n}")}, "line 2"},
		{"an unknown fixture", []string{"--fixtures", dir, "--hosts", write(`{"no-such-fixture": {"parley": "ready"}}`)}, "no fixture of the set"},
		{"a host running another fixture", []string{"--fixtures", dir, "--hosts", write(`{"` + first.Name + `": {"parley": "ready", "http": "` + addr + `", "agtp": "127.0.0.1:1", "fixture": "` + other.Name + `"}}`)}, "says it runs fixture " + other.Name},
	}
	for _, c := range cases {
		var stderr strings.Builder
		code := executeTo(append([]string{"run", "--quiet", "--target", "url", "--out", t.TempDir()}, c.args...), &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.wants) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %q", c.name, code, stderr.String(), exitUsage, c.wants)
		}
	}
}

// A fixture whose host is listed but does not answer blocks its scenarios,
// naming the fixture; the other fixtures' scenarios are not run against it.
func TestADeployedHostThatDoesNotAnswerBlocksItsFixture(t *testing.T) {
	t.Parallel()
	dir, m := writeFixtures(t)
	var e fixtures.Entry
	for _, x := range m.Fixtures {
		if x.Family == "contractrefine" {
			e = x
		}
	}
	if e.Name == "" {
		t.Skip("no ContractRefine fixture is published yet")
	}
	line, _ := json.Marshal(target.ReadyLine{Parley: "ready", HTTP: "http://" + freeAddr(t), Fixture: e.Name})
	hostsFile := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(hostsFile, []byte(`{"`+e.Name+`": `+string(line)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code := execute([]string{"run", "--quiet", "--target", "url", "--fixtures", dir, "--hosts", hostsFile, "--out", out, "--tags", "@fixture:" + e.Name})
	if code != exitIncomplete {
		t.Errorf("a run whose only host does not answer exited %d, want %d (nothing witnessed)", code, exitIncomplete)
	}
	for _, r := range readStatement(t, out).Predicate.Requirements {
		if r.Result == verdict.Skipped {
			continue
		}
		if r.Result != verdict.Blocked || r.Cause != verdict.CauseTarget || !strings.Contains(r.Detail, e.Name) {
			t.Errorf("%s: %s (%s) %q; want blocked (target-cannot-provide) naming fixture %s", r.ID, r.Result, r.Cause, r.Detail, e.Name)
		}
	}
}
