package target

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ReadyLine is what an exec host prints on stdout once it serves, one JSON
// object on one line; docs/host-interface.md describes the adapter contract.
type ReadyLine struct {
	Parley string `json:"parley"` // always "ready"
	HTTP   string `json:"http,omitempty"`
	AGTP   string `json:"agtp,omitempty"`
}

// Exec starts an implementer's command once per configuration: the suite
// writes the configuration to a file, runs `<command> <file>` through
// /bin/sh, waits for the ready line, and stops the process group at Close.
type Exec struct {
	Command      string
	StartTimeout time.Duration
	SubjectName  string
	p            pool
	dir          string
}

// NewExec returns an exec target for a shell command line.
func NewExec(command string) (*Exec, error) {
	if strings.TrimSpace(command) == "" {
		return nil, errors.New("exec target: empty command")
	}
	dir, err := os.MkdirTemp("", "parley-exec-*")
	if err != nil {
		return nil, err
	}
	t := &Exec{Command: command, StartTimeout: 30 * time.Second, dir: dir}
	t.p.start = t.start
	return t, nil
}

func (t *Exec) start(ctx context.Context, cfg Config) (*Host, func() error, error) {
	path := filepath.Join(t.dir, strings.TrimPrefix(cfg.Digest(), "sha256:")[:16]+".json")
	if err := os.WriteFile(path, cfg.JSON(), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", t.Command+` "$1"`, "parley-exec", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lineLog{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("exec target: start %q: %w", t.Command, err)
	}
	exited := make(chan error, 1)
	stop := func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		return nil
	}
	ready := make(chan ReadyLine, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			var r ReadyLine
			if !sent && json.Unmarshal(line, &r) == nil && r.Parley == "ready" {
				ready <- r
				sent = true
				continue
			}
			_, _ = logs.Write(append(line, '\n'))
		}
	}()
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(t.StartTimeout)
	defer timer.Stop()
	select {
	case r := <-ready:
		if r.HTTP == "" && r.AGTP == "" {
			_ = stop()
			return nil, nil, errors.New(`exec target: the ready line names no endpoint (want {"parley":"ready","http":"http://…"})`)
		}
		return &Host{HTTP: strings.TrimSuffix(r.HTTP, "/"), AGTP: r.AGTP, Config: cfg, logs: logs.snapshot}, stop, nil
	case err := <-exited:
		exited <- err
		return nil, nil, fmt.Errorf("exec target: %q exited before printing its ready line (%v); its stderr:\n%s", t.Command, err, tail(logs.snapshot(), 20))
	case <-timer.C:
		_ = stop()
		return nil, nil, fmt.Errorf(`exec target: %q printed no ready line ({"parley":"ready",...}) within %s; its stderr:\n%s`, t.Command, t.StartTimeout, tail(logs.snapshot(), 20))
	case <-ctx.Done():
		_ = stop()
		return nil, nil, ctx.Err()
	}
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (t *Exec) Kind() string { return "exec" }

func (t *Exec) Acquire(ctx context.Context, cfg Config) (*Host, error) {
	return t.p.acquire(ctx, cfg)
}

func (t *Exec) Configurations() []Config { return t.p.configurations() }

// Subject is the command's executable, hashed when it can be found.
func (t *Exec) Subject() Subject {
	fields := strings.Fields(t.Command)
	// Skip leading VAR=value assignments to find the executable.
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		fields = fields[1:]
	}
	name := t.SubjectName
	if name == "" && len(fields) > 0 {
		name = filepath.Base(fields[0])
	}
	s := Subject{Name: name, Digest: map[string]string{}}
	if len(fields) > 0 {
		if p, err := exec.LookPath(fields[0]); err == nil {
			if d, err := fileSHA256(p); err == nil {
				s.Digest["sha256"] = d
				return s
			}
		}
	}
	// An in-toto subject needs a digest: fall back to the command line's,
	// and say that it identifies no build.
	s.Digest["sha256"] = digestOfString(t.Command)
	s.Note = "digest of the command line, not of a build: its executable could not be hashed; name the build with --subject"
	return s
}

func (t *Exec) Close() error {
	err := t.p.close()
	_ = os.RemoveAll(t.dir)
	return err
}
