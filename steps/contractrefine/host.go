// Package contractrefine binds the ContractRefine preflight features
// (features/contractrefine) to a host's wire: POST and GET /v1/preflight,
// POST /v1/tool, and the WAL read-back seam docs/host-interface.md describes.
package contractrefine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/peers/sink"
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
}

func configure(ctx context.Context, edit func(map[string]any)) error {
	return steps.From(ctx).Configure(family, edit)
}

func registerHost(c *steps.Catalog) {
	c.Given(`^a ContractRefine host whose runtime\.contract_refine\.mode is unset$`, func(ctx context.Context) error {
		return configure(ctx, func(m map[string]any) { delete(m, "mode") })
	})
	c.Given(`^a ContractRefine host whose runtime\.contract_refine\.mode is "([^"]*)"$`, func(ctx context.Context, mode string) error {
		return configure(ctx, func(m map[string]any) { m["mode"] = mode })
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode with no contract verifier wired$`, func(ctx context.Context, mode string) error {
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["verifier"] = map[string]any{"wired": false}
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode with no telemetry emitter wired$`, func(ctx context.Context, mode string) error {
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["emitter"] = "none"
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose WAL (emit|reads?) fails?$`, func(ctx context.Context, mode, what string) error {
		knob := "wal_emit"
		if strings.HasPrefix(what, "read") {
			knob = "wal_read"
		}
		// A fault is a seam: the host takes it only with seams on.
		if err := steps.From(ctx).RequireSeams(); err != nil {
			return err
		}
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["faults"] = map[string]any{knob: "fail"}
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose live lock fingerprint is "([^"]*)" and whose verifier was built with "([^"]*)"$`, func(ctx context.Context, mode, live, built string) error {
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["lock_fingerprint"] = live
			m["verifier"] = map[string]any{"lock_fingerprint": built}
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose policy bundle requires preflight for "([^"]*)"$`, func(ctx context.Context, mode, kind string) error {
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["policy"] = map[string]any{"requires_preflight": []string{kind}}
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode allowing at most (\d+) repair attempts$`, func(ctx context.Context, mode string, n int) error {
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["max_repair_attempts"] = n
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose preflight bindings last (\d+) seconds?$`, func(ctx context.Context, mode string, secs int) error {
		st(ctx).ttl = time.Duration(secs) * time.Second
		// A host with the clock seam lets the binding expire without real
		// waiting; one without is certified on real time.
		if err := steps.From(ctx).PreferSeams(); err != nil {
			return err
		}
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["eligibility_ttl"] = fmt.Sprintf("%ds", secs)
		})
	})
	c.Given(`^a ContractRefine host in "([^"]*)" mode whose verifier allows only the zones? "([^"]*)"$`, func(ctx context.Context, mode, csv string) error {
		var zones []any
		for _, z := range strings.Split(csv, ",") {
			zones = append(zones, strings.TrimSpace(z))
		}
		return configure(ctx, func(m map[string]any) {
			m["mode"] = mode
			m["verifier"] = map[string]any{"allowed_zones": zones}
		})
	})
	c.Given(`^the host serves this scenario alone$`, func(ctx context.Context) error {
		// A policy bundle ref no other scenario names makes a configuration
		// no other scenario shares: every target that starts hosts starts
		// this one for the scenario alone, and a url host, which runs one
		// configuration, blocks it. Only then does a frame the WAL gains
		// during a call belong to that call.
		st(ctx).alone = true
		return configure(ctx, func(m map[string]any) {
			m["policy_ref"] = "parley-solo-" + uuid.NewString() + "/1.0.0"
		})
	})
	c.Given(`^the WAL seam is enabled$`, func(ctx context.Context) error {
		return steps.From(ctx).RequireSeams()
	})
	c.Given(`^its tool\.deliver delivers to a destination the suite runs$`, func(ctx context.Context) error {
		// The destination is the suite's own: what arrives there (or does
		// not) is the witness of whether a tool ran, not the host's answer.
		if err := steps.From(ctx).CallsBack(); err != nil {
			return err
		}
		return configure(ctx, func(m map[string]any) {
			m["tools"] = map[string]any{"deliver_url": sink.Shared().URL()}
		})
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
		found := false
		for _, l := range lines {
			if strings.Contains(l, value) && strings.Contains(strings.ToLower(l), "warn") {
				found = true
				break
			}
		}
		return w.Assert(found, "no warning in the host's log names %q; the log has %d lines:\n%s", value, len(lines), strings.Join(tail(lines, 15), "\n"))
	})
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
