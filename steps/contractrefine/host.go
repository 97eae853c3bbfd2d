// Package contractrefine binds the ContractRefine preflight features
// (features/contractrefine) to a host's wire: POST and GET /v1/preflight,
// POST /v1/tool, and the WAL read-back seam docs/host-interface.md describes.
package contractrefine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

const family = "contractrefine"

// Register binds every ContractRefine step phrase.
func Register(c *steps.Catalog) {
	registerHost(c)
	registerPreflight(c)
	registerWAL(c)
	registerTool(c)
	registerModel(c) // the decisions model, model.go
}

// section is the ContractRefine section of the fixture the scenario runs
// on. A Given step describes the host; on a fixture it checks that the
// fixture is the host it describes, so that the feature text stays the
// fixture's description.
func section(ctx context.Context) (map[string]any, string, error) {
	w := steps.From(ctx)
	f, ok := w.Fixture()
	if !ok {
		return nil, "", steps.Fault("the scenario describes a ContractRefine host but runs on no fixture (tag it @fixture:contractrefine-...)")
	}
	if f.Family != family {
		return nil, "", steps.Fault("the scenario describes a ContractRefine host but runs on fixture %s of family %s", f.Name, f.Family)
	}
	cfg, err := w.Config()
	if err != nil {
		return nil, "", err
	}
	var m map[string]any
	if err := json.Unmarshal(cfg.Section(family), &m); err != nil || m == nil {
		return nil, "", steps.Fault("fixture %s has no ContractRefine section", f.Name)
	}
	return m, f.Name, nil
}

// provides checks that the scenario's fixture has the value the feature
// text says its host has.
func provides(ctx context.Context, what string, ok func(m map[string]any) bool) error {
	m, name, err := section(ctx)
	if err != nil {
		return err
	}
	if !ok(m) {
		return steps.Fault("the scenario describes a host %s, and its fixture %s is not one (its contractrefine section: %s)", what, name, steps.Text(m))
	}
	return nil
}

func modeIs(mode string) func(map[string]any) bool {
	return func(m map[string]any) bool { v, set := m["mode"]; return set && v == mode }
}

func both(fs ...func(map[string]any) bool) func(map[string]any) bool {
	return func(m map[string]any) bool {
		for _, f := range fs {
			if !f(m) {
				return false
			}
		}
		return true
	}
}

func at(m map[string]any, path string) any { v, _ := steps.Lookup(m, path); return v }

// useAgent leases an agent from a tuned roster of the fixture: the
// scenario's requests and calls name it from then on.
func useAgent(ctx context.Context, roster string) error {
	s := st(ctx)
	if s.agent != "" {
		return steps.Fault("the scenario leases agent roster %q after it already acts as an agent", roster)
	}
	_, id, err := steps.From(ctx).Lease(roster)
	if err != nil {
		return err
	}
	s.agent = id
	return nil
}

func registerHost(c *steps.Catalog) {
	c.Given(`^a ContractRefine host whose runtime\.contract_refine\.mode is unset$`, func(ctx context.Context) error {
		return provides(ctx, "whose mode is unset", func(m map[string]any) bool { _, set := m["mode"]; return !set })
	})
	c.Given(`^a ContractRefine host whose runtime\.contract_refine\.mode is "([^"]*)"$`, func(ctx context.Context, mode string) error {
		return provides(ctx, "whose mode is "+strconv.Quote(mode), modeIs(mode))
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode with no contract verifier wired$`, func(ctx context.Context, mode string) error {
		return provides(ctx, "in "+mode+" mode with no verifier wired", both(modeIs(mode), func(m map[string]any) bool { return at(m, "verifier.wired") == false }))
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode with no telemetry emitter wired$`, func(ctx context.Context, mode string) error {
		return provides(ctx, "in "+mode+" mode with no emitter wired", both(modeIs(mode), func(m map[string]any) bool { return m["emitter"] == "none" }))
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose WAL (emit|reads?) fails? for the agent's decisions$`, func(ctx context.Context, mode, what string) error {
		roster := fixtures.CRAgentsWALEmitFail
		if strings.HasPrefix(what, "read") {
			roster = fixtures.CRAgentsWALReadFail
		}
		// A fault is a seam: the host takes it only with seams on.
		if err := steps.From(ctx).RequireSeams(); err != nil {
			return err
		}
		if err := provides(ctx, "in "+mode+" mode", modeIs(mode)); err != nil {
			return err
		}
		return useAgent(ctx, roster)
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose live lock fingerprint is "([^"]*)" and whose verifier was built with "([^"]*)"$`, func(ctx context.Context, mode, live, built string) error {
		return provides(ctx, fmt.Sprintf("in %s mode with live lock fingerprint %s and a verifier built with %s", mode, live, built), both(modeIs(mode), func(m map[string]any) bool {
			return m["lock_fingerprint"] == live && at(m, "verifier.lock_fingerprint") == built
		}))
	})
	c.Given(`^a ContractRefine host whose runtime\.contract_refine\.mode is unset and whose policy bundle requires preflight for "([^"]*)"$`, func(ctx context.Context, kind string) error {
		return provides(ctx, "whose mode is unset and whose bundle requires preflight for "+kind, func(m map[string]any) bool {
			_, set := m["mode"]
			l, _ := at(m, "policy.requires_preflight").([]any)
			return !set && slices.Contains(l, any(kind))
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose policy bundle requires preflight for "([^"]*)"$`, func(ctx context.Context, mode, kind string) error {
		return provides(ctx, "in "+mode+" mode whose bundle requires preflight for "+kind, both(modeIs(mode), func(m map[string]any) bool {
			l, _ := at(m, "policy.requires_preflight").([]any)
			return slices.Contains(l, any(kind))
		}))
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode allowing at most (\d+) repair attempts$`, func(ctx context.Context, mode string, n int) error {
		if err := provides(ctx, "in "+mode+" mode", modeIs(mode)); err != nil {
			return err
		}
		m, name, _ := section(ctx)
		if v, ok := m["max_repair_attempts"].(float64); ok && int(v) == n {
			return nil // the host-wide budget
		}
		// A budget other than the host-wide one is an agent's.
		roster := fmt.Sprintf("agents-repair-%d", n)
		if f, _ := steps.From(ctx).Fixture(); f.Rosters[roster] == 0 {
			return steps.Fault("the scenario describes a host allowing %d repair attempts, and fixture %s has neither that budget nor agents with it (roster %q)", n, name, roster)
		}
		return useAgent(ctx, roster)
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose preflight bindings last (\d+) seconds? for the agent$`, func(ctx context.Context, mode string, secs int) error {
		if err := provides(ctx, "in "+mode+" mode", modeIs(mode)); err != nil {
			return err
		}
		roster := fmt.Sprintf("agents-ttl-%ds", secs)
		if f, _ := steps.From(ctx).Fixture(); f.Rosters[roster] == 0 {
			return steps.Fault("the scenario describes a host whose bindings last %d s, and its fixture has no agents with that lifetime (roster %q)", secs, roster)
		}
		st(ctx).ttl = time.Duration(secs) * time.Second
		return useAgent(ctx, roster)
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose verifier allows only the zones? "([^"]*)"$`, func(ctx context.Context, mode, csv string) error {
		var zones []string
		for _, z := range strings.Split(csv, ",") {
			zones = append(zones, strings.TrimSpace(z))
		}
		return provides(ctx, "in "+mode+" mode whose verifier allows only "+csv, both(modeIs(mode), func(m map[string]any) bool {
			l, _ := at(m, "verifier.allowed_zones").([]any)
			if len(l) != len(zones) {
				return false
			}
			for _, z := range zones {
				if !slices.Contains(l, any(z)) {
					return false
				}
			}
			return true
		}))
	})
	c.Given(`^the WAL seam is enabled$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
	c.Given(`^its tool\.deliver delivers to a destination the suite runs$`, func(ctx context.Context) error {
		// The destination is the suite's own: what arrives there (or does
		// not) is the witness of whether a tool ran, not the host's answer.
		w := steps.From(ctx)
		if err := w.CallsBack(); err != nil {
			return err
		}
		m, name, err := section(ctx)
		if err != nil {
			return err
		}
		if u, _ := at(m, "tools.deliver_url").(string); u == "" {
			return steps.Fault("the scenario delivers to the suite's destination, and fixture %s configures no tools.deliver_url", name)
		}
		return openMailbox(ctx, name)
	})
	c.Then(`^the host's startup log has a warning that names "([^"]*)"$`, func(ctx context.Context, value string) error {
		w := steps.From(ctx)
		h, err := w.Host(ctx)
		if err != nil {
			return err
		}
		lines, ok := h.Logs()
		if !ok {
			return w.Block(verdict.CauseTarget, "the target cannot read the host's log (use the refhost or exec target)")
		}
		w.Observe(nil)
		warned := func(lines []string) bool {
			for _, l := range lines {
				if strings.Contains(l, value) && strings.Contains(strings.ToLower(l), "warn") {
					return true
				}
			}
			return false
		}
		// The log reaches the target as it reads the host's output (a
		// container's as the engine streams it), possibly after the host
		// was seen ready: read it until the warning is there or the log
		// stops growing. Each new line is progress (steps.Await).
		_ = steps.Await(ctx, steps.Poll{What: "the startup warning", Every: 20 * time.Millisecond, Rounds: 250}, func() (bool, string, error) {
			lines, _ = h.Logs()
			return warned(lines), strconv.Itoa(len(lines)), nil
		})
		return w.Assert(warned(lines), "no warning in the host's log names %q; the log has %d lines:\n%s", value, len(lines), strings.Join(tail(lines, 15), "\n"))
	})
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
