package targettest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
)

// ReferenceImage builds the reference host's container image (FROM
// scratch, so no registry is needed; target/testdata/refhost.Dockerfile) or
// skips when no Docker engine answers. It returns the image and the binary
// inside it. The build is made once per test process (MainWithImage starts
// it early): container tests run in parallel, and each building its own
// copy of the binary and image cost a minute of both cores.
func ReferenceImage(t testing.TB) (image, binary string) {
	t.Helper()
	imageOnce.Do(buildImage)
	if imageBuild.skip != "" {
		t.Skip(imageBuild.skip)
	}
	if imageBuild.err != "" {
		t.Fatal(imageBuild.err)
	}
	return imageBuild.image, imageBuild.binary
}

// MainWithImage is the TestMain of a package with container tests: it
// starts the image build at once when the run may need it (not -short, and
// a -run pattern that is empty or names a container test), so that it
// overlaps the tests that need no engine; it keeps the tests' scratch on
// tmpfs (internal/scratch) and removes the build's directory once every
// test has ended.
func MainWithImage(m *testing.M) {
	flag.Parse()
	if run := flag.Lookup("test.run").Value.String(); !testing.Short() && (run == "" || strings.Contains(run, "Container")) {
		go imageOnce.Do(buildImage)
	}
	testpar.Main(m, 0, scratch.OnTmpfs(), removeImageBuild)
}

// removeImageBuild removes the build's directory, waiting for a build
// under way.
func removeImageBuild() {
	imageOnce.Do(func() {})
	if imageBuild.dir != "" {
		_ = os.RemoveAll(imageBuild.dir)
	}
}

var (
	imageOnce  sync.Once
	imageBuild struct{ image, binary, dir, skip, err string }
)

func buildImage() {
	b := &imageBuild
	if _, err := exec.LookPath("docker"); err != nil {
		b.skip = "container target: no docker CLI on this machine; CI on a machine with a Docker engine runs this test"
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		b.skip = fmt.Sprintf("container target: no Docker engine answers (%v): %s", err, firstLines(string(out)))
		return
	}
	dir, err := os.MkdirTemp("", "parley-image-")
	if err != nil {
		b.err = err.Error()
		return
	}
	b.dir = dir
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "parley"), "./cmd/parley")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.err = fmt.Sprintf("building the refhost binary: %v\n%s", err, out)
		return
	}
	df, err := os.ReadFile(filepath.Join(root, "target", "testdata", "refhost.Dockerfile"))
	if err != nil {
		b.err = err.Error()
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
		b.err = err.Error()
		return
	}
	image := "parley-refhost:test"
	if out, err := exec.Command("docker", "build", "-q", "-t", image, dir).CombinedOutput(); err != nil {
		b.err = fmt.Sprintf("docker build: %v\n%s", err, out)
		return
	}
	b.image, b.binary = image, filepath.Join(dir, "parley")
}

func firstLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return strings.Join(lines, " | ")
}
