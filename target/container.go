package target

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The container adapter contract (docs/host-interface.md): the image's
// entrypoint starts the host with the configuration path as its one
// argument, serves HTTP on ContainerHTTPPort and AGTP on ContainerAGTPPort,
// and prints the exec ready line once it serves.
const (
	ContainerConfigPath = "/etc/parley/config.json"
	ContainerHTTPPort   = "8080/tcp"
	ContainerAGTPPort   = "4480/tcp"
)

// Container starts an image once per configuration with testcontainers-go.
// The image must already be present on the Docker engine: nothing is pulled.
//
// With HostNetwork (the default on Linux) a container shares the machine's
// network: the host reaches the fakes the suite runs on loopback, and the
// suite reaches the host on loopback (so plaintext AGTP is a loopback peer's,
// as with exec). Ports cannot be published then, so the target asks the host
// to listen on 127.0.0.1 with ports of its choosing (PARLEY_LISTEN and
// PARLEY_AGTP_LISTEN) and reads the addresses from its ready line. Without
// it the container has a network namespace of its own, its fixed ports are
// published, and the scenarios that need a callback or a loopback peer are
// blocked.
type Container struct {
	Image        string
	StartTimeout time.Duration
	HostNetwork  bool
	// AGTPBodyForm is the body form the image's host declares it reads.
	AGTPBodyForm string
	p            pool

	mu      sync.Mutex
	imageID string
}

// StartBound is how long a container may take to print its ready line.
func (t *Container) StartBound() time.Duration { return t.StartTimeout }

// SetStartBound sets it (call before the first container starts).
func (t *Container) SetStartBound(d time.Duration) { t.StartTimeout = d }

// NewContainer returns a container target for an image reference.
func NewContainer(image string) (*Container, error) {
	if strings.TrimSpace(image) == "" {
		return nil, errors.New("container target: empty image reference")
	}
	// The reaper container would have to be pulled, and no registry is
	// reachable; the target removes its own containers at Close instead.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	t := &Container{Image: image, StartTimeout: 60 * time.Second, HostNetwork: runtime.GOOS == "linux"}
	t.p.start = t.start
	return t, nil
}

func (t *Container) start(ctx context.Context, cfg Config) (*Host, Stopper, error) {
	req := testcontainers.ContainerRequest{
		Image:        t.Image,
		ExposedPorts: []string{ContainerHTTPPort, ContainerAGTPPort},
		Cmd:          []string{ContainerConfigPath},
		Files: []testcontainers.ContainerFile{{
			Reader:            bytes.NewReader(cfg.JSON()),
			ContainerFilePath: ContainerConfigPath,
			FileMode:          0o644,
		}},
		WaitingFor: wait.ForLog(`"parley":"ready"`).WithStartupTimeout(t.StartTimeout),
	}
	// Paths a scenario puts in a configuration (a store two hosts share)
	// are under the suite's temporary directory: the container sees it at
	// the same path.
	tmp := os.TempDir()
	req.HostConfigModifier = func(hc *container.HostConfig) { hc.Binds = append(hc.Binds, tmp+":"+tmp) }
	if t.HostNetwork {
		req.ExposedPorts = nil
		req.Env = map[string]string{"PARLEY_LISTEN": "127.0.0.1:0", "PARLEY_AGTP_LISTEN": "127.0.0.1:0"}
		req.HostConfigModifier = func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			hc.Binds = append(hc.Binds, tmp+":"+tmp)
		}
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		if c == nil {
			// No container was created: the engine or the image is at
			// fault, not the host.
			return nil, nil, fmt.Errorf("%w: container target: cannot create a container of %s: %v", ErrUnsatisfiable, t.Image, err)
		}
		// The container was created, so the host itself did not come up:
		// it exited, or printed no ready line in time.
		var lines []string
		if rc, lerr := c.Logs(context.Background()); lerr == nil {
			all, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
			rc.Close()
			lines = tailLines(strings.Split(strings.TrimRight(string(all), "\n"), "\n"), 20)
		}
		_ = c.Terminate(context.Background())
		se := &StartError{Config: cfg.Digest(), Reason: fmt.Sprintf("the container did not print its ready line: %v", err), Stderr: lines}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			se.TimedOut = t.StartTimeout
			se.Reason = fmt.Sprintf("the container printed no ready line within %s, the start timeout: %v", t.StartTimeout, err)
		}
		return nil, nil, se
	}
	stopWith := func(crash bool) error {
		if crash {
			// SIGKILL at once: no time to shut down.
			zero := time.Duration(0)
			_ = c.Stop(context.Background(), &zero)
		}
		return c.Terminate(context.Background())
	}
	stop := func() error { return stopWith(false) }
	form, err := CheckBodyForm(t.AGTPBodyForm)
	if err != nil {
		_ = stop()
		return nil, nil, err
	}
	h := &Host{Config: cfg, Isolated: !t.HostNetwork, AGTPBodyForm: form}
	if t.HostNetwork {
		r, err := readyLineOf(ctx, c)
		if msg := checkEndpoints(r); err == nil && msg != "" {
			err = errors.New(msg)
		}
		if err != nil {
			_ = stop()
			return nil, nil, &StartError{Config: cfg.Digest(), Reason: "its ready line is unusable: " + err.Error()}
		}
		h.HTTP, h.AGTP, h.AGTPPlaintext, h.Unsupported = strings.TrimSuffix(r.HTTP, "/"), r.AGTP, r.AGTPPlaintext, r.Unsupported
	} else {
		// The engine runs on this machine and publishes ports on every
		// interface; the suite talks to hosts on loopback only, whatever
		// gateway address testcontainers would guess.
		const host = "127.0.0.1"
		if p, err := c.MappedPort(ctx, ContainerHTTPPort); err == nil {
			h.HTTP = "http://" + net.JoinHostPort(host, p.Port())
		}
		if p, err := c.MappedPort(ctx, ContainerAGTPPort); err == nil {
			h.AGTP = net.JoinHostPort(host, p.Port())
		}
	}
	logs := &lineLog{}
	if rc, err := c.Logs(ctx); err == nil {
		go func() {
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64<<10), 64<<10)
			for sc.Scan() {
				_, _ = logs.Write(append(sc.Bytes(), '\n'))
			}
		}()
	}
	h.logs = logs.snapshot
	if st, err := c.Inspect(ctx); err == nil {
		t.mu.Lock()
		t.imageID = st.Image
		t.mu.Unlock()
	}
	return h, stopWith, nil
}

// Restart stops the host's container (killed at once for a crash) and
// starts a new one of the same image and configuration: its state directory
// is on the mounted temporary directory, so the new container finds it.
func (t *Container) Restart(ctx context.Context, cfg Config, crash bool) (*Host, error) {
	return t.p.restart(ctx, cfg, crash)
}

// RestartWith stops the host's container as Restart does and starts a new
// one of the same image under the changed configuration, on the same
// (mounted) state directory.
func (t *Container) RestartWith(ctx context.Context, cfg, changed Config, crash bool) (*Host, error) {
	return t.p.reconfigure(ctx, cfg, changed, crash)
}

func (t *Container) Kind() string { return "container" }

func (t *Container) Acquire(ctx context.Context, cfg Config) (*Host, error) {
	return t.p.acquire(ctx, cfg)
}

func (t *Container) Configurations() []Config { return t.p.configurations() }

// Started counts the containers started, and restarts.
func (t *Container) Started() (hosts, restarts int) { return t.p.counts() }

// Release lets the pool stop the host once no scenario holds it.
func (t *Container) Release(cfg Config) { t.p.release(cfg) }

// Subject is the image, by the content digest the engine reports for it
// (the image id, the digest of its configuration), which names exactly the
// build that ran; never a hash of its name.
func (t *Container) Subject() Subject {
	t.mu.Lock()
	id := t.imageID
	t.mu.Unlock()
	if d, err := ParseDigest(id); err == nil {
		return Subject{Name: t.Image, Digest: d}
	}
	return undeclared("no container of " + t.Image + " started, so the engine reported no image digest")
}

func (t *Container) Close() error { return t.p.close() }

// readyLineOf finds the ready line in a started container's log.
func readyLineOf(ctx context.Context, c testcontainers.Container) (ReadyLine, error) {
	rc, err := c.Logs(ctx)
	if err != nil {
		return ReadyLine{}, err
	}
	defer rc.Close()
	sc := bufio.NewScanner(io.LimitReader(rc, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		// The engine's log stream may prefix each line; the ready line is
		// the JSON object on it.
		if i := bytes.IndexByte(line, '{'); i >= 0 {
			var r ReadyLine
			if json.Unmarshal(line[i:], &r) == nil && r.Parley == "ready" {
				return r, nil
			}
		}
	}
	return ReadyLine{}, errors.New("no ready line in the container's log")
}
