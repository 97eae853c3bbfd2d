package certify

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// Option shapes a run for Run.
type Option func(*options)

type options struct {
	cfg          Config
	newTgt       func() (target.Target, error)
	keyPath      string
	startTimeout *time.Duration // set by StartTimeout; 0 or less is an error
}

// Exec certifies the host a command starts (docs/host-interface.md): it is
// run as `<command> <config.json>` once per configuration.
func Exec(command string) Option {
	return func(o *options) {
		o.newTgt = func() (target.Target, error) { return target.NewExec(command) }
	}
}

// Container certifies a container image (docs/host-interface.md, "The
// container adapter contract"): a container of it per configuration, from
// the local Docker engine.
func Container(image string) Option {
	return func(o *options) {
		o.newTgt = func() (target.Target, error) { return target.NewContainer(image) }
	}
}

// StartTimeout gives each host d to print its ready line (the exec and
// container targets; their defaults are 30 s and 60 s). A slower host fails
// to start, so a host known to start slowly needs more.
func StartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = &d } }

// Concurrency runs at most n scenarios at once (0: the runner's default).
func Concurrency(n int) Option { return func(o *options) { o.cfg.Concurrency = n } }

// Refhost certifies the bundled reference host, in-process.
func Refhost() Option {
	return func(o *options) { o.newTgt = func() (target.Target, error) { return target.NewRefhost(), nil } }
}

// Target certifies whatever host t gives.
func Target(t target.Target) Option {
	return func(o *options) { o.newTgt = func() (target.Target, error) { return t, nil } }
}

// Profiles certifies only these profiles; the others are reported skipped.
func Profiles(names ...string) Option { return func(o *options) { o.cfg.Profiles = names } }

// Tags narrows the scenarios with a godog tag filter.
func Tags(filter string) Option { return func(o *options) { o.cfg.Tags = filter } }

// Bundle writes the signed bundle and the reports into dir.
func Bundle(dir string) Option { return func(o *options) { o.cfg.Out = dir } }

// SigningKey signs the bundle with the ed25519 private key at path (from
// `parley keygen`) instead of an ephemeral one.
func SigningKey(path string) Option { return func(o *options) { o.keyPath = path } }

// AllowBlocked accepts blocked requirements: their subtests skip instead of
// failing, and the bundle records a partial certification.
func AllowBlocked() Option { return func(o *options) { o.cfg.AllowBlocked = true } }

// Subject names the host build the bundle certifies.
func Subject(name, sha256Hex string) Option {
	return func(o *options) {
		o.cfg.Subject = &target.Subject{Name: name, Digest: map[string]string{"sha256": strings.ToLower(sha256Hex)}}
	}
}

// Seed fixes the scenario order.
func Seed(n int64) Option { return func(o *options) { o.cfg.Seed = n } }

// SetStartTimeout gives each host tgt starts d to print its ready line; it
// is an error for a target that starts no host of its own, and for d <= 0.
func SetStartTimeout(tgt target.Target, d time.Duration) error {
	b, ok := tgt.(target.StartBounded)
	switch {
	case !ok:
		return fmt.Errorf("target %s waits for no ready line (a start timeout is for the exec and container targets)", tgt.Kind())
	case d <= 0:
		return fmt.Errorf("a start timeout must be positive, not %s", d)
	}
	b.SetStartBound(d)
	return nil
}

// Run certifies a host from a go test, one subtest per requirement id: a
// requirement that passes, passes; one that fails, fails with the detail
// that says what the host sent; a blocked one fails too, unless
// AllowBlocked, when it skips; skipped and inapplicable ones skip. A fault
// of parley itself fails the test naming it. `go test -run 'Test/<id
// pattern>'` runs only the requirements the pattern names.
func Run(t *testing.T, opts ...Option) *Outcome {
	t.Helper()
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.newTgt == nil {
		t.Fatal("certify.Run: say which host to certify (certify.Exec, certify.Container, certify.Refhost or certify.Target)")
	}
	tgt, err := o.newTgt()
	if err != nil {
		t.Fatalf("certify.Run: %v", err)
	}
	defer tgt.Close()
	if o.startTimeout != nil {
		if err := SetStartTimeout(tgt, *o.startTimeout); err != nil {
			t.Fatalf("certify.Run: %v", err)
		}
	}
	o.cfg.Target = tgt
	if o.keyPath != "" {
		k, err := evidence.ReadPrivateKey(o.keyPath)
		if err != nil {
			t.Fatalf("certify.Run: signing key: %v", err)
		}
		o.cfg.Key = k
	}
	if o.cfg.Tags == "" {
		tags, none, err := tagsFromRunFlag(t.Name())
		if err != nil {
			t.Fatalf("certify.Run: %v", err)
		}
		if none {
			t.Skip("certify.Run: the -run pattern selects no requirement id under " + t.Name())
		}
		o.cfg.Tags = tags
	}
	out, err := Execute(context.Background(), o.cfg)
	if err != nil {
		t.Fatalf("certify.Run: %v", err)
	}
	for _, row := range out.Statement.Predicate.Requirements {
		t.Run(row.ID, func(t *testing.T) {
			switch s := subtest(row, o.cfg.AllowBlocked); s.kind {
			case failSubtest:
				t.Error(s.msg)
			case skipSubtest:
				t.Skip(s.msg)
			}
		})
	}
	if d := out.Decide(o.cfg.AllowBlocked); d.Code != 0 && !t.Failed() {
		t.Errorf("not certified: %s", d.Why)
	}
	for _, p := range out.Written {
		t.Logf("wrote %s", p)
	}
	return out
}

// tagsFromRunFlag narrows the run to the requirement ids that the
// subtest part of `go test -run` would select under the calling test, so
// that `-run 'TestCertify/agtp.rcns.gate'` runs only those scenarios.
func tagsFromRunFlag(testName string) (tags string, none bool, err error) {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return "", false, nil
	}
	parts := splitRun(f.Value.String())
	depth := strings.Count(testName, "/") + 1
	if len(parts) <= depth {
		return "", false, nil
	}
	re, err := regexp.Compile(parts[depth])
	if err != nil {
		return "", false, err
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		return "", false, err
	}
	witnessed := map[string]bool{}
	for _, s := range corpus.Scenarios {
		for _, id := range s.ReqIDs {
			witnessed[id] = true
		}
	}
	var ts []string
	for _, e := range reg.Entries {
		if re.MatchString(e.ID) && witnessed[e.ID] {
			ts = append(ts, scenarios.ReqTagPrefix+e.ID)
		}
	}
	if len(ts) == 0 {
		return "", true, nil
	}
	return strings.Join(ts, ","), false, nil
}

// splitRun splits a -run pattern at the slashes outside brackets and
// parentheses, as the testing package does.
func splitRun(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			if depth > 0 {
				depth--
			}
		case '/':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

type subtestKind int

const (
	passSubtest subtestKind = iota
	failSubtest
	skipSubtest
)

type subtestResult struct {
	kind subtestKind
	msg  string
}

// subtest says how a requirement's row reads as a Go subtest.
func subtest(row verdict.Row, allowBlocked bool) subtestResult {
	what := row.Result
	if row.Cause != "" {
		what += " (" + row.Cause + ")"
	}
	switch {
	case row.Result == verdict.ExecutedPass:
		return subtestResult{passSubtest, ""}
	case row.Result == verdict.ExecutedFail:
		return subtestResult{failSubtest, what + ": " + row.Detail}
	case row.Result == verdict.Blocked && row.Cause == verdict.CauseSuiteFault:
		return subtestResult{failSubtest, what + ": parley itself faulted (a bug in the suite, not in the host): " + row.Detail}
	case row.Result == verdict.Blocked && !allowBlocked:
		return subtestResult{failSubtest, what + ": " + row.Detail}
	}
	return subtestResult{skipSubtest, what + ": " + row.Detail}
}
