package target

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ReadyLine is what an exec host prints on stdout once it serves, one JSON
// object on one line; docs/host-interface.md describes the adapter contract.
// A host that does not support a configuration prints
// {"parley":"declined","reason":"..."} instead and exits 0.
type ReadyLine struct {
	Parley string `json:"parley"` // "ready" or "declined"
	HTTP   string `json:"http,omitempty"`
	AGTP   string `json:"agtp,omitempty"`
	// AGTPPlaintext is a second AGTP listener, plaintext on loopback, for a
	// host whose "agtp" serves TLS (fixtures that ask for both transports).
	AGTPPlaintext string `json:"agtp_plaintext,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// Subject is the build the host says it is, named by its digest.
	Subject *ReadySubject `json:"subject,omitempty"`
	// AGTPBodyForm is the AGTP request body form the host reads
	// ("envelope", the default, or "flat").
	AGTPBodyForm string `json:"agtp_body_form,omitempty"`
	// Fixture is the fixture the host says it runs (its configuration's
	// "fixture"); a deployed host's line is checked against it.
	Fixture string `json:"fixture,omitempty"`
	// Unsupported names the optional members of the fixture the host was
	// given that it does not serve (docs/hosts/<family>.md lists them).
	Unsupported []string `json:"unsupported,omitempty"`
}

// ReadySubject is the subject a ready line declares.
type ReadySubject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Exec starts an implementer's command once per configuration: the suite
// writes the configuration to a file, runs `<command> <file>` through
// /bin/sh, waits for the ready line, and stops the process group at Close.
type Exec struct {
	Command      string
	StartTimeout time.Duration
	p            pool
	dir          string

	mu       sync.Mutex
	subjects map[string]Subject // by name:digest, as ready lines declared them
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

// StartBound is how long a host may take to print its ready line.
func (t *Exec) StartBound() time.Duration { return t.StartTimeout }

// SetStartBound sets it (call before the first host starts).
func (t *Exec) SetStartBound(d time.Duration) { t.StartTimeout = d }

// maxReasonBytes bounds the reason of a declined line that is kept.
const maxReasonBytes = 2 << 10

func (t *Exec) start(ctx context.Context, cfg Config) (*Host, Stopper, error) {
	// A file per start: instances of one configuration may start at once.
	f, err := os.CreateTemp(t.dir, strings.TrimPrefix(cfg.Digest(), "sha256:")[:16]+"-*.json")
	if err != nil {
		return nil, nil, err
	}
	path := f.Name()
	_, err = f.Write(cfg.JSON())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", t.Command+` "$1"`, "parley-exec", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lineLog{}
	cmd.Stderr = logs
	// An *os.File of our own, not StdoutPipe: Wait would close that pipe as
	// soon as the shell exits and lose a line still unread (a declined line
	// printed just before exit 0).
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		stdout.Close()
		return nil, nil, fmt.Errorf("exec target: start %q: %w", t.Command, err)
	}
	exited := make(chan error, 1)
	var stopOnce sync.Once
	stopWith := func(crash bool) error {
		stopOnce.Do(func() {
			if crash {
				// A crash: the process group dies where it stands.
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				return
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
		return nil
	}
	stop := func() error { return stopWith(false) }
	first := make(chan ReadyLine, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer stdout.Close()
		// Lines are read whatever their length (an overlong one is kept
		// clipped), so that a host that logs a long line before its ready
		// line, or floods its stdout, neither hides the ready line nor
		// blocks on a full pipe.
		rd := bufio.NewReaderSize(stdout, 64<<10)
		sent := false
		for {
			line, err := readLine(rd, maxLineBytes)
			if len(line) > 0 || err == nil {
				var r ReadyLine
				if !sent && json.Unmarshal(line, &r) == nil && (r.Parley == "ready" || r.Parley == "declined") {
					first <- r
					sent = true
				} else {
					_, _ = logs.Write(append(line, '\n'))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { exited <- cmd.Wait() }()

	failed := func(reason string) (*Host, Stopper, error) {
		return nil, nil, &StartError{Config: cfg.Digest(), Reason: reason, Stderr: tailLines(logs.snapshot(), 20)}
	}
	timer := time.NewTimer(t.StartTimeout)
	defer timer.Stop()
	select {
	case r := <-first:
		if r.Parley == "declined" {
			return t.declined(cfg, r, exited, stop, logs)
		}
		if r.HTTP == "" && r.AGTP == "" {
			_ = stop()
			return failed(`its ready line names no endpoint (want {"parley":"ready","http":"http://…"})`)
		}
		if msg := checkEndpoints(r); msg != "" {
			_ = stop()
			return failed(msg)
		}
		form, err := CheckBodyForm(r.AGTPBodyForm)
		if err != nil {
			_ = stop()
			return failed("its ready line's " + err.Error())
		}
		if r.Subject != nil {
			s, err := readySubject(r.Subject)
			if err != nil {
				_ = stop()
				return failed("its ready line's subject " + err.Error())
			}
			t.mu.Lock()
			if t.subjects == nil {
				t.subjects = map[string]Subject{}
			}
			t.subjects[s.Name+"\x00"+s.Digest["sha256"]] = s
			t.mu.Unlock()
		}
		return &Host{HTTP: strings.TrimSuffix(r.HTTP, "/"), AGTP: r.AGTP, AGTPPlaintext: r.AGTPPlaintext, AGTPBodyForm: form, Unsupported: r.Unsupported, Config: cfg, logs: logs.snapshot}, stopWith, nil
	case err := <-exited:
		exited <- err
		// What it printed before exiting may still be in the pipe.
		select {
		case r := <-first:
			if r.Parley == "declined" {
				return t.declined(cfg, r, exited, stop, logs)
			}
			return failed(fmt.Sprintf("it exited (%v) right after its ready line", exitStatus(err)))
		case <-readerDone:
		case <-time.After(2 * time.Second):
		}
		select {
		case r := <-first:
			if r.Parley == "declined" {
				return t.declined(cfg, r, exited, stop, logs)
			}
		default:
		}
		return failed(fmt.Sprintf("it exited (%v) before printing its ready line", exitStatus(err)))
	case <-timer.C:
		_ = stop()
		return nil, nil, &StartError{Config: cfg.Digest(), TimedOut: t.StartTimeout, Stderr: tailLines(logs.snapshot(), 20),
			Reason: fmt.Sprintf(`it printed no ready line ({"parley":"ready",...}) within %s, the start timeout`, t.StartTimeout)}
	case <-ctx.Done():
		_ = stop()
		return nil, nil, ctx.Err()
	}
}

// declined waits for a host that declined a configuration to exit: exiting 0
// is a decline, anything else is a host that failed to start.
func (t *Exec) declined(cfg Config, r ReadyLine, exited chan error, stop func() error, logs *lineLog) (*Host, Stopper, error) {
	reason := strings.TrimSpace(r.Reason)
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes] + "…"
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			return nil, nil, &StartError{Config: cfg.Digest(), Reason: fmt.Sprintf("it printed a declined line but exited %v (a decline exits 0)", exitStatus(err)), Stderr: tailLines(logs.snapshot(), 20)}
		}
		if reason == "" {
			return nil, nil, &StartError{Config: cfg.Digest(), Reason: "it declined the configuration without a reason (a declined line carries one)"}
		}
		return nil, nil, &DeclinedError{Config: cfg.Digest(), Reason: reason}
	case <-time.After(5 * time.Second):
		_ = stop()
		return nil, nil, &StartError{Config: cfg.Digest(), Reason: "it printed a declined line but did not exit within 5 s", Stderr: tailLines(logs.snapshot(), 20)}
	}
}

// checkEndpoints rejects a ready line whose addresses the suite cannot use.
func checkEndpoints(r ReadyLine) string {
	if r.HTTP != "" {
		u, err := url.Parse(r.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Sprintf("its ready line's http %q is not an http(s) base URL", r.HTTP)
		}
	}
	if r.AGTP != "" {
		if _, _, err := net.SplitHostPort(r.AGTP); err != nil {
			return fmt.Sprintf("its ready line's agtp %q is not host:port", r.AGTP)
		}
	}
	if r.AGTPPlaintext != "" {
		if _, _, err := net.SplitHostPort(r.AGTPPlaintext); err != nil {
			return fmt.Sprintf("its ready line's agtp_plaintext %q is not host:port", r.AGTPPlaintext)
		}
	}
	return ""
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("status %d", ee.ExitCode())
	}
	return err.Error()
}

func tailLines(lines []string, n int) []string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func (t *Exec) Kind() string { return "exec" }

// Restart stops the host's process group (SIGKILL for a crash, else SIGTERM
// and SIGKILL after 5 s) and runs the command again with the same
// configuration file, whose state_dir the suite keeps.
func (t *Exec) Restart(ctx context.Context, cfg Config, crash bool) (*Host, error) {
	return t.p.restart(ctx, cfg, crash)
}

// RestartWith stops the host's process group as Restart does and runs the
// command again with a configuration file holding the changed
// configuration, on the same state_dir.
func (t *Exec) RestartWith(ctx context.Context, cfg, changed Config, crash bool) (*Host, error) {
	return t.p.reconfigure(ctx, cfg, changed, crash)
}

// PowerCut cuts the disk's power, kills the host's process group with
// SIGKILL and runs the command again once the power is back.
func (t *Exec) PowerCut(ctx context.Context, cfg Config, disk Disk) (*Host, error) {
	return t.p.powerCut(ctx, cfg, disk)
}

func (t *Exec) Acquire(ctx context.Context, cfg Config) (*Host, error) {
	return t.p.acquire(ctx, cfg)
}

func (t *Exec) Configurations() []Config { return t.p.configurations() }

// Started counts the hosts the command was run for, and restarts.
func (t *Exec) Started() (hosts, restarts int) { return t.p.counts() }

// Release lets the pool stop the host once no scenario holds it.
func (t *Exec) Release(cfg Config) { t.p.release(cfg) }

// readySubject checks the subject a ready line declares.
func readySubject(r *ReadySubject) (Subject, error) {
	d, ok := r.Digest["sha256"]
	if strings.TrimSpace(r.Name) == "" || !ok {
		return Subject{}, errors.New(`must be {"name": ..., "digest": {"sha256": "<64 hex>"}}`)
	}
	digest, err := ParseDigest("sha256:" + d)
	if err != nil {
		return Subject{}, fmt.Errorf("digest: %v", err)
	}
	return Subject{Name: r.Name, Digest: digest}, nil
}

// Subject is the build the host's ready lines declared. Without one it is
// undeclared: the command line names no build (its first word may well be
// an interpreter or a shell).
func (t *Exec) Subject() Subject {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch len(t.subjects) {
	case 0:
		return undeclared("no ready line declared a subject; name the build with --subject NAME=sha256:HEX or the ready line's \"subject\"")
	case 1:
		for _, s := range t.subjects {
			return s
		}
	}
	var names []string
	for _, s := range t.subjects {
		names = append(names, s.Name+" sha256:"+s.Digest["sha256"])
	}
	sort.Strings(names)
	return undeclared("the host's ready lines declared different subjects (" + strings.Join(names, ", ") + "), so no one build was certified")
}

func (t *Exec) Close() error {
	err := t.p.close()
	_ = os.RemoveAll(t.dir)
	return err
}

// maxLineBytes bounds one stdout line the exec target keeps.
const maxLineBytes = 64 << 10

// readLine reads one line, without its end, keeping at most max bytes of it
// and discarding the rest.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if len(line) < max {
			line = append(line, chunk[:min(len(chunk), max-len(line))]...)
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}
