package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/parley-conformance/parley/refhost"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/target"
)

func newRefhostCmd() *cobra.Command {
	var data, listen, agtpListen, bodyForm string
	c := &cobra.Command{
		Use:   "refhost CONFIG.json",
		Short: "Run the bundled reference host with a configuration document",
		Long: `Refhost serves the reference host configured by CONFIG.json (see
schemas/host-config.json) until interrupted. When it serves it prints one
line on stdout, {"parley":"ready","http":"http://…","agtp":"127.0.0.1:…",
"subject":{"name":"parley-refhost","digest":{"sha256":"…"}}} ("agtp" only
when the configuration has an agtp section, and "agtp_plaintext", a second,
plaintext AGTP listener on loopback, when that section serves TLS and sets
plaintext_listener; the subject is this binary):
the exec target's
adapter contract, so 'parley run --target exec --exec "parley refhost"'
certifies the reference host as an external host would be. Every flag may
come from the environment as PARLEY_<FLAG> (PARLEY_LISTEN, PARLEY_AGTP_LISTEN,
PARLEY_DATA); a flag on the command line wins.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			if _, err := target.CheckBodyForm(bodyForm); err != nil {
				return usage("--agtp-body-form: %v", err)
			}
			b, err := os.ReadFile(args[0])
			if err != nil {
				return usage("%v", err)
			}
			cfg, err := target.ParseConfig(b)
			if err != nil {
				return usage("%s: %v", args[0], err)
			}
			if err := schemas.ValidateJSON("host-config.json", cfg.JSON()); err != nil {
				return usage("%s does not satisfy schemas/host-config.json: %v", args[0], err)
			}
			// Listen for SIGTERM before starting: a stop that comes while
			// the host starts (a run cancelled then) must still close it
			// and remove the state it made, and one that comes right after
			// the ready line must close it cleanly.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			h, err := refhost.Start(refhost.Options{
				Config:     b,
				DataDir:    data,
				Listen:     listen,
				AGTPListen: agtpListen,
				Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
			})
			if err != nil {
				return usage("%v", err)
			}
			line := target.ReadyLine{Parley: "ready", HTTP: h.URL, AGTP: h.AGTPAddr, AGTPPlaintext: h.AGTPPlaintextAddr, AGTPBodyForm: bodyForm, Fixture: cfg.Fixture()}
			// The reference host is built into this binary: its digest
			// names the build that serves.
			if s := target.NewRefhost().Subject(); s.Declared() {
				line.Subject = &target.ReadySubject{Name: s.Name, Digest: map[string]string{"sha256": s.Digest["sha256"]}}
			}
			select {
			case <-sig:
				// Stopped while starting: no ready line.
				return h.Close()
			default:
			}
			ready, _ := json.Marshal(line)
			fmt.Fprintln(cmd.OutOrStdout(), string(ready))
			<-sig
			return h.Close()
		},
	}
	c.Flags().StringVar(&data, "data", "", "directory for durable state (default: a temporary directory removed at exit)")
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "HTTP listen address")
	c.Flags().StringVar(&bodyForm, "agtp-body-form", "", "the AGTP request body form to declare in the ready line, envelope or flat (the reference host reads both)")
	c.Flags().StringVar(&agtpListen, "agtp-listen", "127.0.0.1:0", "AGTP/1.0 listen address (used when the configuration has an agtp section; plaintext is served only to loopback peers)")
	return c
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
