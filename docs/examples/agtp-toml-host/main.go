// Command agtp-toml-host is an example of the kind of host the exec target
// certifies: an AGTP/1.0 server configured by a TOML file and PEM files,
// with no seams and no HTTP surface. It serves parley's reference AGTP host
// (refhost/agtp, whose TOML dialect docs/agtp-host.md describes) and prints
// the exec target's ready line, declaring the request body form -body-form
// names (the host reads both). With -plaintext-listen it serves a second,
// plaintext listener on loopback beside its TLS one (the ready line's
// agtp_plaintext); -unsupported names the optional fixture members it
// declares it does not serve (docs/hosts/agtp.md, "Fixtures"). Its adapter,
// which translates parley's spec-level configuration into this TOML, is
// docs/examples/agtp-exec-adapter.sh.
//
//	agtp-toml-host -config host.toml [-cert cert.pem -key key.pem [-plaintext-listen 127.0.0.1:0]] [-data DIR] [-listen 127.0.0.1:0] [-body-form envelope|flat] [-unsupported member,...]
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/parley-conformance/parley/refhost/agtp"
	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agtp-toml-host:", err)
		os.Exit(1)
	}
}

func run() error {
	config := flag.String("config", "", "the host's TOML configuration")
	cert := flag.String("cert", "", "PEM certificate (TLS 1.3); without it, plaintext on loopback only")
	key := flag.String("key", "", "PEM private key")
	data := flag.String("data", "", "durable state directory (default: a temporary one)")
	listen := flag.String("listen", "127.0.0.1:0", "AGTP listen address")
	bodyForm := flag.String("body-form", "envelope", "the request body form to declare in the ready line: envelope or flat (the host reads both)")
	plainListen := flag.String("plaintext-listen", "", "with -cert: also serve plaintext AGTP on this loopback address (for loopback peers only)")
	unsupported := flag.String("unsupported", "", "comma-separated optional fixture members to declare unsupported in the ready line")
	flag.Parse()
	if *plainListen != "" {
		host, _, err := net.SplitHostPort(*plainListen)
		if err != nil || !wire.IsLoopback(host) {
			return fmt.Errorf("-plaintext-listen %q: want a loopback host:port", *plainListen)
		}
		if *cert == "" {
			return fmt.Errorf("-plaintext-listen needs -cert: without TLS the one listener is plaintext already")
		}
	}
	if *bodyForm != "envelope" && *bodyForm != "flat" {
		return fmt.Errorf("-body-form %q: want envelope or flat", *bodyForm)
	}
	b, err := os.ReadFile(*config)
	if err != nil {
		return err
	}
	cfg, err := agtp.ParseTOML(b)
	if err != nil {
		return err
	}
	if *data == "" {
		if *data, err = os.MkdirTemp("", "agtp-toml-host-*"); err != nil {
			return err
		}
		defer os.RemoveAll(*data)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	h, err := agtp.Open(cfg, hostenv.Env{DataDir: *data, Logger: log})
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *cert != "" {
		kp, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13, NextProtos: []string{"agtp"}})
	}
	go func() { _ = h.ServeAGTP(ln) }()
	ready := map[string]any{"parley": "ready", "agtp": ln.Addr().String(), "agtp_body_form": *bodyForm}
	if *plainListen != "" {
		pl, err := net.Listen("tcp", *plainListen)
		if err != nil {
			return err
		}
		go func() { _ = h.ServeAGTP(pl) }()
		ready["agtp_plaintext"] = pl.Addr().String()
	}
	if *unsupported != "" {
		ready["unsupported"] = strings.Split(*unsupported, ",")
	}
	line, _ := json.Marshal(ready)
	fmt.Println(string(line))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
