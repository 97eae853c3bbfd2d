// Package certify runs the suite against a host, decides whether the host
// is certified, and writes the signed evidence bundle and its reports. The
// parley command uses it, and so can an implementer's own go test:
//
//	func TestCertify(t *testing.T) {
//		certify.Run(t, certify.Exec("./my-host-adapter"), certify.Profiles("agtp-rcns"), certify.Bundle("parley-out"))
//	}
//
// Run reports every requirement as a subtest named by its id, so
// `go test -run 'TestCertify/agtp.rcns.gate'` narrows the run and
// `go test -json` reports requirement ids.
package certify

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/suitebuild"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// Formats are the outputs a run can write.
var Formats = []string{"bundle", "junit", "cucumber", "html"}

// Outputs are the files a run writes into its directory, and clears first.
var Outputs = []string{"bundle.dsse.json", "ephemeral.pub", "junit.xml", "cucumber.json", "report.html"}

// Config says what to run, against which host, and what to write.
type Config struct {
	Target      target.Target
	Tags        string
	Profiles    []string
	Concurrency int
	Seed        int64
	// AllowBlocked accepts blocked requirements: a partial certification,
	// which the bundle records.
	AllowBlocked bool
	// Subject, when set, names the host build instead of the target.
	Subject *target.Subject
	// Progress receives a line per scenario (Live: one redrawn line).
	Progress io.Writer
	Live     bool
	// Out is where the bundle and reports go; empty writes none.
	Out     string
	Formats []string
	// Key signs the bundle; nil signs with a fresh ephemeral key whose
	// public half is written beside the bundle.
	Key ed25519.PrivateKey
	// Fixtures is the fixture set hosts were deployed from (parley
	// fixtures); nil builds one for the run.
	Fixtures *fixtures.Set
	// Isolate gives every scenario a host of its own.
	Isolate bool
}

// Outcome is a finished run.
type Outcome struct {
	Result    *runner.Result
	Statement evidence.Statement
	Registry  *scenarios.Registry
	Written   []string
	Ephemeral bool
}

// subjectTarget overrides a target's idea of the build it certifies.
type subjectTarget struct {
	target.Target
	s target.Subject
}

func (t subjectTarget) Subject() target.Subject { return t.s }

// Execute runs the suite and writes what cfg asks for. A usage mistake
// (a tag filter selecting nothing, an unknown profile) wraps
// runner.ErrUsage.
func Execute(ctx context.Context, cfg Config) (*Outcome, error) {
	if cfg.Target == nil {
		return nil, fmt.Errorf("%w: no target", runner.ErrUsage)
	}
	formats := cfg.Formats
	if formats == nil {
		formats = Formats
	}
	priv, ephemeral := cfg.Key, false
	if priv == nil {
		_, k, err := evidence.GenerateKey()
		if err != nil {
			return nil, err
		}
		priv, ephemeral = k, true
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		return nil, err
	}
	tgt := cfg.Target
	if cfg.Subject != nil {
		tgt = subjectTarget{tgt, *cfg.Subject}
	}
	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, fmt.Errorf("%w: output directory: %v", runner.ErrUsage, err)
		}
		// Nothing of an earlier run may pass for this one's: a run that
		// aborts, or writes fewer formats, leaves no stale bundle behind.
		for _, name := range Outputs {
			if err := os.Remove(filepath.Join(cfg.Out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: cannot clear %s: %v", runner.ErrUsage, name, err)
			}
		}
	}
	opt := runner.Options{Target: tgt, Tags: cfg.Tags, Profiles: cfg.Profiles, Concurrency: cfg.Concurrency, Seed: cfg.Seed, Progress: cfg.Progress, Live: cfg.Live,
		Fixtures: cfg.Fixtures, Isolate: cfg.Isolate,
		// A host the suite did not start is shared by every scenario of its
		// fixture: one that changes it runs after the others.
		ExclusiveLast: tgt.Kind() == "url"}
	if cfg.Out != "" && has(formats, "cucumber") {
		opt.CucumberJSON = filepath.Join(cfg.Out, "cucumber.json")
	}
	res, err := runner.Run(ctx, reg, corpus, opt)
	if cfg.Fixtures != nil {
		// Identities leased from deployed hosts are never leased again,
		// even by a run that did not finish.
		if serr := cfg.Fixtures.SaveLeases(); serr != nil && err == nil {
			err = fmt.Errorf("recording the leases taken from the fixture set: %w", serr)
		}
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted; no bundle written: %w", ctx.Err())
	}
	pub := priv.Public().(ed25519.PublicKey)
	o := &Outcome{Result: res, Registry: reg, Ephemeral: ephemeral}
	o.Statement = evidence.Build(reg, corpus, evidenceRun(res, cfg.AllowBlocked), evidenceHost(tgt, res, cfg.Isolate), evidence.SigningInfo{KeyID: evidence.KeyID(pub), Ephemeral: ephemeral})
	if cfg.Out != "" {
		if err := o.write(cfg.Out, formats, priv, opt.CucumberJSON); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (o *Outcome) write(dir string, formats []string, priv ed25519.PrivateKey, cucumber string) error {
	st := o.Statement
	write := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(fh); err != nil {
			fh.Close()
			return err
		}
		o.Written = append(o.Written, path)
		return fh.Close()
	}
	if has(formats, "bundle") {
		env, err := evidence.Sign(st, priv)
		if err != nil {
			return err
		}
		if err := write("bundle.dsse.json", func(w io.Writer) error { _, err := w.Write(env); return err }); err != nil {
			return err
		}
		if o.Ephemeral {
			der, _ := x509.MarshalPKIXPublicKey(priv.Public())
			if err := write("ephemeral.pub", func(w io.Writer) error { _, err := w.Write(evidence.EncodePublicKey(der)); return err }); err != nil {
				return err
			}
		}
	}
	if has(formats, "junit") {
		if err := write("junit.xml", func(w io.Writer) error { return evidence.WriteJUnit(w, st) }); err != nil {
			return err
		}
	}
	if has(formats, "cucumber") {
		raw, err := os.ReadFile(cucumber)
		if errors.Is(err, fs.ErrNotExist) {
			// No scenario ran (the profiles left out every one the tags
			// chose): the report is an empty list of features.
			raw, err = []byte("[]"), nil
		}
		if err == nil {
			raw, err = evidence.RewriteCucumber(raw, st)
		}
		if err == nil {
			err = os.WriteFile(cucumber, raw, 0o644)
		}
		if err != nil {
			return fmt.Errorf("cucumber.json: %w", err)
		}
		o.Written = append(o.Written, cucumber)
	}
	if has(formats, "html") {
		how := "signed with key " + st.Predicate.Signing.KeyID
		if o.Ephemeral {
			how = "signed with an ephemeral key"
		}
		if err := write("report.html", func(w io.Writer) error { return evidence.RenderHTML(w, st, o.Registry, how) }); err != nil {
			return err
		}
	}
	return nil
}

// Decision is whether a run certifies its host, as an exit code means it.
type Decision struct {
	// Code is 0 (certified), 1 (something failed or was blocked) or 3
	// (parley faulted, or nothing was witnessed).
	Code int
	// Why says it in a sentence (empty when certified).
	Why string
}

// Decide applies the exit-code rules: 0 only when every selected scored
// requirement is executed-pass, inapplicable or registered unwitnessable
// (blocked too when allowed); 3 when parley faulted or witnessed nothing.
func (o *Outcome) Decide(allowBlocked bool) Decision {
	if faults := o.Result.SuiteFaults(); len(faults) > 0 {
		return Decision{3, fmt.Sprintf("parley itself faulted in %d scenario(s) (a bug in the suite, not in the host; please report it): first at %s:%d: %s",
			len(faults), faults[0].URI, faults[0].Line, firstLine(faults[0].Detail))}
	}
	if !o.Result.Executed() {
		return Decision{3, "no requirement was witnessed (every selected one was blocked, skipped or inapplicable): nothing is certified"}
	}
	failed, blocked := false, false
	for _, r := range o.Statement.Predicate.Requirements {
		e, _ := o.Registry.Lookup(r.ID)
		if !e.Scored() {
			continue
		}
		switch r.Result {
		case verdict.ExecutedFail:
			failed = true
		case verdict.Blocked:
			blocked = true
		}
	}
	switch {
	case failed:
		return Decision{1, "some scored requirements failed"}
	case blocked && !allowBlocked:
		return Decision{1, "some scored requirements are blocked: the host is not certified for them (--allow-blocked accepts a partial certification, and the bundle records it)"}
	}
	return Decision{}
}

func evidenceRun(res *runner.Result, allowBlocked bool) evidence.Run {
	b := suitebuild.Read()
	return evidence.Run{Seed: res.Seed, Tags: res.Tags, Profiles: res.Profiles, Started: res.Started, Finished: res.Finished, Rows: res.Rows,
		AllowBlocked: allowBlocked, SuiteVersion: b.Version, SuiteCommit: b.Commit, Facts: res.Facts}
}

func evidenceHost(t target.Target, res *runner.Result, isolate bool) evidence.Host {
	s := t.Subject()
	h := evidence.Host{Kind: t.Kind(), Subject: evidence.Subject{Name: s.Name, Digest: s.Digest}, Note: s.Note, Configurations: map[string][]byte{},
		HostsStarted: res.Hosts, Restarts: res.Restarts, Isolate: isolate}
	if b, ok := t.(target.StartBounded); ok {
		h.StartTimeout = b.StartBound()
	}
	for _, c := range t.Configurations() {
		h.Configurations[c.Digest()] = c.JSON()
	}
	return h
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
