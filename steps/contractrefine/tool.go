package contractrefine

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
)

// preflightHeader binds a /v1/tool call to a prior preflight.
const preflightHeader = "X-Autonomy-Preflight-Id"

// callTool posts a tool call whose params carry the scenario's unique text,
// so that whether the tool ran is visible in what came back.
func callTool(ctx context.Context, kind, preflightID string) error {
	w, s := steps.From(ctx), st(ctx)
	h := http.Header{}
	if preflightID != "" {
		h.Set(preflightHeader, preflightID)
	}
	body := map[string]any{
		"kind":   kind,
		"params": map[string]any{"text": s.text},
		"actor":  map[string]any{"agent_id": "parley-agent"},
	}
	_, err := w.DoJSON(ctx, http.MethodPost, "/v1/tool", body, h)
	return err
}

func registerTool(c *steps.Catalog) {
	c.When(`^the agent calls tool "([^"]*)" bound to that preflight$`, func(ctx context.Context, kind string) error {
		d, err := st(ctx).last()
		if err != nil {
			return err
		}
		return callTool(ctx, kind, d.str("preflight_id"))
	})
	c.When(`^the agent calls tool "([^"]*)" bound to an unknown preflight id$`, func(ctx context.Context, kind string) error {
		s := st(ctx)
		s.unknownID = uuid.NewString()
		return callTool(ctx, kind, s.unknownID)
	})
	c.When(`^the agent calls tool "([^"]*)" without a preflight id$`, func(ctx context.Context, kind string) error {
		return callTool(ctx, kind, "")
	})
	c.Then(`^the tool did not run$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		return w.Assert(!strings.Contains(string(r.Body), s.text), "the denied call still echoed its params: %s", r)
	})
	c.Then(`^the tool ran with the plan's params$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		return w.Assert(strings.Contains(string(r.Body), s.text), "tool.echo did not echo %q: %s", s.text, r)
	})
	c.Then(`^no WAL frame refers to that preflight id$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if s.unknownID == "" {
			return steps.Fault("no unknown preflight id was presented")
		}
		fs, err := frames(ctx, "", nil)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if strings.Contains(string(f.raw), s.unknownID) {
				return w.Assert(false, "the header was not ignored: a %s frame refers to it: %s", f.Kind, f.raw)
			}
		}
		return w.Assert(true, "")
	})
	c.Then(`^the WAL holds an autonomy\.decision frame (?:with outcome "([^"]*)" )?carrying that preflight's audit_id$`, func(ctx context.Context, outcome string) error {
		w := steps.From(ctx)
		d, err := st(ctx).last()
		if err != nil {
			return err
		}
		audit := d.str("audit_id")
		fs, err := frames(ctx, "autonomy.decision", map[string]string{"audit_id": audit})
		if err != nil {
			return err
		}
		for _, f := range fs {
			if got, _ := f.attr("outcome"); outcome == "" || got == outcome {
				return w.Assert(true, "")
			}
		}
		want := "an autonomy.decision frame"
		if outcome != "" {
			want += " with outcome " + outcome
		}
		return w.Assert(false, "expected %s carrying audit_id %s; found %d autonomy.decision frame(s) with it", want, audit, len(fs))
	})
}
