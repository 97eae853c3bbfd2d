package target

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Deployed is hosts an operator started before the run, one per published
// fixture (`parley fixtures` wrote their configurations), each described by
// the ready line it printed or would print. Scenarios whose fixture has a
// host run on it; a fixture without one, a restart and a crash are blocked
// naming what is missing. The suite starts nothing.
type Deployed struct {
	// Hosts are the ready lines, by fixture name (HOSTS.json).
	Hosts map[string]ReadyLine
	// Fixtures are the configurations the hosts were deployed with, by
	// fixture name, as the fixture set holds them.
	Fixtures map[string]Config
	// AGTPBodyForm is the body form the hosts read when their ready lines
	// do not say (--agtp-body-form).
	AGTPBodyForm string
	// DialTimeout bounds the check that a host's address answers.
	DialTimeout time.Duration

	mu      sync.Mutex
	checked map[string]error // fixture -> whether its host answered
	used    map[string]Config
}

// ParseHosts reads HOSTS.json: an object mapping fixture names to ready
// lines. known says which fixture names exist and their family. An error
// names the line to fix.
func ParseHosts(b []byte, known map[string]string) (map[string]ReadyLine, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("line %d: %v (want {\"<fixture>\": {\"parley\": \"ready\", \"http\": \"http://…\"}, …})", lineOf(b, offsetOf(err, dec)), err)
	}
	if raw == nil {
		return nil, errors.New("line 1: want an object mapping fixture names to ready lines")
	}
	out := map[string]ReadyLine{}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		line := lineOf(b, bytes.Index(b, []byte(`"`+name+`"`)))
		family, ok := known[name]
		if !ok {
			var all []string
			for k := range known {
				all = append(all, k)
			}
			sort.Strings(all)
			return nil, fmt.Errorf("line %d: %q is no fixture of the set (its fixtures: %s)", line, name, strings.Join(all, ", "))
		}
		var r ReadyLine
		d := json.NewDecoder(bytes.NewReader(raw[name]))
		d.DisallowUnknownFields()
		if err := d.Decode(&r); err != nil {
			return nil, fmt.Errorf("line %d: fixture %s: its ready line: %v", line, name, err)
		}
		if r.Parley != "ready" {
			return nil, fmt.Errorf("line %d: fixture %s: want a ready line ({\"parley\": \"ready\", …}), got parley=%q", line, name, r.Parley)
		}
		if r.Fixture == "" {
			return nil, fmt.Errorf("line %d: fixture %s: the ready line does not say which fixture its host runs (add \"fixture\": %q, as parley refhost prints it), so a host deployed from another fixture cannot be told apart", line, name, name)
		}
		if r.Fixture != name {
			return nil, fmt.Errorf("line %d: the host listed for fixture %s says it runs fixture %s", line, name, r.Fixture)
		}
		if msg := checkEndpoints(r); msg != "" {
			return nil, fmt.Errorf("line %d: fixture %s: %s", line, name, msg)
		}
		if family == "agtp" && r.AGTP == "" {
			return nil, fmt.Errorf("line %d: fixture %s is an AGTP fixture and its ready line names no \"agtp\" address", line, name)
		}
		if family != "agtp" && r.HTTP == "" {
			return nil, fmt.Errorf("line %d: fixture %s is served over HTTP and its ready line names no \"http\" base URL", line, name)
		}
		if _, err := CheckBodyForm(r.AGTPBodyForm); err != nil {
			return nil, fmt.Errorf("line %d: fixture %s: %v", line, name, err)
		}
		if r.Subject != nil {
			if _, err := readySubject(r.Subject); err != nil {
				return nil, fmt.Errorf("line %d: fixture %s: subject %v", line, name, err)
			}
		}
		out[name] = r
	}
	return out, nil
}

func offsetOf(err error, dec *json.Decoder) int {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return int(se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return int(te.Offset)
	}
	return int(dec.InputOffset())
}

// lineOf is the 1-based line of byte offset off in b.
func lineOf(b []byte, off int) int {
	if off < 0 {
		return 1
	}
	return bytes.Count(b[:min(off, len(b))], []byte("\n")) + 1
}

func (t *Deployed) Kind() string { return "url" }

// Acquire returns the deployed host of the scenario's fixture.
func (t *Deployed) Acquire(ctx context.Context, cfg Config) (*Host, error) {
	name := cfg.Fixture()
	if name == "" {
		return nil, fmt.Errorf("%w: the scenario composes a host configuration of its own, and a deployed host runs a published fixture", ErrUnsatisfiable)
	}
	if cfg.StateDir() != "" {
		return nil, fmt.Errorf("%w: the scenario stops its host and starts it again on its state, which the suite cannot do to a host it did not start (certify restarts with the exec, container or refhost target)", ErrUnsatisfiable)
	}
	want, ok := t.Fixtures[name]
	if !ok {
		return nil, fmt.Errorf("%w: fixture %s is not in the fixture set (write the set again with parley fixtures)", ErrUnsatisfiable, name)
	}
	if want.Digest() != cfg.Digest() {
		return nil, fmt.Errorf("%w: the scenario asks for fixture %s with other settings than the set holds (%s)", ErrUnsatisfiable, name, want.Differences(cfg))
	}
	r, ok := t.Hosts[name]
	if !ok {
		return nil, fmt.Errorf("%w: no host runs fixture %s (HOSTS.json names none; start one with %s.json from the fixture set and add its ready line)", ErrUnsatisfiable, name, name)
	}
	if err := t.answers(ctx, name, r); err != nil {
		return nil, err
	}
	form := r.AGTPBodyForm
	if form == "" {
		form = t.AGTPBodyForm
	}
	form, err := CheckBodyForm(form)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.used == nil {
		t.used = map[string]Config{}
	}
	t.used[name] = want
	t.mu.Unlock()
	return &Host{HTTP: strings.TrimSuffix(r.HTTP, "/"), AGTP: r.AGTP, AGTPPlaintext: r.AGTPPlaintext, AGTPBodyForm: form,
		Unsupported: r.Unsupported, Config: cfg}, nil
}

// answers checks once per fixture that its host accepts connections: a host
// that is not there blocks its fixture's scenarios (the suite was pointed at
// nothing), rather than failing them one exchange at a time.
func (t *Deployed) answers(ctx context.Context, name string, r ReadyLine) error {
	t.mu.Lock()
	if t.checked == nil {
		t.checked = map[string]error{}
	}
	err, done := t.checked[name]
	t.mu.Unlock()
	if done {
		return err
	}
	timeout := t.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var addrs []string
	if r.HTTP != "" {
		addrs = append(addrs, hostPort(r.HTTP))
	}
	if r.AGTP != "" {
		addrs = append(addrs, r.AGTP)
	}
	for _, a := range addrs {
		d := net.Dialer{Timeout: timeout}
		c, derr := d.DialContext(ctx, "tcp", a)
		if derr != nil {
			err = fmt.Errorf("%w: the host listed for fixture %s does not answer at %s: %v", ErrUnsatisfiable, name, a, derr)
			break
		}
		_ = c.Close()
	}
	t.mu.Lock()
	t.checked[name] = err
	t.mu.Unlock()
	return err
}

// hostPort is the host:port of an http(s) base URL.
func hostPort(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	if _, _, err := net.SplitHostPort(host); err != nil {
		if scheme == "https" {
			return host + ":443"
		}
		return host + ":80"
	}
	return host
}

// Configurations are the fixtures a scenario ran on.
func (t *Deployed) Configurations() []Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.used))
	for n := range t.used {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Config, 0, len(names))
	for _, n := range names {
		out = append(out, t.used[n])
	}
	return out
}

// Subject is the build every ready line names, when they name one and the
// same; otherwise undeclared (name it with --subject).
func (t *Deployed) Subject() Subject {
	seen := map[string]Subject{}
	for _, r := range t.Hosts {
		if r.Subject == nil {
			return undeclared("a deployed host's ready line names no build; name it with --subject NAME=sha256:HEX or the ready line's \"subject\"")
		}
		s, err := readySubject(r.Subject)
		if err != nil {
			return undeclared("a deployed host's ready line names its build wrongly: " + err.Error())
		}
		seen[s.Name+"\x00"+s.Digest["sha256"]] = s
	}
	if len(seen) == 1 {
		for _, s := range seen {
			return s
		}
	}
	return undeclared("the deployed hosts' ready lines name different builds (or none), so no one build was certified; name it with --subject")
}

func (t *Deployed) Close() error { return nil }
