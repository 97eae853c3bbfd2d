package main

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/parley-conformance/parley/suitebuild"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

type runFlags struct {
	target       string
	execCmd      string
	image        string
	url          string
	agtp         string
	hostConfig   string
	tags         string
	profiles     []string
	out          string
	formats      []string
	key          string
	seed         int64
	concurrency  int
	allowBlocked bool
	strict       bool
	subject      string
	quiet        bool
}

var allFormats = []string{"bundle", "junit", "cucumber", "html"}

// outputs are the files a run writes into --out, and clears first.
var outputs = []string{"bundle.dsse.json", "ephemeral.pub", "junit.xml", "cucumber.json", "report.html"}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the suite against a host and write a signed evidence bundle",
		Long: `Run the suite against a host and write, into --out: bundle.dsse.json (the
signed evidence), junit.xml, cucumber.json and report.html.

Targets:
  refhost  the bundled reference host, in-process (default)
  exec     your command, run as '<command> <config.json>' once per host
           configuration; it prints {"parley":"ready","http":"http://…"} when it serves
  url      a host already running at --url with the configuration in --host-config
  container  a local Docker image (--image), started once per configuration with
           testcontainers-go; see docs/host-interface.md for the image contract

Every flag may also be set in the environment as PARLEY_<FLAG> (for example
PARLEY_TARGET=exec); a flag on the command line wins.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			return run(cmd.Context(), f, cmd.ErrOrStderr(), cmd.OutOrStdout())
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.target, "target", "refhost", "refhost, exec, url or container")
	fl.StringVar(&f.image, "image", "", "image of the host (target container); it must already be on the Docker engine")
	fl.StringVar(&f.execCmd, "exec", "", "command line of the host to start (target exec)")
	fl.StringVar(&f.url, "url", "", "base URL of a running host's HTTP surface (target url)")
	fl.StringVar(&f.agtp, "agtp", "", "host:port of a running host's AGTP listener (target url)")
	fl.StringVar(&f.hostConfig, "host-config", "", "the configuration a running host declares (target url; schemas/host-config.json)")
	fl.StringVar(&f.tags, "tags", "", "godog tag filter: ',' OR, '&&' AND, '~' NOT, e.g. '@profile:contractrefine-preflight && ~@req:contractrefine.preflight.mode.typo-startup-warning'")
	fl.StringSliceVar(&f.profiles, "profile", nil, "profile to certify (repeatable); others are reported skipped (default: all)")
	fl.StringVar(&f.out, "out", "parley-out", "directory for the bundle and reports")
	fl.StringSliceVar(&f.formats, "format", allFormats, "outputs to write: bundle, junit, cucumber, html")
	fl.StringVar(&f.key, "key", "", "ed25519 private key to sign with (from `parley keygen`); default: an ephemeral key, and the bundle says so")
	fl.Int64Var(&f.seed, "seed", 0, "scenario order seed (default: random, printed)")
	fl.IntVar(&f.concurrency, "concurrency", 4, "scenarios run at once")
	fl.BoolVar(&f.allowBlocked, "allow-blocked", false, "accept blocked requirements (a partial certification): exit 0 when nothing failed; the bundle records it")
	fl.BoolVar(&f.strict, "strict", false, "")
	_ = fl.MarkDeprecated("strict", "blocked requirements now fail the run by default; --allow-blocked accepts them")
	fl.StringVar(&f.subject, "subject", "", "the host build certified, as NAME=sha256:HEX (default: what the exec ready line or the container engine says; otherwise undeclared)")
	fl.BoolVar(&f.quiet, "quiet", false, "no per-scenario progress lines")
	return c
}

// envDefaults applies PARLEY_<FLAG> for every flag not given on the command line.
func envDefaults(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed || err != nil {
			return
		}
		name := "PARLEY_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(fl.Name, v); e != nil {
				err = usage("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

func buildTarget(f *runFlags) (target.Target, error) {
	switch f.target {
	case "refhost":
		return target.NewRefhost(), nil
	case "exec":
		if f.execCmd == "" {
			return nil, usage("--target exec needs --exec \"<command>\" (it is run as '<command> <config.json>')")
		}
		return target.NewExec(f.execCmd)
	case "url":
		if f.url == "" && f.agtp == "" {
			return nil, usage("--target url needs --url (and/or --agtp) and --host-config")
		}
		if f.hostConfig == "" {
			return nil, usage("--target url needs --host-config: the configuration the running host declares")
		}
		b, err := os.ReadFile(f.hostConfig)
		if err != nil {
			return nil, usage("--host-config: %v", err)
		}
		cfg, err := target.ParseConfig(b)
		if err != nil {
			return nil, usage("--host-config %s: %v", f.hostConfig, err)
		}
		if err := schemas.ValidateJSON("host-config.json", cfg.JSON()); err != nil {
			return nil, usage("--host-config %s does not satisfy schemas/host-config.json: %v", f.hostConfig, err)
		}
		return &target.URL{HTTP: f.url, AGTP: f.agtp, Declared: cfg}, nil
	case "container":
		if f.image == "" {
			return nil, usage("--target container needs --image (an image already on the local Docker engine)")
		}
		return target.NewContainer(f.image)
	default:
		return nil, usage("--target %q: want refhost, exec, url or container", f.target)
	}
}

// subjectTarget overrides the target's idea of what build it certifies.
type subjectTarget struct {
	target.Target
	s target.Subject
}

func (t subjectTarget) Subject() target.Subject { return t.s }

func parseSubject(s string) (target.Subject, error) {
	name, dig, ok := strings.Cut(s, "=")
	d, err := target.ParseDigest(dig)
	if !ok || strings.TrimSpace(name) == "" || err != nil || name == target.Undeclared {
		return target.Subject{}, usage("--subject %q: want NAME=sha256:<64 hex digits> naming the host build", s)
	}
	return target.Subject{Name: name, Digest: d}, nil
}

func run(ctx context.Context, f *runFlags, stderr, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	for _, fm := range f.formats {
		if !contains(allFormats, fm) {
			return usage("--format %q: want some of %s", fm, strings.Join(allFormats, ", "))
		}
	}
	if _, err := scenarios.ParseFilter(f.tags); err != nil {
		return usage("--tags: %v", err)
	}
	// Load the signing key before running, so a bad key fails in a second,
	// not after the whole suite.
	var (
		priv      ed25519.PrivateKey
		ephemeral bool
	)
	if f.key != "" {
		k, err := evidence.ReadPrivateKey(f.key)
		if err != nil {
			return usage("--key: %v", err)
		}
		priv = k
	} else {
		_, k, err := evidence.GenerateKey()
		if err != nil {
			return withCode(exitIncomplete, err)
		}
		priv, ephemeral = k, true
	}
	reg, err := scenarios.LoadRegistry()
	if err != nil {
		return withCode(exitIncomplete, err)
	}
	corpus, err := scenarios.LoadCorpus()
	if err != nil {
		return withCode(exitIncomplete, err)
	}
	tgt, err := buildTarget(f)
	if err != nil {
		return err
	}
	defer tgt.Close()
	if f.subject != "" {
		s, err := parseSubject(f.subject)
		if err != nil {
			return err
		}
		tgt = subjectTarget{tgt, s}
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return usage("--out: %v", err)
	}
	// Nothing of an earlier run may pass for this one's: a run that aborts,
	// or writes fewer formats, leaves no stale bundle or report behind.
	for _, name := range outputs {
		if err := os.Remove(filepath.Join(f.out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return usage("--out: cannot clear %s: %v", name, err)
		}
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	opt := runner.Options{Target: tgt, Tags: f.tags, Profiles: f.profiles, Concurrency: f.concurrency, Seed: f.seed}
	if !f.quiet {
		opt.Progress = stderr
		if fh, ok := stderr.(*os.File); ok && isatty.IsTerminal(fh.Fd()) {
			opt.Live = true
		}
	}
	if contains(f.formats, "cucumber") {
		opt.CucumberJSON = filepath.Join(f.out, "cucumber.json")
	}
	fmt.Fprintf(stderr, "parley: running against target %s (seed printed below; rerun an order with --seed)\n", tgt.Kind())
	res, err := runner.Run(ctx, reg, corpus, opt)
	if errors.Is(err, runner.ErrUsage) {
		return withCode(exitUsage, err)
	}
	if err != nil {
		return withCode(exitIncomplete, err)
	}
	if ctx.Err() != nil {
		return withCode(exitIncomplete, errors.New("interrupted; no bundle written"))
	}

	pub := priv.Public().(ed25519.PublicKey)
	st := evidence.Build(reg, corpus, evidenceRun(res, f.allowBlocked), evidenceHost(tgt), evidence.SigningInfo{KeyID: evidence.KeyID(pub), Ephemeral: ephemeral})
	var written []string
	write := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(f.out, name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(fh); err != nil {
			fh.Close()
			return err
		}
		written = append(written, path)
		return fh.Close()
	}
	if contains(f.formats, "bundle") {
		env, err := evidence.Sign(st, priv)
		if err != nil {
			return withCode(exitIncomplete, err)
		}
		if err := write("bundle.dsse.json", func(w io.Writer) error { _, err := w.Write(env); return err }); err != nil {
			return withCode(exitIncomplete, err)
		}
		if ephemeral {
			der, _ := x509.MarshalPKIXPublicKey(pub)
			if err := write("ephemeral.pub", func(w io.Writer) error { _, err := w.Write(evidence.EncodePublicKey(der)); return err }); err != nil {
				return withCode(exitIncomplete, err)
			}
		}
	}
	if contains(f.formats, "junit") {
		if err := write("junit.xml", func(w io.Writer) error { return evidence.WriteJUnit(w, st) }); err != nil {
			return withCode(exitIncomplete, err)
		}
	}
	if contains(f.formats, "cucumber") {
		raw, err := os.ReadFile(opt.CucumberJSON)
		if err == nil {
			raw, err = evidence.RewriteCucumber(raw, st)
		}
		if err == nil {
			err = os.WriteFile(opt.CucumberJSON, raw, 0o644)
		}
		if err != nil {
			return withCode(exitIncomplete, fmt.Errorf("cucumber.json: %w", err))
		}
		written = append(written, opt.CucumberJSON)
	}
	if contains(f.formats, "html") {
		how := "signed with key " + st.Predicate.Signing.KeyID
		if ephemeral {
			how = "signed with an ephemeral key"
		}
		if err := write("report.html", func(w io.Writer) error { return evidence.RenderHTML(w, st, reg, how) }); err != nil {
			return withCode(exitIncomplete, err)
		}
	}

	return summarize(stdout, st, reg, res, written, f.allowBlocked, ephemeral)
}

// summarize prints the totals, the root causes first (a failure that blocked
// other requirements' setups), then every failed and blocked requirement,
// and decides the exit code: 0 only when every selected requirement is
// executed-pass, inapplicable or registered unwitnessable (blocked too,
// under --allow-blocked); 3 when parley itself faulted or witnessed nothing.
func summarize(w io.Writer, st evidence.Statement, reg *scenarios.Registry, res *runner.Result, written []string, allowBlocked, ephemeral bool) error {
	t := st.Predicate.Totals
	fmt.Fprintf(w, "\nparley: %d requirements: %d executed-pass, %d executed-fail, %d blocked, %d skipped, %d inapplicable (seed %d)\n",
		t.Requirements, t.ExecutedPass, t.ExecutedFail, t.Blocked, t.Skipped, t.Inapplicable, res.Seed)
	if s := st.Subject[0]; len(s.Digest) == 0 {
		fmt.Fprintf(w, "  subject: undeclared (%s)\n", st.Predicate.Target.Note)
	} else {
		fmt.Fprintf(w, "  subject: %s %s\n", s.Name, digestList(s.Digest))
	}
	if roots := verdict.RootCauses(st.Predicate.Requirements); len(roots) > 0 {
		fmt.Fprintln(w, "  root causes (fix these first; the requirements they block follow):")
		for _, r := range roots {
			fmt.Fprintf(w, "  ROOT     %s\n", r)
		}
	}
	failed, blocked := false, false
	for _, r := range st.Predicate.Requirements {
		e, _ := reg.Lookup(r.ID)
		switch {
		case r.Result == verdict.ExecutedFail && e.Scored():
			failed = true
			fmt.Fprintf(w, "  FAIL     %s\n           %s\n", r.ID, firstLine(r.Detail))
		case r.Result == verdict.Blocked:
			if e.Scored() {
				blocked = true
			}
			fmt.Fprintf(w, "  BLOCKED  %s (%s)\n           %s\n", r.ID, r.Cause, firstLine(r.Detail))
		}
	}
	for _, p := range written {
		fmt.Fprintf(w, "  wrote %s\n", p)
	}
	if ephemeral {
		fmt.Fprintln(w, "  the bundle is signed with an ephemeral key (ephemeral.pub): it proves integrity, not who ran it; sign with --key for that")
	}
	if faults := res.SuiteFaults(); len(faults) > 0 {
		return &exitError{exitIncomplete, fmt.Errorf("parley itself faulted in %d scenario(s) (a bug in the suite, not in the host; please report it): first at %s:%d: %s",
			len(faults), faults[0].URI, faults[0].Line, firstLine(faults[0].Detail))}
	}
	if !res.Executed() {
		return &exitError{exitIncomplete, errors.New("no requirement was witnessed (every selected one was blocked, skipped or inapplicable): nothing is certified")}
	}
	switch {
	case failed:
		return &exitError{exitFailed, errors.New("some scored requirements failed")}
	case blocked && !allowBlocked:
		return &exitError{exitFailed, errors.New("some scored requirements are blocked: the host is not certified for them (--allow-blocked accepts a partial certification, and the bundle records it)")}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// evidenceRun and evidenceHost hand the evidence package plain data, so
// that it links neither the runner nor the targets.
func evidenceRun(res *runner.Result, allowBlocked bool) evidence.Run {
	b := suitebuild.Read()
	return evidence.Run{Seed: res.Seed, Tags: res.Tags, Profiles: res.Profiles, Started: res.Started, Finished: res.Finished, Rows: res.Rows,
		AllowBlocked: allowBlocked, SuiteVersion: b.Version, SuiteCommit: b.Commit}
}

func evidenceHost(t target.Target) evidence.Host {
	s := t.Subject()
	h := evidence.Host{Kind: t.Kind(), Subject: evidence.Subject{Name: s.Name, Digest: s.Digest}, Note: s.Note, Configurations: map[string][]byte{}}
	for _, c := range t.Configurations() {
		h.Configurations[c.Digest()] = c.JSON()
	}
	return h
}
