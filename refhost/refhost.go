// Package refhost assembles the reference host: it reads one configuration
// document (a section per spec family, as schemas/host-config.json
// describes), opens each configured family, and serves them on one HTTP
// listener. Test seams are mounted only when the document sets "seams": true.
package refhost

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// Options says how to run the host.
type Options struct {
	// Config is the configuration document.
	Config []byte
	// DataDir holds durable state, one subdirectory per family. Empty means a
	// fresh temporary directory that Close removes.
	DataDir string
	// Listen is the HTTP listen address; empty means 127.0.0.1:0.
	Listen string
	// AGTPListen is the AGTP/1.0 listen address of a family that serves
	// AGTP (the "agtp" section); empty means 127.0.0.1:0.
	AGTPListen string
	// AGTPPlaintextListen is where the second, plaintext AGTP listener of
	// a family that serves TLS and asks for one (plaintext_listener) binds:
	// a loopback address; empty means 127.0.0.1:0.
	AGTPPlaintextListen string
	Logger              *slog.Logger
}

// Host is a running reference host.
type Host struct {
	// URL is the base URL of the HTTP listener.
	URL string
	// AGTPAddr is the host:port of the AGTP/1.0 listener, when the
	// configuration has an "agtp" section; AGTPTLS says whether it speaks
	// TLS 1.3 (else plaintext, loopback only).
	AGTPAddr string
	AGTPTLS  bool
	// AGTPPlaintextAddr is the host:port of the second, plaintext AGTP
	// listener on loopback, when the AGTP listener serves TLS and the
	// section asks for plaintext beside it.
	AGTPPlaintextAddr string

	srv      *http.Server
	agtpLn   net.Listener
	agtpPlLn net.Listener
	families []family
	tmpDir   string
}

// family is what every refhost family package provides.
type family interface {
	Handler() http.Handler
	Seams() http.Handler
	Close() error
}

// agtpFamily is implemented by a family that serves AGTP/1.0 on a listener
// of its own (beside the HTTP one, which still carries its seams).
type agtpFamily interface {
	ServeAGTP(l net.Listener) error
	// AGTPTLS is the server's TLS configuration, or nil for plaintext
	// (which the AGTP server accepts from loopback peers only).
	AGTPTLS() *tls.Config
}

// agtpPlaintextFamily is an agtpFamily that may ask, beside its TLS
// listener, for a second one speaking plaintext on loopback.
type agtpPlaintextFamily interface {
	AGTPPlaintext() bool
}

// familySpec tells the assembler how to open a family and which paths it owns.
type familySpec struct {
	name     string
	patterns []string
	// seams is where the family's test seams mount; default
	// /conformance/seams/<name>/.
	seams string
	open  func(section json.RawMessage, env hostenv.Env) (family, error)
}

// decodeStrict reads a family section and refuses unknown fields, so that a
// misspelt knob is an error at startup rather than a silently ignored line.
func decodeStrict(section json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(section))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// Start opens the configured families and begins serving.
func Start(opts Options) (*Host, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(opts.Config, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("refhost: configuration must be a JSON object: %v", err)
	}
	seams := false
	if raw, ok := doc["seams"]; ok {
		if err := json.Unmarshal(raw, &seams); err != nil {
			return nil, errors.New(`refhost: "seams" must be true or false`)
		}
		delete(doc, "seams")
	}
	// fixture names the published configuration this is; it changes
	// nothing in how the host serves, and is logged for the operator.
	fixture := ""
	if raw, ok := doc["fixture"]; ok {
		if err := json.Unmarshal(raw, &fixture); err != nil || fixture == "" {
			return nil, errors.New(`refhost: "fixture" must be a fixture name`)
		}
		delete(doc, "fixture")
	}
	// "fixture" names the published fixture the document is (parley
	// fixtures); the sections say everything the host needs.
	delete(doc, "fixture")
	// state_dir names where durable state lives, so that the host can be
	// stopped and started again on it; an explicit DataDir wins.
	if raw, ok := doc["state_dir"]; ok {
		var dir string
		if err := json.Unmarshal(raw, &dir); err != nil || dir == "" {
			return nil, errors.New(`refhost: "state_dir" must be a directory path`)
		}
		if opts.DataDir == "" {
			opts.DataDir = dir
		}
		delete(doc, "state_dir")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	h := &Host{}
	// A start that fails closes what it opened and removes the temporary
	// directory it made, whatever step it failed at.
	started := false
	defer func() {
		if !started {
			_ = h.closeFamilies()
			if h.tmpDir != "" {
				_ = os.RemoveAll(h.tmpDir)
			}
		}
	}()
	dataDir := opts.DataDir
	if dataDir == "" {
		d, err := os.MkdirTemp("", "parley-refhost-*")
		if err != nil {
			return nil, err
		}
		dataDir, h.tmpDir = d, d
	}

	names := make([]string, 0, len(doc))
	for name := range doc {
		names = append(names, name)
	}
	sort.Strings(names)
	specs := map[string]familySpec{}
	var known []string
	for _, s := range familySpecs {
		specs[s.name] = s
		known = append(known, s.name)
	}
	mux := http.NewServeMux()
	seamMux := http.NewServeMux()
	for _, name := range names {
		spec, ok := specs[name]
		if !ok {
			return nil, fmt.Errorf("refhost: unknown family %q in configuration (known: %s)", name, strings.Join(known, ", "))
		}
		dir := filepath.Join(dataDir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := spec.open(doc[name], hostenv.Env{DataDir: dir, Logger: log.With("family", name)})
		if err != nil {
			return nil, fmt.Errorf("refhost: %s: %w", name, err)
		}
		h.families = append(h.families, f)
		for _, p := range spec.patterns {
			mux.Handle(p, f.Handler())
		}
		if seams {
			prefix := spec.seams
			if prefix == "" {
				prefix = "/conformance/seams/" + name + "/"
			}
			seamMux.Handle(prefix, f.Seams())
		}
	}
	for _, f := range h.families {
		af, ok := f.(agtpFamily)
		if !ok {
			continue
		}
		if h.AGTPAddr != "" {
			return nil, errors.New("refhost: more than one family serves AGTP")
		}
		if err := h.listenAGTP(af, opts.AGTPListen, opts.AGTPPlaintextListen, log); err != nil {
			return nil, err
		}
	}
	if seams {
		mux.Handle("/conformance/seams/", seamMux)
		log.Warn("test seams are enabled; never expose this host to untrusted callers")
	}

	addr := opts.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h.URL = "http://" + ln.Addr().String()
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http listener stopped", "err", err)
		}
	}()
	started = true
	log.Info("refhost listening", "url", h.URL, "agtp", h.AGTPAddr, "agtp_tls", h.AGTPTLS, "agtp_plaintext", h.AGTPPlaintextAddr, "families", strings.Join(names, ","), "seams", seams, "fixture", fixture)
	return h, nil
}

// listenAGTP opens the AGTP listener (TLS 1.3 when the family has TLS
// material) and, for a family that serves TLS and asks for it, a second,
// plaintext listener on loopback; it serves them until the family closes.
func (h *Host) listenAGTP(f agtpFamily, addr, plainAddr string, log *slog.Logger) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("refhost: agtp listener: %w", err)
	}
	tc := f.AGTPTLS()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
		h.AGTPTLS = true
	}
	var pl net.Listener
	if pf, ok := f.(agtpPlaintextFamily); ok && pf.AGTPPlaintext() {
		if tc == nil {
			_ = ln.Close()
			return errors.New("refhost: agtp: a plaintext listener beside the TLS one was asked for, and the AGTP listener is plaintext already")
		}
		if plainAddr == "" {
			plainAddr = "127.0.0.1:0"
		}
		// Plaintext is for loopback peers only (the server refuses any
		// other); the listener is not offered anywhere else either.
		if host, _, err := net.SplitHostPort(plainAddr); err != nil || !wire.IsLoopback(host) {
			_ = ln.Close()
			return fmt.Errorf("refhost: agtp plaintext listener: %q is not a loopback host:port", plainAddr)
		}
		if pl, err = net.Listen("tcp", plainAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("refhost: agtp plaintext listener: %w", err)
		}
		h.AGTPPlaintextAddr, h.agtpPlLn = pl.Addr().String(), pl
	}
	h.AGTPAddr, h.agtpLn = ln.Addr().String(), ln
	for _, l := range []net.Listener{ln, pl} {
		if l == nil {
			continue
		}
		go func() {
			if err := f.ServeAGTP(l); err != nil && !errors.Is(err, wire.ErrServerClosed) {
				log.Error("agtp listener stopped", "addr", l.Addr().String(), "err", err)
			}
		}()
	}
	return nil
}

func (h *Host) closeFamilies() error {
	var errs []error
	for _, f := range h.families {
		errs = append(errs, f.Close())
	}
	h.families = nil
	return errors.Join(errs...)
}

// Crash stops the host abruptly, as a process killed at this point would
// stop: listeners closed at once, no request allowed to finish, the data
// directory left as it is. Whatever the host had made durable before it
// answered is there when it starts again on that directory.
func (h *Host) Crash() error {
	if h.srv != nil {
		_ = h.srv.Close()
	}
	if h.agtpLn != nil {
		_ = h.agtpLn.Close()
	}
	if h.agtpPlLn != nil {
		_ = h.agtpPlLn.Close()
	}
	return h.closeFamilies()
}

// Close stops serving, closes every family and removes a temporary data dir.
func (h *Host) Close() error {
	var errs []error
	if h.srv != nil {
		// Let in-flight requests finish, but do not wait out connections
		// that were opened and never used (Shutdown gives those 5 s).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := h.srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			_ = h.srv.Close()
		} else {
			errs = append(errs, err)
		}
		cancel()
	}
	if h.agtpLn != nil {
		_ = h.agtpLn.Close() // the family closes it too; this covers a Serve that had not begun
	}
	if h.agtpPlLn != nil {
		_ = h.agtpPlLn.Close()
	}
	errs = append(errs, h.closeFamilies())
	if h.tmpDir != "" {
		errs = append(errs, os.RemoveAll(h.tmpDir))
	}
	return errors.Join(errs...)
}
