package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/certify"
	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
)

// sabotagedBundle runs the slice against a reference host broken by the
// named rule and writes a bundle signed with the key at keyPath, as a run
// of a broken build would; tamper may alter the statement before signing.
func sabotagedBundle(t *testing.T, rule, keyPath, out string, tamper func(*evidence.Statement)) {
	t.Helper()
	var r sabotage.Rule
	for _, x := range sabotage.Rules() {
		if x.Key() == rule {
			r = x
		}
	}
	if r.ID == "" {
		t.Fatalf("no sabotage rule %s", rule)
	}
	priv, err := evidence.ReadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: r}
	defer tgt.Close()
	o, err := certify.Execute(context.Background(), certify.Config{Target: tgt, Tags: slice, Key: priv})
	if err != nil {
		t.Fatal(err)
	}
	st := o.Statement
	if tamper != nil {
		tamper(&st)
	}
	env, err := evidence.Sign(st, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "bundle.dsse.json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiffNamesWhatRegressed: a bundle of the reference host against a
// bundle of a host broken for one requirement names that requirement as
// regressed and exits 1; the reverse names it newly passing and exits 0;
// bundles of different registries are refused unless asked.
func TestDiffNamesWhatRegressed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code := execute([]string{"keygen", "--out", dir}); code != exitOK {
		t.Fatal("keygen failed")
	}
	key, pub := filepath.Join(dir, "parley.key"), filepath.Join(dir, "parley.pub")
	good := filepath.Join(dir, "good")
	if code := execute([]string{"run", "--quiet", "--tags", slice, "--out", good, "--key", key}); code != exitOK {
		t.Fatalf("run exited %d", code)
	}
	const broken = "contractrefine.tool.enforce-bound-call-allowed"
	bad := filepath.Join(dir, "bad")
	sabotagedBundle(t, broken, key, bad, nil)

	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"diff", filepath.Join(good, "bundle.dsse.json"), filepath.Join(bad, "bundle.dsse.json"), "--key", pub, "--html", filepath.Join(dir, "diff.html")})
	err := root.Execute()
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != exitFailed {
		t.Fatalf("diff of a regression: %v, want exit %d", err, exitFailed)
	}
	text := out.String()
	reg := text[strings.Index(text, "regressed:"):strings.Index(text, "newly passing:")]
	if !strings.Contains(reg, broken) {
		t.Fatalf("the regression is not named:\n%s", text)
	}
	if !strings.Contains(text, "seed") || !strings.Contains(text, "parley-refhost") {
		t.Fatalf("the diff does not name each run's subject and seed:\n%s", text)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "diff.html")); err != nil || !strings.Contains(string(b), broken) {
		t.Fatalf("the HTML diff does not name the regression: %v", err)
	}
	if code := execute([]string{"diff", filepath.Join(bad, "bundle.dsse.json"), filepath.Join(good, "bundle.dsse.json"), "--key", pub}); code != exitOK {
		t.Fatalf("diff of an improvement exited %d, want %d", code, exitOK)
	}

	other := filepath.Join(dir, "other")
	sabotagedBundle(t, broken, key, other, func(st *evidence.Statement) {
		st.Predicate.RegistryDigest = "sha256:" + strings.Repeat("0", 64)
	})
	if code := execute([]string{"diff", filepath.Join(good, "bundle.dsse.json"), filepath.Join(other, "bundle.dsse.json"), "--key", pub}); code != exitUsage {
		t.Fatalf("diff across registries exited %d, want %d", code, exitUsage)
	}
	if code := execute([]string{"diff", filepath.Join(good, "bundle.dsse.json"), filepath.Join(other, "bundle.dsse.json"), "--key", pub, "--allow-registry-change"}); code != exitFailed {
		t.Fatalf("diff across registries, allowed, exited %d, want %d (the regression)", code, exitFailed)
	}
}
