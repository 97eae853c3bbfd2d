package target

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrUnsatisfiable marks a configuration the target cannot take, or a host
// the target cannot give for a reason that is neither the host's nor the
// suite's (a url host declares another configuration, no container engine
// answers). Scenarios that need it are blocked, not failed: the host was
// never asked.
var ErrUnsatisfiable = errors.New("the target cannot take this configuration")

// StartError is a host that did not start with a configuration: it exited,
// crashed, or printed no ready line in time. It is the host's failure.
type StartError struct {
	// Config is the digest of the configuration the host was given.
	Config string
	// Reason says what happened ("exited with status 1 before its ready line").
	Reason string
	// Stderr is the last lines the host wrote, when the target saw them.
	Stderr []string
	// TimedOut is the start timeout that ran out, when the host printed no
	// ready line within it (0 when it failed otherwise): a host that is
	// merely slow is given longer with --start-timeout.
	TimedOut time.Duration
}

func (e *StartError) Error() string {
	msg := "the host did not start with this configuration: " + e.Reason
	if e.TimedOut > 0 {
		msg += " (give a slower host longer with --start-timeout)"
	}
	if len(e.Stderr) > 0 {
		msg += "; its last log lines:\n  " + strings.Join(e.Stderr, "\n  ")
	}
	return msg + "\n(configuration " + e.Config + ")"
}

// DeclinedError is a host that said it does not support a configuration (an
// exec host's declined line). The scenarios that need it are blocked with
// the host's reason.
type DeclinedError struct {
	Config string
	Reason string
}

func (e *DeclinedError) Error() string {
	return "the host declined configuration " + e.Config + ": " + e.Reason
}

// Host is a running host as the suite reaches it.
type Host struct {
	// HTTP is the base URL of the host's HTTP surfaces (no trailing slash).
	HTTP string
	// AGTP is the host:port of its AGTP/1.0 listener, when it has one.
	AGTP string
	// AGTPPlaintext is the host:port of a second, plaintext AGTP/1.0
	// listener on loopback, when the host serves TLS on AGTP and its
	// fixture asks for both.
	AGTPPlaintext string
	// Config is the configuration the host runs with.
	Config Config
	// Isolated says the host runs in a network namespace of its own (a
	// container): it cannot reach servers the suite runs on loopback, such
	// as fake peers and destinations.
	Isolated bool
	// AGTPBodyForm is the request body form the host declares it reads,
	// where the AGTP drafts leave the choice open: BodyFormEnvelope (the
	// default, as the drafts show it) or BodyFormFlat.
	AGTPBodyForm string
	// Unsupported are the optional fixture members the host declares it
	// does not serve (its ready line's "unsupported"): the scenarios that
	// need one are blocked naming it, the others run.
	Unsupported []string
	logs        func() []string
}

// Serves reports whether the host serves an optional fixture member.
func (h *Host) Serves(member string) bool {
	for _, m := range h.Unsupported {
		if m == member {
			return false
		}
	}
	return true
}

// The AGTP request body forms a host may declare.
const (
	BodyFormEnvelope = "envelope"
	BodyFormFlat     = "flat"
)

// CheckBodyForm accepts "" (the default, envelope) or a declared form.
func CheckBodyForm(form string) (string, error) {
	switch form {
	case "", BodyFormEnvelope:
		return BodyFormEnvelope, nil
	case BodyFormFlat:
		return BodyFormFlat, nil
	}
	return "", fmt.Errorf("AGTP body form %q: want %q or %q", form, BodyFormEnvelope, BodyFormFlat)
}

// Logs returns what the host has logged since it started, when the target
// can see it (the refhost and exec targets can; a url target cannot).
func (h *Host) Logs() ([]string, bool) {
	if h.logs == nil {
		return nil, false
	}
	return h.logs(), true
}

// Subject names the host build an evidence bundle certifies. A subject with
// no digest is undeclared: the suite never fills one with the hash of an
// interpreter, a shell or an address, since those name no build.
type Subject struct {
	Name   string
	Digest map[string]string
	Note   string
}

// Undeclared is the subject of a run whose host build nobody named.
const Undeclared = "undeclared"

// Declared reports whether the subject names a build by its digest.
func (s Subject) Declared() bool { return len(s.Digest) > 0 }

// undeclared is the subject a target reports when it knows of no build.
func undeclared(note string) Subject {
	return Subject{Name: Undeclared, Digest: map[string]string{}, Note: note}
}

// ParseDigest reads "sha256:<64 hex>" into a digest map.
func ParseDigest(s string) (map[string]string, error) {
	alg, hex, ok := strings.Cut(s, ":")
	if !ok || alg != "sha256" || len(hex) != 64 || strings.Trim(strings.ToLower(hex), "0123456789abcdef") != "" {
		return nil, errors.New("want sha256:<64 hex digits>")
	}
	return map[string]string{"sha256": strings.ToLower(hex)}, nil
}

// StartBounded is a target that starts hosts and waits a bounded time for
// each to print its ready line (exec, container). A host slower than the
// bound fails to start, so the bound is the operator's to set, and the
// bundle records it.
type StartBounded interface {
	StartBound() time.Duration
	SetStartBound(time.Duration)
}

// Stopper stops a host: gracefully (SIGTERM, a clean close), or as a crash
// (SIGKILL, an abrupt close) when crash is set.
type Stopper func(crash bool) error

// ErrCannotRestart is a target that cannot stop a host and start it again
// on the same state (a url host it does not run).
var ErrCannotRestart = fmt.Errorf("%w: this target cannot restart a host", ErrUnsatisfiable)

// Restarter is a target that can stop a host and start it again on the same
// state, so that durability is witnessed rather than assumed. The host's
// configuration names its state directory (Config.StateDir).
type Restarter interface {
	// Restart stops the host running cfg (as a crash when crash is set) and
	// starts it again with the same configuration and state; the addresses
	// may change.
	Restart(ctx context.Context, cfg Config, crash bool) (*Host, error)
}

// ErrCannotReconfigure is a target that cannot restart a host under
// another configuration (a url host runs the one configuration it declares,
// and the suite can neither stop it nor give it another).
var ErrCannotReconfigure = fmt.Errorf("%w: this target cannot restart a host under a changed configuration", ErrUnsatisfiable)

// Reconfigurer is a target that can stop a host and start the same host
// again, on the same state, under a changed configuration (another
// deployment policy, destination or endpoint): what a deployment does when
// its operator changes the configuration and restarts the service.
type Reconfigurer interface {
	// RestartWith stops the host running cfg (as a crash when crash is
	// set) and starts it again on cfg's state directory under changed,
	// which names the same state_dir or none (it is given cfg's). The host
	// it returns runs changed.ChangedFrom(cfg): the scenario goes on
	// restarting and releasing it as cfg's host, and once released it is
	// retired, never lent to another scenario; the next to ask for cfg
	// gets a host started under cfg on that state.
	RestartWith(ctx context.Context, cfg, changed Config, crash bool) (*Host, error)
}

// Disk is a state directory's disk whose power the suite can cut
// (internal/lazyfs): PowerCut loses every write not yet synced and refuses
// writes until Resume.
type Disk interface {
	PowerCut()
	Resume()
}

// PowerCutter is a target whose hosts keep their state_dir on this
// machine's filesystem, where the suite can put it on a Disk, and whose
// hosts it can kill where they stand: it can cut the power under a host,
// which SIGKILL alone does not (the kernel keeps what the host wrote and
// never synced).
type PowerCutter interface {
	// PowerCut cuts disk's power under the host running cfg, kills the
	// host, restores the power and starts the host again on what its disk
	// kept.
	PowerCut(ctx context.Context, cfg Config, disk Disk) (*Host, error)
}

// Target hands out hosts.
type Target interface {
	// Kind is refhost, exec or url.
	Kind() string
	// Acquire returns a host running cfg, starting one if needed. It is safe
	// for concurrent use; concurrent callers with one configuration share a host.
	Acquire(ctx context.Context, cfg Config) (*Host, error)
	// Configurations lists what was acquired, for the evidence bundle.
	Configurations() []Config
	Subject() Subject
	Close() error
}

// Counter is a target that starts hosts and counts them: fresh hosts (a
// configuration's first start, or an instance of its own) and restarts of a
// host on its state. The run summary and the bundle carry both.
type Counter interface {
	Started() (hosts, restarts int)
}

// Releaser is a target that can be told a scenario is done with the host it
// acquired for cfg. Hosts no scenario holds are kept for reuse up to a bound
// and stopped beyond it, so that a run with hundreds of configurations does
// not keep hundreds of hosts (or host processes) alive to its end.
type Releaser interface {
	// Release undoes one Acquire of cfg that returned a host.
	Release(cfg Config)
}

// idleHosts bounds how many hosts no scenario holds are kept running for a
// configuration asked for again. A configuration shared by many scenarios
// stays warm; one used by a single scenario is stopped soon after it ends.
const idleHosts = 16

// pool caches hosts by configuration digest and starts each at most once
// while it is held or idle, even when many scenarios ask for it at the same
// moment; beyond idleHosts the least recently released idle host is stopped
// (and started again, on fresh state, if asked for later).
type pool struct {
	start func(ctx context.Context, cfg Config) (*Host, Stopper, error)

	mu       sync.Mutex
	entries  map[string]*poolEntry
	order    []Config
	started  map[string]bool // digests of configurations a host ran, for the evidence
	idle     list.List       // keys of held-by-nobody entries, least recently released first
	stopping sync.WaitGroup
	retiring map[string]chan struct{} // keys whose host is stopping in the background; closed once stopped
	hosts    int                      // fresh hosts started
	restarts int                      // hosts started again on their state
}

// counts returns how many fresh hosts the pool started, and restarts.
func (p *pool) counts() (hosts, restarts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts, p.restarts
}

type poolEntry struct {
	ready chan struct{}
	host  *Host
	stop  Stopper
	err   error
	refs  int           // acquisitions not yet released
	idle  *list.Element // in pool.idle while refs is 0
	// changed says the host was restarted under a changed configuration:
	// it is retired once released, never lent again.
	changed bool
}

// restart stops the running host of cfg and starts it again.
func (p *pool) restart(ctx context.Context, cfg Config, crash bool) (*Host, error) {
	return p.restartWith(ctx, cfg, cfg, func(stop Stopper) { _ = stop(crash) })
}

// reconfigure stops the running host of cfg and starts it again on its
// state under changed.
func (p *pool) reconfigure(ctx context.Context, cfg, changed Config, crash bool) (*Host, error) {
	run, err := ChangedRun(cfg, changed)
	if err != nil {
		return nil, err
	}
	return p.restartWith(ctx, cfg, run, func(stop Stopper) { _ = stop(crash) })
}

// ChangedRun is the configuration a host of cfg is restarted under when
// it is reconfigured to changed: changed, on cfg's state directory, marked
// as cfg's host changed.
func ChangedRun(cfg, changed Config) (Config, error) {
	dir := cfg.StateDir()
	switch {
	case dir == "":
		return Config{}, errors.New("a host is restarted only on a state directory its configuration names (state_dir)")
	case changed.StateDir() == "":
		var err error
		if changed, err = changed.WithStateDir(dir); err != nil {
			return Config{}, err
		}
	case changed.StateDir() != dir:
		return Config{}, errors.New("a host restarted under a changed configuration keeps its state directory: the changed configuration names another")
	}
	return changed.ChangedFrom(cfg), nil
}

// powerCut cuts the disk's power, kills the running host of cfg, restores
// the power and starts the host again. The cut comes first: whatever the
// host does between the cut and its death never reaches the disk.
func (p *pool) powerCut(ctx context.Context, cfg Config, disk Disk) (*Host, error) {
	return p.restartWith(ctx, cfg, cfg, func(stop Stopper) {
		disk.PowerCut()
		_ = stop(true)
		disk.Resume()
	})
}

// restartWith stops the running host of cfg with halt and starts it again
// under run (cfg itself, or a changed configuration of the same host).
func (p *pool) restartWith(ctx context.Context, cfg, run Config, halt func(Stopper)) (*Host, error) {
	if cfg.StateDir() == "" {
		return nil, errors.New("a host is restarted only on a state directory its configuration names (state_dir)")
	}
	p.mu.Lock()
	e := p.entries[cfg.Key()]
	p.restarts++
	p.mu.Unlock()
	if e == nil {
		return nil, errors.New("no host runs this configuration")
	}
	<-e.ready
	if e.err != nil {
		return nil, e.err
	}
	if e.stop != nil {
		halt(e.stop)
	}
	ne := &poolEntry{ready: make(chan struct{}), changed: e.changed || run.Changed()}
	ne.host, ne.stop, ne.err = p.start(ctx, run)
	close(ne.ready)
	p.mu.Lock()
	// The scenario that restarts the host holds it; so may others.
	ne.refs, ne.idle = e.refs, e.idle
	if p.entries != nil {
		p.entries[cfg.Key()] = ne
	}
	if d := run.Digest(); ne.err == nil && p.started != nil && !p.started[d] {
		// A changed configuration is one a host ran, for the evidence.
		p.order = append(p.order, run)
		p.started[d] = true
	}
	p.mu.Unlock()
	return ne.host, ne.err
}

func (p *pool) acquire(ctx context.Context, cfg Config) (*Host, error) {
	key, digest := cfg.Key(), cfg.Digest()
	p.mu.Lock()
	if p.entries == nil {
		p.entries = map[string]*poolEntry{}
		p.started = map[string]bool{}
	}
	e, ok := p.entries[key]
	if !ok {
		e = &poolEntry{ready: make(chan struct{}), refs: 1}
		p.entries[key] = e
		if !p.started[digest] {
			p.order = append(p.order, cfg)
		}
		p.hosts++
		retiring := p.retiring[key]
		p.mu.Unlock()
		if retiring != nil {
			// The host changed under this key is still stopping, on the
			// state this one opens.
			<-retiring
		}
		e.host, e.stop, e.err = p.start(ctx, cfg)
		close(e.ready)
		if e.err == nil {
			p.mu.Lock()
			p.started[digest] = true
			p.mu.Unlock()
		}
	} else if e.changed {
		// A host restarted under a changed configuration that the scenario
		// which changed it never released (a target nobody releases on):
		// the scenario is over, since only it held the key, so the host is
		// retired and a new one started under the key's own configuration.
		p.retire(key, e)
		delete(p.entries, key)
		p.mu.Unlock()
		return p.acquire(ctx, cfg)
	} else {
		e.refs++
		if e.idle != nil {
			p.idle.Remove(e.idle)
			e.idle = nil
		}
		p.mu.Unlock()
	}
	select {
	case <-e.ready:
		return e.host, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release undoes one acquire; a host nobody holds joins the idle list, and
// the oldest idle hosts beyond the bound are stopped in the background. A
// host instance of its own is stopped as soon as nobody holds it: it may
// have been left changed, so it is never lent again.
func (p *pool) release(cfg Config) {
	key := cfg.Key()
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e == nil || e.refs == 0 {
		return
	}
	e.refs--
	if e.refs > 0 || e.err != nil {
		return
	}
	if cfg.Instance() != "" && !cfg.Lane() {
		delete(p.entries, key)
		p.retire(key, e)
		return
	}
	if e.changed {
		// Restarted under a changed configuration: retired, so that the
		// next scenario to ask for the key gets a host under its own.
		delete(p.entries, key)
		p.retire(key, e)
		return
	}
	e.idle = p.idle.PushBack(key)
	for p.idle.Len() > idleHosts {
		old := p.idle.Remove(p.idle.Front()).(string)
		oe := p.entries[old]
		delete(p.entries, old)
		// A lane's key comes back on the same state directory: the next
		// host of the key must not open it before this one has let go.
		p.retire(old, oe)
	}
}

// retire stops e's host in the background, without holding up the caller;
// an acquire of key waits until it has stopped before it starts a host on
// the same state, and close waits for it. p.mu is held.
func (p *pool) retire(key string, e *poolEntry) {
	if e == nil {
		return
	}
	done := make(chan struct{})
	if p.retiring == nil {
		p.retiring = map[string]chan struct{}{}
	}
	p.retiring[key] = done
	p.stopping.Add(1)
	go func() {
		defer p.stopping.Done()
		if e.stop != nil {
			_ = e.stop(false)
		}
		p.mu.Lock()
		if p.retiring[key] == done {
			delete(p.retiring, key)
		}
		p.mu.Unlock()
		close(done)
	}()
}

func (p *pool) configurations() []Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Config
	for _, c := range p.order {
		if p.started[c.Digest()] {
			out = append(out, c)
		}
	}
	return out
}

func (p *pool) close() error {
	p.mu.Lock()
	entries := p.entries
	p.entries = nil
	p.order = nil
	p.started = nil
	p.idle.Init()
	p.mu.Unlock()
	// Hosts stop at once, not one after another: a host may take up to its
	// shutdown grace to let a request finish.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, e := range entries {
		wg.Go(func() {
			<-e.ready
			if e.stop != nil {
				err := e.stop(false)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.stopping.Wait()
	return errors.Join(errs...)
}

// lineLog keeps the most recent lines a host wrote, bounded so that a noisy
// host cannot exhaust the suite's memory.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

const maxLogLines = 5000

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := 64<<10 - len(l.part); room > 0 {
			l.part = append(l.part, chunk[:min(len(chunk), room)]...)
		}
		if i < 0 {
			break
		}
		l.add(string(l.part))
		l.part = l.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLog) add(s string) {
	l.lines = append(l.lines, s)
	// Drop the oldest half at once, so a flood costs amortized O(1) a line.
	if len(l.lines) > 2*maxLogLines {
		l.lines = append([]string(nil), l.lines[len(l.lines)-maxLogLines:]...)
	}
}

func (l *lineLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(lines) > maxLogLines {
		lines = lines[len(lines)-maxLogLines:]
	}
	out := append([]string(nil), lines...)
	if len(l.part) > 0 {
		out = append(out, string(l.part))
	}
	return out
}

// Wrap returns a host reached at other addresses than h (a proxy in front of
// it), keeping h's configuration; logs, when non-nil, replaces how its log is
// read.
func Wrap(h *Host, httpURL, agtp string, logs func() []string) *Host {
	if logs == nil {
		logs = h.logs
	}
	return &Host{HTTP: httpURL, AGTP: agtp, AGTPPlaintext: h.AGTPPlaintext, Config: h.Config, Isolated: h.Isolated, AGTPBodyForm: h.AGTPBodyForm, Unsupported: h.Unsupported, logs: logs}
}

// WithConfig returns h as though it ran cfg: for a wrapper that started the
// host with an altered configuration and must report the one asked for.
func WithConfig(h *Host, cfg Config) *Host {
	c := *h
	c.Config = cfg
	return &c
}
