package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type workflow struct {
	Name string            `yaml:"name"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		RunsOn string `yaml:"runs-on"`
		Steps  []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			If   string            `yaml:"if"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestTheCopyableWorkflowWorks parses docs/certify/github-actions.yml and
// runs the command lines of its exec job, in order, against the reference
// host: parley as `go run "$PARLEY"` resolves and builds the pinned version,
// the implementer's host as a script that starts that parley's reference
// host. The commands must succeed as
// written, and leave a bundle the verify step accepts.
func TestTheCopyableWorkflowWorks(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/certify/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("the workflow is not YAML: %v", err)
	}
	if !strings.HasPrefix(wf.Env["PARLEY"], "github.com/parley-conformance/parley/cmd/parley@v") {
		t.Fatalf("the workflow does not pin a parley release: %q", wf.Env["PARLEY"])
	}
	for _, name := range []string{"certify", "certify-image"} {
		job, ok := wf.Jobs[name]
		if !ok || job.RunsOn == "" || len(job.Steps) == 0 {
			t.Fatalf("the workflow has no usable job %q", name)
		}
		uploads := false
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && s.If == "always()" && s.With["path"] == "parley-out/" {
				uploads = true
			}
		}
		if !uploads {
			t.Errorf("job %s does not upload parley-out/ whatever the outcome", name)
		}
	}

	// parley as the workflow gets it: the pinned version, resolved and built
	// by the go command through a proxy made of this repository's history
	// (installPin). A shallow clone without the pinned commit runs this
	// build instead, and says so.
	parley := "env PARLEY_AS_MAIN=1 " + strings.TrimPrefix(self(t), "PARLEY_AS_MAIN=1 ")
	version := strings.TrimPrefix(wf.Env["PARLEY"], modulePath+"/cmd/parley@")
	installed := false
	if m := pseudoVersion.FindStringSubmatch(version); m != nil && func() bool { _, err := git(t, "rev-parse", "-q", "--verify", m[2]+"^{commit}"); return err == nil }() {
		parley, installed = installPin(t, resolvePin(t, version)), true
	} else if _, err := git(t, "rev-parse", "-q", "--verify", "refs/tags/"+version); err == nil {
		parley, installed = installPin(t, resolvePin(t, version)), true
	} else {
		t.Logf("the pinned %s is not in this checkout; the steps run this build of parley", version)
	}

	if installed {
		// The adopter's first check that the pin took: the installed
		// binary names the pinned version and its commit.
		out, err := exec.Command(parley, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", version, err, out)
		}
		m := pseudoVersion.FindStringSubmatch(version)
		if !strings.HasPrefix(string(out), "parley "+version+"\n") || (m != nil && !strings.Contains(string(out), "commit "+m[2])) {
			t.Fatalf("the parley installed at %s says %q", version, out)
		}
	}

	dir := t.TempDir()
	host := filepath.Join(dir, "bin", "my-host")
	ran := 0
	for _, s := range wf.Jobs["certify"].Steps {
		if s.Run == "" {
			continue
		}
		line := strings.TrimSpace(s.Run)
		if strings.HasPrefix(line, "go build -o ./bin/my-host") {
			// The implementer's build: here, a host that is the reference host.
			if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(host, []byte("#!/bin/sh\nexec "+parley+" refhost \"$1\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ran++
			continue
		}
		if !strings.HasPrefix(line, `go run "$PARLEY" `) {
			t.Fatalf("step %q runs %q, which this test does not know how to run", s.Name, line)
		}
		cmd := exec.Command("/bin/sh", "-c", parley+" "+strings.TrimPrefix(line, `go run "$PARLEY" `))
		cmd.Dir = dir
		// A slice of the corpus keeps the test short; the workflow runs all.
		cmd.Env = append(os.Environ(), "PARLEY_TAGS="+slice, "PARLEY_QUIET=true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %q (%s) failed: %v\n%s", s.Name, line, err, out)
		}
		ran++
	}
	if ran != 3 {
		t.Fatalf("ran %d steps of the certify job, want 3 (build, certify, verify)", ran)
	}
	if _, err := os.Stat(filepath.Join(dir, "parley-out", "report.html")); err != nil {
		t.Fatalf("the workflow's run left no report: %v", err)
	}
}
