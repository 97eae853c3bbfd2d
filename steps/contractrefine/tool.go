package contractrefine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/steps"
)

// preflightHeader binds a /v1/tool call to a prior preflight.
const preflightHeader = "X-Autonomy-Preflight-Id"

// deliverSettle is how long the suite waits, after a refused call, for a
// delivery the host might still make: an effect that follows the refusal
// is an effect all the same.
const deliverSettle = 200 * time.Millisecond

// toolCall is one /v1/tool call the scenario made.
type toolCall struct {
	kind   string
	marker string // params.text: unique to this call
	resp   *steps.Response
	// decisionsBefore counts the autonomy.decision frames of this kind the
	// WAL held just before the call (seams only; -1 when not read).
	decisionsBefore int
}

// callTool posts a tool call whose params carry a marker unique to the call,
// so that whether the tool ran is visible where its effect lands.
func callTool(ctx context.Context, kind, preflightID string) error {
	w, s := steps.From(ctx), st(ctx)
	h := http.Header{}
	if preflightID != "" {
		h.Set(preflightHeader, preflightID)
	}
	agent, err := agentID(ctx)
	if err != nil {
		return err
	}
	s.calls++
	call := toolCall{kind: kind, marker: fmt.Sprintf("%s-call-%d", s.text, s.calls), decisionsBefore: -1}
	if host, err := w.Host(ctx); err != nil {
		return err
	} else if host.Config.Seams() {
		fs, err := frames(ctx, "autonomy.decision", mine(kind, agent))
		if err != nil {
			return err
		}
		call.decisionsBefore = len(fs)
	}
	params := map[string]any{"text": call.marker}
	if s.box != nil {
		params["mailbox"] = s.box.id
	}
	body := map[string]any{
		"kind":   kind,
		"params": params,
		"actor":  map[string]any{"agent_id": agent},
	}
	r, err := w.DoJSON(ctx, http.MethodPost, "/v1/tool", body, h)
	if err != nil {
		return err
	}
	call.resp = r
	s.tool = call
	s.toolCalls = append(s.toolCalls, call)
	return nil
}

func (s *state) lastCall() (toolCall, error) {
	if s.tool.resp == nil {
		return toolCall{}, steps.Fault("a step checks a tool call before any was made")
	}
	return s.tool, nil
}

// mine filters the autonomy.decision frames of the scenario's own calls of
// kind: those naming its agent.
func mine(kind, agent string) map[string]string {
	return map[string]string{"tool_kind": kind, "actor_agent_id": agent}
}

// deliveries reads what the scenario's mailbox received for the call.
func deliveries(w *steps.World, s *state, call toolCall) ([]delivery, error) {
	if call.kind != "tool.deliver" {
		return nil, steps.Fault("whether %s ran is not visible outside the host; the scenario calls tool.deliver to witness it", call.kind)
	}
	if s.box == nil {
		return nil, steps.Fault("the scenario checks a delivery without a destination (a Given step leases one)")
	}
	fakes, err := w.Fakes()
	if err != nil {
		return nil, err
	}
	if err := strays(fakes, s.fixture); err != nil {
		return nil, err
	}
	got, err := s.box.carrying(call.marker)
	if err != nil {
		return nil, err
	}
	w.Observe(nil)
	return got, nil
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
	// The mode a host resolved, seen where advisory and enforce differ on
	// /v1/tool: enforce refuses both a failed binding and a call missing a
	// preflight its bundle requires, advisory refuses neither (contractrefine-
	// preflight.txt, "Mode ladder"). A host showing either mark is in that
	// mode; the other call is another id's rule (advisory-continues-to-policy,
	// enforce-mismatch-denied, enforce-policy-requires-preflight), so one
	// broken behaviour of a mode does not read as another mode.
	c.Then(`^the calls show the "(advisory|enforce)" mode: (?:at least one is let through|at least one is refused)$`, func(ctx context.Context, mode string) error {
		w, s := steps.From(ctx), st(ctx)
		if len(s.toolCalls) < 2 {
			return steps.Fault("the scenario tells advisory from enforce by two calls enforce refuses, and made %d", len(s.toolCalls))
		}
		var through, refused int
		var seen []string
		for _, c := range s.toolCalls {
			seen = append(seen, fmt.Sprintf("%s: %d", c.kind, c.resp.Status))
			switch {
			case c.resp.Status == http.StatusOK:
				through++
			case c.resp.Status == http.StatusForbidden:
				refused++
			}
		}
		if mode == "advisory" {
			return w.Assert(through > 0, "every call enforce refuses was refused, as in enforce mode, not advisory: %v", seen)
		}
		return w.Assert(refused > 0, "no call enforce refuses was refused, as in advisory mode, not enforce: %v", seen)
	})
	c.Then(`^the tool did not run$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		call, err := s.lastCall()
		if err != nil {
			return err
		}
		time.Sleep(deliverSettle)
		got, err := deliveries(w, s, call)
		if err != nil {
			return err
		}
		var first []byte
		if len(got) > 0 {
			first = got[0].body
		}
		return w.Assert(len(got) == 0, "the host answered %d, yet the tool ran: the destination received %d delivery(ies) of the call's params, the first %s", call.resp.Status, len(got), first)
	}).Waits(deliverSettle)
	c.Then(`^the tool ran with the plan's params$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		call, err := s.lastCall()
		if err != nil {
			return err
		}
		if call.kind == "tool.echo" {
			// tool.echo's effect is its answer: the params it was given.
			return w.Assert(bytes.Contains(call.resp.Body, []byte(call.marker)), "tool.echo did not echo %q: %s", call.marker, call.resp)
		}
		got, err := deliveries(w, s, call)
		if err != nil {
			return err
		}
		if err := w.Assert(len(got) == 1, "the destination received %d deliveries of the call's params, want exactly one (the host: %s)", len(got), call.resp); err != nil {
			return err
		}
		var params map[string]any
		_ = json.Unmarshal(got[0].body, &params)
		return w.Assert(params["text"] == call.marker, "the delivery does not carry the call's params: %s", got[0].body)
	})
	c.Then(`^no WAL frame refers to that preflight id$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		call, err := s.lastCall()
		if err != nil {
			return err
		}
		if s.unknownID == "" || call.decisionsBefore < 0 {
			return steps.Fault("the scenario presents no unknown preflight id to a host with its WAL seam")
		}
		// The control: the WAL read shows the host's own record of this call
		// (an autonomy.decision frame of its kind written since the call
		// began), so an empty or stale read cannot pass for "no frame".
		own, err := frames(ctx, "autonomy.decision", mine(call.kind, s.agent))
		if err != nil {
			return err
		}
		if err := w.Assert(len(own) > call.decisionsBefore, "the WAL shows no autonomy.decision frame for the %s call (%d before it, %d after), so it cannot show that no frame refers to the header's id", call.kind, call.decisionsBefore, len(own)); err != nil {
			return err
		}
		all, err := frames(ctx, "", nil)
		if err != nil {
			return err
		}
		var refs [][]byte
		for _, f := range all {
			if bytes.Contains(f.raw, []byte(s.unknownID)) {
				refs = append(refs, f.raw)
			}
		}
		var first []byte
		if len(refs) > 0 {
			first = refs[0]
		}
		return w.Assert(len(refs) == 0, "the header was not ignored: %d frame(s) refer to the preflight id it named, the first %s", len(refs), first)
	})
	c.Then(`^the WAL holds a deny autonomy\.decision frame for that call$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		call, err := s.lastCall()
		if err != nil {
			return err
		}
		if call.decisionsBefore < 0 {
			return steps.Fault("the scenario attributes new WAL frames to a call without the WAL seam")
		}
		// The scenario's agent is its own and its calls are made one after
		// another, so the autonomy.decision frames of the call's kind and
		// agent that the WAL gained since the call began are the call's own.
		fs, err := frames(ctx, "autonomy.decision", mine(call.kind, s.agent))
		if err != nil {
			return err
		}
		var outcomes []string
		if len(fs) > call.decisionsBefore {
			for _, f := range fs[call.decisionsBefore:] {
				o, _ := f.attr("outcome")
				outcomes = append(outcomes, o)
			}
		}
		return w.Assert(slices.Contains(outcomes, "deny"), "the %s call (answered %d) left no autonomy.decision frame with outcome deny: the WAL gained %d frame(s) of its kind during the call, with outcomes %v", call.kind, call.resp.Status, len(outcomes), outcomes)
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
		found := false
		for _, f := range fs {
			if got, _ := f.attr("outcome"); outcome == "" || got == outcome {
				found = true
			}
		}
		want := "an autonomy.decision frame"
		if outcome != "" {
			want += " with outcome " + outcome
		}
		return w.Assert(audit != "" && found, "expected %s carrying audit_id %q; found %d autonomy.decision frame(s) with it", want, audit, len(fs))
	})
}
