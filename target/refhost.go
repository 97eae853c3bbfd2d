package target

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"

	"github.com/parley-conformance/parley/refhost"
)

// Refhost runs the bundled reference host in-process, one instance per
// distinct configuration, each with its own temporary data directory.
type Refhost struct {
	p pool
	// AGTPBodyForm is the form the suite is told the host reads; the
	// reference host reads both, so either may be declared.
	AGTPBodyForm string
}

// NewRefhost returns the default target.
func NewRefhost() *Refhost {
	t := &Refhost{}
	t.p.start = func(_ context.Context, cfg Config) (*Host, Stopper, error) {
		logs := &lineLog{}
		h, err := refhost.Start(refhost.Options{
			Config: cfg.JSON(),
			Logger: slog.New(slog.NewTextHandler(logs, nil)),
		})
		if err != nil {
			// The reference host is the host under test: a configuration it
			// cannot start with is its failure, like any host's.
			return nil, nil, &StartError{Config: cfg.Digest(), Reason: err.Error(), Stderr: tailLines(logs.snapshot(), 20)}
		}
		stop := func(crash bool) error {
			if crash {
				return h.Crash()
			}
			return h.Close()
		}
		form, _ := CheckBodyForm(t.AGTPBodyForm)
		return &Host{HTTP: h.URL, AGTP: h.AGTPAddr, AGTPPlaintext: h.AGTPPlaintextAddr, AGTPBodyForm: form, Config: cfg, logs: logs.snapshot}, stop, nil
	}
	return t
}

// Restart closes the host (abruptly, for a crash) and opens it again on its
// state directory.
func (t *Refhost) Restart(ctx context.Context, cfg Config, crash bool) (*Host, error) {
	return t.p.restart(ctx, cfg, crash)
}

// RestartWith closes the host (abruptly, for a crash) and opens it again on
// its state directory under a changed configuration.
func (t *Refhost) RestartWith(ctx context.Context, cfg, changed Config, crash bool) (*Host, error) {
	return t.p.reconfigure(ctx, cfg, changed, crash)
}

// PowerCut cuts the disk's power, closes the host abruptly and opens it
// again on what its disk kept.
func (t *Refhost) PowerCut(ctx context.Context, cfg Config, disk Disk) (*Host, error) {
	return t.p.powerCut(ctx, cfg, disk)
}

func (t *Refhost) Kind() string { return "refhost" }

func (t *Refhost) Acquire(ctx context.Context, cfg Config) (*Host, error) {
	return t.p.acquire(ctx, cfg)
}

func (t *Refhost) Configurations() []Config { return t.p.configurations() }

// Started counts the hosts started, and restarts.
func (t *Refhost) Started() (hosts, restarts int) { return t.p.counts() }

// Release lets the pool stop the host once no scenario holds it.
func (t *Refhost) Release(cfg Config) { t.p.release(cfg) }

// Subject is the executable that carries the reference host, with the VCS
// revision it was built from when the build recorded one.
func (t *Refhost) Subject() Subject {
	exeOnce.Do(func() {
		if exe, err := os.Executable(); err == nil {
			exeDigest, exeErr = fileSHA256(exe)
		} else {
			exeErr = err
		}
	})
	if exeErr != nil {
		return undeclared("the reference host's executable could not be hashed: " + exeErr.Error())
	}
	s := Subject{Name: "parley-refhost", Digest: map[string]string{"sha256": exeDigest}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				s.Digest["gitCommit"] = kv.Value
			}
		}
	}
	return s
}

// The executable is hashed once per process: it does not change under it.
var (
	exeOnce   sync.Once
	exeDigest string
	exeErr    error
)

func (t *Refhost) Close() error { return t.p.close() }

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
