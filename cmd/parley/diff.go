package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/parley-conformance/parley/evidence"
)

func newDiffCmd() *cobra.Command {
	var key, oldKey, newKey, html string
	var allowRegistryChange bool
	c := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Say what changed between two bundles: regressions, newly passing, newly blocked",
		Long: `Diff verifies two bundles (signature and content) and lists the requirements
whose verdict changed from OLD to NEW, with the subject and seed of each run.
Bundles of different requirement registries are refused, unless
--allow-registry-change, which compares the ids present in both.

Each bundle is verified with --key, or --old-key/--new-key, or else with the
ephemeral.pub written beside it. Exit 0 when nothing regressed, 1 when
something did (or a bundle does not verify), 2 on a usage error.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pick := func(specific, bundle string) string {
				switch {
				case specific != "":
					return specific
				case key != "":
					return key
				}
				return filepath.Join(filepath.Dir(bundle), "ephemeral.pub")
			}
			old, err := verifySigned(args[0], pick(oldKey, args[0]))
			if err != nil {
				return err
			}
			nw, err := verifySigned(args[1], pick(newKey, args[1]))
			if err != nil {
				return err
			}
			d, err := evidence.Compare(*old, *nw, allowRegistryChange)
			if errors.Is(err, evidence.ErrRegistryChanged) {
				return usage("%v", err)
			}
			if err != nil {
				return withCode(exitIncomplete, err)
			}
			if err := d.WriteText(cmd.OutOrStdout()); err != nil {
				return withCode(exitIncomplete, err)
			}
			if html != "" {
				f, err := os.Create(html)
				if err != nil {
					return usage("--html: %v", err)
				}
				if err := evidence.RenderDiffHTML(f, d); err != nil {
					f.Close()
					return withCode(exitIncomplete, err)
				}
				if err := f.Close(); err != nil {
					return withCode(exitIncomplete, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", html)
			}
			if len(d.Regressed) > 0 {
				return withCode(exitFailed, fmt.Errorf("%d requirement(s) regressed", len(d.Regressed)))
			}
			return nil
		},
	}
	c.Flags().StringVar(&key, "key", "", "PEM public key `file` both bundles must be signed with")
	c.Flags().StringVar(&oldKey, "old-key", "", "PEM public key `file` OLD must be signed with")
	c.Flags().StringVar(&newKey, "new-key", "", "PEM public key `file` NEW must be signed with")
	c.Flags().StringVar(&html, "html", "", "also write the diff as an HTML page to this `file`")
	c.Flags().BoolVar(&allowRegistryChange, "allow-registry-change", false, "compare bundles of different registries on the ids present in both")
	return c
}

// verifySigned verifies a bundle's signature and content, whatever suite
// version produced it.
func verifySigned(bundlePath, keyPath string) (*evidence.Statement, error) {
	b, err := os.ReadFile(bundlePath)
	if err != nil {
		return nil, usage("%v", err)
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, usage("key for %s: %v (give --key, --old-key or --new-key)", bundlePath, err)
	}
	pub, err := evidence.ParsePublicKey(kb)
	if err != nil {
		return nil, usage("%s: %v", keyPath, err)
	}
	st, err := evidence.VerifySigned(b, pub)
	if err != nil {
		return nil, withCode(exitFailed, fmt.Errorf("%s does not verify: %w", bundlePath, err))
	}
	return st, nil
}
