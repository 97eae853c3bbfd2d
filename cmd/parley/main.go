// Command parley runs the conformance suite against a host, verifies and
// renders evidence bundles, and runs the bundled reference host.
//
// Exit codes: 0 every scored requirement passed (or the command succeeded);
// 1 a requirement failed (or a bundle did not verify); 2 usage or
// configuration error; 3 the run could not complete.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parley-conformance/parley/suitebuild"
	"github.com/spf13/cobra"
)

// Exit codes, as docs and README state them.
const (
	exitOK         = 0
	exitFailed     = 1
	exitUsage      = 2
	exitIncomplete = 3
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usage(format string, a ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, a...)}
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code, err}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "parley",
		Short: "Conformance suite for runtime contract negotiation between agents and hosts",
		Long: `parley runs every normative requirement of AGTP RCNS, OpenWOP RFC 0242,
ContractRefine preflight and AGL behavioral contracts against a host, and
writes a signed evidence bundle that says, requirement by requirement, what
the host did.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usage("%v (see `%s --help`)", err, c.CommandPath())
	})
	// --version and `parley version` print the build: the module version,
	// the commit and the dirty flag the toolchain stamped (suitebuild). The
	// template is rendered only when asked, so no other command pays for
	// reading the checkout.
	root.Version = "from build info"
	cobra.AddTemplateFunc("parleyBuild", func() string { return suitebuild.Read().String() })
	root.SetVersionTemplate("{{parleyBuild}}")
	root.InitDefaultVersionFlag()
	root.Flags().Lookup("version").Usage = "print the module version, commit and dirty flag of this build"
	root.AddCommand(newVersionCmd())
	root.AddCommand(newRunCmd(), newVerifyCmd(), newDiffCmd(), newKeygenCmd(), newRequirementsCmd(), newRefhostCmd(), newReportCmd(), newFixturesCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, commit and dirty flag of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), suitebuild.Read().String())
			return err
		},
	}
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int { return executeTo(args, os.Stderr) }

// executeTo runs the command line, writing the error that ends it to stderr.
func executeTo(args []string, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "parley:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Cobra's own errors (unknown command, bad arguments) are usage errors.
	return exitUsage
}
