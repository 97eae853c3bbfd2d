package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
)

func loadSuite() (*scenarios.Registry, *scenarios.Corpus, error) {
	reg, corpus, err := scenarios.Load()
	if err != nil {
		return nil, nil, withCode(exitIncomplete, err)
	}
	return reg, corpus, nil
}

func verifyBundle(bundlePath, keyPath string) (*evidence.Statement, error) {
	return verifyBundleOf(bundlePath, keyPath, "")
}

// verifyBundleOf verifies a bundle and, when subject is given
// (NAME=sha256:HEX), that it is about that build.
func verifyBundleOf(bundlePath, keyPath, subject string) (*evidence.Statement, error) {
	var want target.Subject
	if subject != "" {
		s, err := parseSubject(subject)
		if err != nil {
			return nil, err
		}
		want = s
	}
	if keyPath == "" {
		return nil, usage("--key is required: the public key the bundle must be signed with (an ephemeral run writes ephemeral.pub beside the bundle)")
	}
	b, err := os.ReadFile(bundlePath)
	if err != nil {
		return nil, usage("%v", err)
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, usage("--key: %v", err)
	}
	pub, err := evidence.ParsePublicKey(kb)
	if err != nil {
		return nil, usage("--key %s: %v", keyPath, err)
	}
	reg, corpus, err := loadSuite()
	if err != nil {
		return nil, err
	}
	st, err := evidence.Verify(b, pub, reg, corpus)
	if err != nil {
		return nil, withCode(exitFailed, fmt.Errorf("%s does not verify: %w", bundlePath, err))
	}
	if subject != "" {
		got := st.Subject[0]
		if got.Name != want.Name || got.Digest["sha256"] != want.Digest["sha256"] {
			return nil, withCode(exitFailed, fmt.Errorf("%s is signed and intact, but it is about %s %s, not the build you named (%s)", bundlePath, got.Name, orUndeclared(digestList(got.Digest)), subject))
		}
	}
	return st, nil
}

func newVerifyCmd() *cobra.Command {
	var key, subject string
	c := &cobra.Command{
		Use:   "verify BUNDLE --key PUBLIC_KEY [--subject NAME=sha256:HEX]",
		Short: "Verify an evidence bundle offline: signature, totals, ids, corpus",
		Long: `Verify checks that BUNDLE is signed by PUBLIC_KEY, that no byte changed
since, that its totals add up, that it claims no vacuous pass, that every
requirement id is this suite's and appears once, and that it was produced
from this suite's feature corpus and registry. With --subject it also checks
that the bundle is about that host build. Exit 0 when all hold, 1 when one
does not (the message says which), 2 on a usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := verifyBundleOf(args[0], key, subject)
			if err != nil {
				return err
			}
			p := st.Predicate
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: verified\n", filepath.Base(args[0]))
			fmt.Fprintf(out, "  subject   %s %s\n", st.Subject[0].Name, orUndeclared(digestList(st.Subject[0].Digest)))
			fmt.Fprintf(out, "  signed by %s%s\n", p.Signing.KeyID, map[bool]string{true: " (ephemeral key)", false: ""}[p.Signing.Ephemeral])
			fmt.Fprintf(out, "  totals    %d requirements: %d executed-pass, %d executed-fail, %d blocked, %d skipped, %d inapplicable\n",
				p.Totals.Requirements, p.Totals.ExecutedPass, p.Totals.ExecutedFail, p.Totals.Blocked, p.Totals.Skipped, p.Totals.Inapplicable)
			fmt.Fprintf(out, "  profiles certified: %s\n", orNone(p.ProfilesCertified))
			return nil
		},
	}
	c.Flags().StringVar(&key, "key", "", "PEM public key `file` the bundle must be signed with")
	c.Flags().StringVar(&subject, "subject", "", "the host build the bundle must be about, as `NAME=sha256:HEX`")
	return c
}

func orUndeclared(s string) string {
	if s == "" {
		return "(no digest: the subject is undeclared)"
	}
	return s
}

func digestList(d map[string]string) string {
	var parts []string
	for k, v := range d {
		parts = append(parts, k+":"+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func newKeygenCmd() *cobra.Command {
	var out, name string
	c := &cobra.Command{
		Use:   "keygen",
		Short: "Write an ed25519 key pair for signing bundles",
		Long:  "Keygen writes NAME.key (PKCS #8 PEM, mode 0600) and NAME.pub (PKIX PEM) into --out. It never overwrites a file.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pub, priv, err := evidence.GenerateKey()
			if err != nil {
				return withCode(exitIncomplete, err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usage("--out: %v", err)
			}
			privPath, pubPath := filepath.Join(out, name+".key"), filepath.Join(out, name+".pub")
			if err := evidence.WriteKeyPair(privPath, pubPath, pub, priv); err != nil {
				return usage("%v (keygen never overwrites a key)", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (private, 0600) and %s\nkey id %s\n", privPath, pubPath, evidence.KeyID(pub))
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", ".", "`dir`ectory to write the key pair into")
	c.Flags().StringVar(&name, "name", "parley", "file name `stem`")
	return c
}

func newRequirementsCmd() *cobra.Command {
	var family string
	var asJSON bool
	c := &cobra.Command{
		Use:   "requirements",
		Short: "List the requirement registry: ids, levels, profiles, bases, witnesses",
		Long: `Requirements lists every requirement id with its level, profile, basis,
witness class, scenario count and spec section. The basis says where the
rule comes from: text (the specification says it), interpretation (a
reading of the text recorded in docs/interpretations.md that accepts every
reading the text allows), or binding (a choice the text leaves open, made
by parley; such ids are in the <family>-parley-binding profiles, so a host
can certify the spec profiles without them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, corpus, err := loadSuite()
			if err != nil {
				return err
			}
			count := map[string]int{}
			for _, s := range corpus.Scenarios {
				for _, id := range s.ReqIDs {
					count[id]++
				}
			}
			var list []scenarios.Entry
			for _, e := range reg.Entries {
				if family == "" || e.Family == family {
					list = append(list, e)
				}
			}
			if len(list) == 0 {
				return usage("no requirement in family %q (families: %s)", family, strings.Join(reg.Families(), ", "))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tLEVEL\tPROFILE\tBASIS\tWITNESS\tSCENARIOS\tSECTION")
			for _, e := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.Level, e.Profile, e.Basis, e.Witness, count[e.ID], e.Section)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), requirementsFooter(list, count))
			return err
		},
	}
	c.Flags().StringVar(&family, "family", "", "only this `family` (agtp, openwop, contractrefine, agl)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newReportCmd() *cobra.Command {
	var key, out string
	c := &cobra.Command{
		Use:   "report BUNDLE --key PUBLIC_KEY",
		Short: "Verify a bundle and render it as an HTML report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := verifyBundle(args[0], key)
			if err != nil {
				return err
			}
			reg, _, err := loadSuite()
			if err != nil {
				return err
			}
			f, err := os.Create(out)
			if err != nil {
				return usage("--out: %v", err)
			}
			if err := evidence.RenderHTML(f, *st, reg, "verified with key "+st.Predicate.Signing.KeyID); err != nil {
				f.Close()
				return withCode(exitIncomplete, err)
			}
			if err := f.Close(); err != nil {
				return withCode(exitIncomplete, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	c.Flags().StringVar(&key, "key", "", "PEM public key `file` the bundle must be signed with")
	c.Flags().StringVar(&out, "out", "report.html", "`file` to write the report to")
	return c
}

// requirementsFooter says why a run reports fewer ids than the list holds:
// a run's rows are the requirements its scenarios witness, and the ids no
// scenario witnesses (retired tombstones, unwitnessable rules) are not among
// them.
func requirementsFooter(list []scenarios.Entry, count map[string]int) string {
	var retired, unwitnessable, other int
	for _, e := range list {
		switch {
		case count[e.ID] > 0:
		case e.Status == scenarios.StatusRetired:
			retired++
		case e.Witness == scenarios.WitnessUnwitnessable:
			unwitnessable++
		default:
			other++
		}
	}
	reported := len(list) - retired - unwitnessable - other
	var why []string
	if retired > 0 {
		why = append(why, fmt.Sprintf("%d retired (tombstones kept so that an id is never reused)", retired))
	}
	if unwitnessable > 0 {
		why = append(why, fmt.Sprintf("%d unwitnessable (nothing on the wire shows them; a report lists them apart, with why)", unwitnessable))
	}
	if other > 0 {
		why = append(why, fmt.Sprintf("%d with no scenario", other))
	}
	msg := fmt.Sprintf("\n%d ids listed; a run of them all reports %d requirements", len(list), reported)
	if len(why) > 0 {
		msg += ", the ones scenarios witness; not reported: " + strings.Join(why, ", ")
	}
	return msg + ". A run certifying some profiles reports the others' requirements as skipped.\n"
}
