package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/parley-conformance/parley/certify"
	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

type runFlags struct {
	target       string
	agtpBodyForm string
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
	isolate      bool
	fixturesDir  string
	hostsFile    string
	caFile       string
	modelSeed    uint64
	modelBudget  int
	startTimeout time.Duration
	// startTimeoutSet: --start-timeout was given (0s included, an error).
	startTimeoutSet bool
}

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
  url      hosts already running, one per fixture: --fixtures DIR (what
           'parley fixtures --out DIR' wrote, the hosts deployed from it) and
           --hosts HOSTS.json (fixture name -> the host's ready line); or one
           host at --url with the configuration in --host-config
  container  a local Docker image (--image), started once per configuration with
           testcontainers-go; see docs/host-interface.md for the image contract

Every flag may also be set in the environment as PARLEY_<FLAG> (for example
PARLEY_TARGET=exec); a flag on the command line wins.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			f.startTimeoutSet = cmd.Flags().Changed("start-timeout")
			softHeapLimit()
			if f.modelBudget < 0 {
				return usage("--model-budget must be at least 1")
			}
			models.Configure(models.Settings{Seed: f.modelSeed, Budget: f.modelBudget})
			return run(cmd.Context(), f, cmd.ErrOrStderr(), cmd.OutOrStdout())
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.target, "target", "refhost", "`kind` of target: refhost, exec, url or container")
	fl.StringVar(&f.image, "image", "", "`image` of the host (target container); it must already be on the Docker engine")
	fl.StringVar(&f.execCmd, "exec", "", "`command` line of the host to start (target exec)")
	fl.StringVar(&f.url, "url", "", "base `URL` of a running host's HTTP surface (target url)")
	fl.StringVar(&f.agtp, "agtp", "", "`host:port` of a running host's AGTP listener (target url)")
	fl.StringVar(&f.agtpBodyForm, "agtp-body-form", "", "the AGTP request body `form` the host reads, envelope (default) or flat (targets url, container and refhost; an exec host declares it in its ready line)")
	fl.StringVar(&f.hostConfig, "host-config", "", "the configuration `file` a running host declares (target url; schemas/host-config.json)")
	fl.StringVar(&f.tags, "tags", "", "godog tag `filter`: ',' OR, '&&' AND, '~' NOT, e.g. '@profile:contractrefine-preflight && ~@req:contractrefine.preflight.mode.typo-startup-warning'")
	fl.StringSliceVar(&f.profiles, "profile", nil, "`profile` to certify (repeatable); others are reported skipped (default: all)")
	fl.StringVar(&f.out, "out", "parley-out", "`dir`ectory for the bundle, the reports and parley.log")
	fl.StringSliceVar(&f.formats, "format", certify.Formats, "`outputs` to write: bundle, junit, cucumber, html")
	fl.StringVar(&f.key, "key", "", "ed25519 private key `file` to sign with (from parley keygen); default: an ephemeral key, and the bundle says so")
	fl.Int64Var(&f.seed, "seed", 0, "scenario order `seed` (default: random, printed)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "`n` scenarios run at once (default: eight per CPU, at most 32)")
	fl.BoolVar(&f.allowBlocked, "allow-blocked", false, "accept blocked requirements (a partial certification): exit 0 when nothing failed; the bundle records it")
	fl.BoolVar(&f.strict, "strict", false, "")
	_ = fl.MarkDeprecated("strict", "blocked requirements now fail the run by default; --allow-blocked accepts them")
	fl.StringVar(&f.subject, "subject", "", "the host build certified, as `NAME=sha256:HEX` (default: what the exec ready line or the container engine says; otherwise undeclared)")
	fl.BoolVar(&f.quiet, "quiet", false, "no per-scenario progress lines")
	fl.BoolVar(&f.isolate, "isolate", false, "give every scenario a host of its own (slow; the oracle that verdicts do not depend on scenarios sharing a fixture host)")
	fl.StringVar(&f.fixturesDir, "fixtures", "", "the fixture set `dir` the hosts were deployed from (written by parley fixtures --out DIR)")
	fl.StringVar(&f.hostsFile, "hosts", "", "`HOSTS.json`: each fixture name mapped to the ready line of the host running it (target url, with --fixtures)")
	fl.StringVar(&f.caFile, "ca", "", "`file` of PEM certificates to trust besides the fixture set's CA (a deployed host's own TLS certificate)")
	fl.Uint64Var(&f.modelSeed, "model-seed", 0, "seed of the model-based requirements' random sequences (default: random; a failing row prints the seed that replays it)")
	fl.DurationVar(&f.startTimeout, "start-timeout", 0, "how long each host may take to print its ready line, e.g. 2m (targets exec, default 30s, and container, default 60s); a slower host fails to start")
	fl.IntVar(&f.modelBudget, "model-budget", 0, fmt.Sprintf("sequences each model-based requirement runs (default %d; raise it for long runs, see docs/models.md)", models.DefaultBudget))
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

// fixtureSet reads the fixture set a run names (--fixtures, --ca), or nil
// for a set the run builds itself.
func fixtureSet(f *runFlags) (*fixtures.Set, error) {
	if f.fixturesDir == "" {
		if f.caFile != "" {
			return nil, usage("--ca is for hosts deployed from a fixture set; give --fixtures DIR too")
		}
		return nil, nil
	}
	set, _, err := fixtures.Read(f.fixturesDir)
	if err != nil {
		return nil, usage("--fixtures: %v", err)
	}
	if f.caFile != "" {
		b, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, usage("--ca: %v", err)
		}
		set.Env.TLS.ExtraCAPEM = string(b)
		if _, err := set.Env.TLS.Pool(); err != nil {
			return nil, usage("--ca %s: %v", f.caFile, err)
		}
	}
	return set, nil
}

// deployedTarget is the url target over hosts deployed from a fixture set.
func deployedTarget(f *runFlags, set *fixtures.Set) (target.Target, error) {
	if set == nil || f.hostsFile == "" {
		return nil, usage("--target url with fixtures needs both --fixtures DIR (from parley fixtures) and --hosts HOSTS.json")
	}
	if f.url != "" || f.agtp != "" || f.hostConfig != "" {
		return nil, usage("--hosts names every host; --url, --agtp and --host-config are for a single host")
	}
	b, err := os.ReadFile(f.hostsFile)
	if err != nil {
		return nil, usage("--hosts: %v", err)
	}
	known := map[string]string{}
	cfgs := map[string]target.Config{}
	for _, fx := range fixtures.All() {
		known[fx.Name] = fx.Family
		c, err := set.Config(fx.Name)
		if err != nil {
			return nil, usage("--fixtures: %v", err)
		}
		cfgs[fx.Name] = c
	}
	hosts, err := target.ParseHosts(b, known)
	if err != nil {
		return nil, usage("--hosts %s: %v", f.hostsFile, err)
	}
	return &target.Deployed{Hosts: hosts, Fixtures: cfgs, AGTPBodyForm: f.agtpBodyForm}, nil
}

func buildTarget(f *runFlags, set *fixtures.Set) (target.Target, error) {
	if f.hostsFile != "" && f.target != "url" {
		return nil, usage("--hosts is for --target url (hosts already running)")
	}
	if _, err := target.CheckBodyForm(f.agtpBodyForm); err != nil {
		return nil, usage("--agtp-body-form: %v", err)
	}
	if f.agtpBodyForm != "" && f.target == "exec" {
		return nil, usage("--agtp-body-form: an exec host declares its body form in its ready line (\"agtp_body_form\")")
	}
	switch f.target {
	case "refhost":
		t := target.NewRefhost()
		t.AGTPBodyForm = f.agtpBodyForm
		return t, nil
	case "exec":
		if f.execCmd == "" {
			return nil, usage("--target exec needs --exec \"<command>\" (it is run as '<command> <config.json>')")
		}
		return target.NewExec(f.execCmd)
	case "url":
		if f.hostsFile != "" || set != nil {
			return deployedTarget(f, set)
		}
		if f.url == "" && f.agtp == "" {
			return nil, usage("--target url needs --fixtures DIR and --hosts HOSTS.json (hosts deployed from parley fixtures), or --url (and/or --agtp) and --host-config for one host")
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
		return &target.URL{HTTP: f.url, AGTP: f.agtp, Declared: cfg, AGTPBodyForm: f.agtpBodyForm}, nil
	case "container":
		if f.image == "" {
			return nil, usage("--target container needs --image (an image already on the local Docker engine)")
		}
		c, err := target.NewContainer(f.image)
		if err == nil {
			c.AGTPBodyForm = f.agtpBodyForm
		}
		return c, err
	default:
		return nil, usage("--target %q: want refhost, exec, url or container", f.target)
	}
}

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
	// An interrupt or a SIGTERM (what CI runners, timeout(1) and container
	// schedulers send to cancel) ends the run the same way: the hosts it
	// started are stopped and its scratch removed, never left running.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, fm := range f.formats {
		if !contains(certify.Formats, fm) {
			return usage("--format %q: want some of %s", fm, strings.Join(certify.Formats, ", "))
		}
	}
	if _, err := scenarios.ParseFilter(f.tags); err != nil {
		return usage("--tags: %v", err)
	}
	cfg := certify.Config{Tags: f.tags, Profiles: f.profiles, Concurrency: f.concurrency, Seed: f.seed,
		AllowBlocked: f.allowBlocked, Out: f.out, Formats: f.formats}
	// Load the signing key before running, so a bad key fails in a second,
	// not after the whole suite.
	if f.key != "" {
		k, err := evidence.ReadPrivateKey(f.key)
		if err != nil {
			return usage("--key: %v", err)
		}
		cfg.Key = k
	}
	if f.subject != "" {
		s, err := parseSubject(f.subject)
		if err != nil {
			return err
		}
		cfg.Subject = &s
	}
	set, err := fixtureSet(f)
	if err != nil {
		return err
	}
	// Libraries (the container engine's client above all) log to
	// parley.log, never to the terminal.
	libLog := ""
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return usage("--out: %v", err)
		}
		libLog = filepath.Join(f.out, "parley.log")
		lf, err := os.Create(libLog)
		if err != nil {
			return usage("--out: %v", err)
		}
		defer lf.Close()
		defer target.LibraryLog(lf)()
	} else {
		defer target.LibraryLog(io.Discard)()
	}
	tgt, err := buildTarget(f, set)
	if err != nil {
		return err
	}
	defer tgt.Close()
	if f.startTimeoutSet {
		if err := certify.SetStartTimeout(tgt, f.startTimeout); err != nil {
			return usage("--start-timeout: %v", err)
		}
	}
	cfg.Target, cfg.Fixtures, cfg.Isolate = tgt, set, f.isolate
	if !f.quiet {
		cfg.Progress = stderr
		if fh, ok := stderr.(*os.File); ok && isatty.IsTerminal(fh.Fd()) {
			cfg.Live = true
		}
	}

	fmt.Fprintf(stderr, "parley: running against target %s (seed printed below; rerun an order with --seed)\n", tgt.Kind())
	o, err := certify.Execute(ctx, cfg)
	switch {
	case errors.Is(err, runner.ErrUsage):
		return withCode(exitUsage, err)
	case err != nil:
		return withCode(exitIncomplete, err)
	}
	if fi, err := os.Stat(libLog); err == nil && fi.Size() > 0 {
		o.Written = append(o.Written, libLog+" (what the container engine and other libraries logged)")
	}
	return summarize(stdout, o, f.allowBlocked)
}

// summarize prints the totals, the subject, the root causes first (a
// failure that blocked other requirements' setups), then every failed and
// blocked requirement, and turns the certification decision into the exit
// code.
func summarize(w io.Writer, o *certify.Outcome, allowBlocked bool) error {
	st := o.Statement
	t := st.Predicate.Totals
	fmt.Fprintf(w, "\nparley: %d requirements: %d executed-pass, %d executed-fail, %d blocked, %d skipped, %d inapplicable (seed %d)\n",
		t.Requirements, t.ExecutedPass, t.ExecutedFail, t.Blocked, t.Skipped, t.Inapplicable, o.Result.Seed)
	if h := st.Predicate.Target.HostsStarted; h != nil {
		fmt.Fprintf(w, "  hosts started: %d", *h)
		if r := st.Predicate.Target.Restarts; r != nil && *r > 0 {
			fmt.Fprintf(w, " (and %d restarts on their state)", *r)
		}
		if st.Predicate.Target.Isolate {
			fmt.Fprint(w, "; --isolate: a host per scenario")
		}
		fmt.Fprintln(w)
	}
	if s := st.Subject[0]; len(s.Digest) == 0 {
		fmt.Fprintf(w, "  subject: undeclared (%s)\n", st.Predicate.Target.Note)
	} else {
		fmt.Fprintf(w, "  subject: %s %s\n", s.Name, digestList(s.Digest))
	}
	roots := verdict.RootCauses(st.Predicate.Requirements)
	if len(roots) > 0 {
		fmt.Fprintln(w, "  root causes (fix these first; the requirements they block follow):")
		for _, r := range roots {
			fmt.Fprintf(w, "  ROOT     %s\n", r)
		}
	}
	var notPassing []verdict.Row
	for _, r := range st.Predicate.Requirements {
		e, _ := o.Registry.Lookup(r.ID)
		if (r.Result == verdict.ExecutedFail && e.Scored()) || r.Result == verdict.Blocked {
			notPassing = append(notPassing, r)
		}
	}
	printGroups(w, notPassing)
	if first := exchangeToShow(st.Predicate.Requirements, roots, o.Registry); first != nil {
		printExchange(w, first.ID, first.Exchange)
	}
	for _, p := range o.Written {
		fmt.Fprintf(w, "  wrote %s\n", p)
	}
	if o.Ephemeral && len(o.Written) > 0 {
		fmt.Fprintln(w, "  the bundle is signed with an ephemeral key (ephemeral.pub): it proves integrity, not who ran it; sign with --key for that")
	}
	if d := o.Decide(allowBlocked); d.Code != 0 {
		return &exitError{d.Code, errors.New(d.Why)}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
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

// runHeapLimit is the soft limit on the Go heap of a run, unless GOMEMLIMIT
// says otherwise. A run's live heap peaks near 60 MB (godog's results and
// the decoded answers of scenarios in flight); with the default GOGC the
// heap grows to about twice that before a collection. The limit sits above
// that, so it only caps a run that grows beyond it: at 80 MiB, below twice
// the live heap, the collector ran almost without pause and a run took
// twice the CPU (docs/performance.md); go doc runtime/debug.SetMemoryLimit.
const runHeapLimit = 160 << 20

func softHeapLimit() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(runHeapLimit)
	}
}
