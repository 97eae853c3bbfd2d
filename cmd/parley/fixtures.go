package main

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/scenarios"
)

func newFixturesCmd() *cobra.Command {
	var out, fakes string
	c := &cobra.Command{
		Use:   "fixtures --out DIR",
		Short: "Write the published fixtures, to deploy one host per fixture before a run",
		Long: `Fixtures writes every fixture the suite's scenarios run on into DIR:
DIR/<name>.json (the host configuration, schemas/host-config.json),
DIR/fixtures.json (the manifest: name, family, config file, purpose, the
requirement ids whose scenarios take the host alone, rosters, optional
members), and the TLS material the suite issued (the hosts serve its leaf;
the run trusts its CA).

Deploy one host per fixture, write HOSTS.json mapping each fixture name to
the ready line of its host, and run
  parley run --target url --fixtures DIR --hosts HOSTS.json
Fixtures that name the suite's fakes name --fakes ADDR (default
127.0.0.1:47900): a run against the set serves its fakes there, and the
hosts must be able to reach it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			if out == "" {
				return usage("fixtures needs --out DIR")
			}
			_, corpus, err := scenarios.Load()
			if err != nil {
				return withCode(exitIncomplete, err)
			}
			env, err := fixtures.NewEnv(fakes)
			if err != nil {
				return withCode(exitIncomplete, err)
			}
			m, err := fixtures.Write(out, fixtures.NewSet(env), exclusiveIDs(corpus))
			if err != nil {
				return usage("%v", err)
			}
			w := cmd.OutOrStdout()
			for _, e := range m.Fixtures {
				fmt.Fprintf(w, "%-34s %s\n", e.Name, e.Purpose)
			}
			fmt.Fprintf(w, "wrote %d fixtures to %s (manifest %s); fakes at %s\n", len(m.Fixtures), out, filepath.Join(out, fixtures.ManifestFile), m.Fakes)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write the fixtures into")
	c.Flags().StringVar(&fakes, "fakes", "127.0.0.1:47900", "host:port a run serves the suite's fakes at, as the hosts reach it")
	return c
}

// exclusiveIDs maps each fixture to the requirement ids of its scenarios
// that take the host alone.
func exclusiveIDs(c *scenarios.Corpus) map[string][]string {
	seen := map[string]map[string]bool{}
	for _, s := range c.Scenarios {
		if !s.Exclusive || s.Fixture == "" {
			continue
		}
		if seen[s.Fixture] == nil {
			seen[s.Fixture] = map[string]bool{}
		}
		for _, id := range s.ReqIDs {
			seen[s.Fixture][id] = true
		}
	}
	out := map[string][]string{}
	for f, ids := range seen {
		for id := range ids {
			out[f] = append(out[f], id)
		}
		sort.Strings(out[f])
	}
	return out
}
