package target

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// dockerImage builds the reference host image (FROM scratch, so no registry
// is needed) or skips when no Docker engine answers. It returns the image
// and the binary inside it. The build is made once per test process: the
// container tests run in parallel, and each building its own copy of the
// binary and image cost a minute of both cores on a loaded machine.
func dockerImage(t *testing.T) (image, binary string) {
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
	root := filepath.Join(filepath.Dir(file), "..")
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

// TestMain starts the image build at once, so that it overlaps the tests
// that need no engine (the container tests wait for it), and removes its
// directory once every test has ended.
func TestMain(m *testing.M) {
	flag.Parse()
	if run := flag.Lookup("test.run").Value.String(); !testing.Short() && (run == "" || strings.Contains(run, "Container")) {
		go imageOnce.Do(buildImage)
	}
	code := m.Run()
	if imageBuild.dir != "" {
		_ = os.RemoveAll(imageBuild.dir)
	}
	os.Exit(code)
}

func firstLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return strings.Join(lines, " | ")
}

func TestContainerTargetStartsAnImagePerConfiguration(t *testing.T) {
	t.Parallel()
	image, _ := dockerImage(t)
	c, err := NewContainer(image)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg, _ := ParseConfig([]byte(`{"contractrefine":{"mode":"advsiory"}}`))
	h, err := c.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(h.HTTP+"/v1/preflight", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a misspelt mode should leave the surface disabled (503), got %d", resp.StatusCode)
	}
	// The container logs the bad mode as it starts, before it serves; the
	// log reaches the target when the engine streams it, however late; the
	// bound is only there so a container that never logs it fails with its
	// log rather than at go test's timeout.
	logs, ok := h.Logs()
	for giveUp := time.Now().Add(2 * time.Minute); ok && !strings.Contains(strings.Join(logs, "\n"), "advsiory") && time.Now().Before(giveUp); {
		time.Sleep(50 * time.Millisecond)
		logs, _ = h.Logs()
	}
	if !strings.Contains(strings.Join(logs, "\n"), "advsiory") {
		t.Fatalf("the container's log never named the bad mode: %q", logs)
	}
	if s := c.Subject(); s.Digest["sha256"] == "" || s.Note != "" {
		t.Fatalf("the subject should be the image id: %+v", s)
	}
}
