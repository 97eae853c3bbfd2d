package contractrefine

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/parley-conformance/parley/steps"
)

// seamPrefix is where a ContractRefine host serves its seams.
const seamPrefix = "/conformance/seams/contractrefine/"

// walSeam is the read-back seam a host exposes when started with seams on
// (docs/host-interface.md): frames in file order, filtered by kind and by
// attribute values.
const walSeam = seamPrefix + "wal"

type frame struct {
	Kind  string                     `json:"kind"`
	Attrs map[string]json.RawMessage `json:"attrs"`
	raw   []byte
}

func (f frame) attr(name string) (string, bool) {
	raw, ok := f.Attrs[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}

// frames reads WAL frames through the seam. The read is itself an exchange
// with the host, under the same deadline and size limit, but it is not
// recorded as the scenario's last response.
func frames(ctx context.Context, kind string, attrs map[string]string) ([]frame, error) {
	w := steps.From(ctx)
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	for k, v := range attrs {
		q.Set("attr."+k, v)
	}
	r, err := w.Seam(ctx, http.MethodGet, walSeam+"?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, steps.Fail("the WAL seam answered %d: %s", r.Status, r)
	}
	var body struct {
		Frames []json.RawMessage `json:"frames"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Frames == nil {
		return nil, steps.Fail("the WAL seam's answer is not {\"frames\": [...]} (%v): %s", err, r)
	}
	out := make([]frame, 0, len(body.Frames))
	for _, raw := range body.Frames {
		var f frame
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, steps.Fail("a WAL frame is not an object with kind and attrs (%v): %s", err, raw)
		}
		f.raw = raw
		// The seam filters, but the suite does not take the host's word for
		// it: a frame counts only if it carries what was asked for.
		if matches(f, kind, attrs) {
			out = append(out, f)
		}
	}
	return out, nil
}

func matches(f frame, kind string, attrs map[string]string) bool {
	if kind != "" && f.Kind != kind {
		return false
	}
	for k, want := range attrs {
		if got, ok := f.attr(k); !ok || got != want {
			return false
		}
	}
	return true
}

// preflightFrame returns the one autonomy.preflight frame of the last decision.
func preflightFrame(ctx context.Context) (frame, decision, error) {
	w := steps.From(ctx)
	d, err := st(ctx).last()
	if err != nil {
		return frame{}, d, err
	}
	fs, err := frames(ctx, "autonomy.preflight", map[string]string{"preflight_id": d.str("preflight_id")})
	if err != nil {
		return frame{}, d, err
	}
	if err := w.Assert(len(fs) >= 1, "no autonomy.preflight frame has preflight_id %s", d.str("preflight_id")); err != nil {
		return frame{}, d, err
	}
	return fs[0], d, nil
}

// The registry's preconditions of the audit query's order: the frames
// whose order is checked must be there to be ordered.
const (
	agentFramesPrecondition = "contractrefine.precondition.agent-frames"
	auditJoinPrecondition   = "contractrefine.precondition.audit-join"
)

func registerWAL(c *steps.Catalog) {
	c.Then(`^the WAL holds exactly one autonomy\.preflight frame for that preflight$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		d, err := st(ctx).last()
		if err != nil {
			return err
		}
		fs, err := frames(ctx, "autonomy.preflight", map[string]string{"preflight_id": d.str("preflight_id")})
		if err != nil {
			return err
		}
		return w.Assert(len(fs) == 1, "expected exactly one autonomy.preflight frame for %s, found %d", d.str("preflight_id"), len(fs))
	})
	c.Then(`^every decision so far has exactly one autonomy\.preflight frame in the WAL$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if err := s.allDecided(); err != nil {
			return err
		}
		for _, d := range s.decisions {
			id := d.str("preflight_id")
			fs, err := frames(ctx, "autonomy.preflight", map[string]string{"preflight_id": id})
			if err != nil {
				return err
			}
			if err := w.Assert(len(fs) == 1, "decision %s (outcome %q)%s has %d autonomy.preflight frames in the WAL, want exactly one", id, d.str("outcome"), s.since(), len(fs)); err != nil {
				return err
			}
			dj, _ := fs[0].attr("decision_json")
			if err := w.Assert(steps.JSONEqual([]byte(dj), d.raw), "the frame of decision %s%s does not hold the decision POST answered:\nframe: %s\nPOST:  %s", id, s.since(), dj, d.raw); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the audit query for the agent's autonomy\.preflight frames lists its decisions in the order they were answered$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if err := s.allDecided(); err != nil {
			return err
		}
		if len(s.decisions) < 3 {
			return steps.Fault("the scenario checks the order of %d decision(s); it needs at least three", len(s.decisions))
		}
		// The scenario's agent is its own, so the frames it names are the
		// scenario's decisions and no other scenario's.
		fs, err := frames(ctx, "autonomy.preflight", map[string]string{"actor_agent_id": s.agent})
		if err != nil {
			return err
		}
		at := map[string]int{}
		var read []string
		for i, f := range fs {
			id, _ := f.attr("preflight_id")
			read = append(read, id)
			if _, dup := at[id]; !dup {
				at[id] = i
			}
		}
		var answered []string
		for _, d := range s.decisions {
			answered = append(answered, d.str("preflight_id"))
		}
		prev := -1
		for i, id := range answered {
			pos, ok := at[id]
			if !ok {
				// A frame that is missing, or does not name its agent, is
				// the frame rules' failure, not the order's.
				return steps.Precondition(agentFramesPrecondition,
					steps.Fail("the audit query for agent %s does not list decision %d of %d (%s): it lists %v", s.agent, i+1, len(answered), id, read))
			}
			if err := w.Assert(pos > prev, "the audit query for agent %s lists the decisions out of the order they were answered:\nanswered: %v\nlisted:   %v", s.agent, answered, read); err != nil {
				return err
			}
			prev = pos
		}
		return nil
	})
	c.Then(`^the audit query for that preflight's audit_id lists its autonomy\.preflight frame before the call's autonomy\.decision frame$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		d, err := s.last()
		if err != nil {
			return err
		}
		if _, err := s.lastCall(); err != nil {
			return err
		}
		audit, id := d.str("audit_id"), d.str("preflight_id")
		fs, err := frames(ctx, "", map[string]string{"audit_id": audit})
		if err != nil {
			return err
		}
		pre, firstDecision, lastDecision := -1, -1, -1
		var kinds []string
		for i, f := range fs {
			kinds = append(kinds, f.Kind)
			switch f.Kind {
			case "autonomy.preflight":
				if got, _ := f.attr("preflight_id"); got == id && pre < 0 {
					pre = i
				}
			case "autonomy.decision":
				// The call's own frames, by the agent the scenario leased:
				// where a host reuses an audit_id the query lists other
				// calls' frames too, and their order is not this join's.
				if got, _ := f.attr("actor_agent_id"); got != s.agent {
					continue
				}
				if firstDecision < 0 {
					firstDecision = i
				}
				lastDecision = i
			}
		}
		if pre < 0 || lastDecision < 0 {
			// Which frames carry the audit_id is the join rule's, not the
			// order's.
			return steps.Precondition(auditJoinPrecondition,
				steps.Fail("the audit query for audit_id %s lists %v: it needs the preflight's autonomy.preflight frame and the call's autonomy.decision frame", audit, kinds))
		}
		return w.Assert(pre < firstDecision, "the audit query for audit_id %s lists the frames out of chronological order: %v (the preflight was decided before the call it binds)", audit, kinds)
	})
	// That the refusal is a 400 is contractrefine.preflight.post.malformed-body-400's;
	// the frame check needs only that the request was refused, not decided.
	c.Then(`^the host refuses that request with a client error$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		return w.Assert(r.Status >= 400 && r.Status < 500, "the malformed request was answered %d, not refused with a client error: %s", r.Status, r)
	})
	c.Then(`^the WAL holds no autonomy\.preflight frame of that refused request$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		if s.refused == nil {
			return steps.Fault("no malformed request was sent")
		}
		d, err := s.last()
		if err != nil {
			return err
		}
		all, err := frames(ctx, "autonomy.preflight", nil)
		if err != nil {
			return err
		}
		// The control: the same read shows the frame of the scenario's own
		// earlier decision, so an empty read cannot pass for "no frame".
		control := false
		for _, f := range all {
			if id, _ := f.attr("preflight_id"); id == d.str("preflight_id") {
				control = true
			}
		}
		if err := w.Assert(control, "the WAL read does not show the frame of this scenario's own decision %s, so it cannot show that the refused request left none", d.str("preflight_id")); err != nil {
			return err
		}
		// Any frame written for the refused request would carry its plan
		// hash and its agent id, both unique to it and inside the bytes sent.
		for _, path := range []string{"intent.plan_hash", "actor.agent_id"} {
			v, _ := steps.Lookup(s.refusedRQ, path)
			for _, f := range all {
				if bytes.Contains(f.raw, []byte(steps.Text(v))) {
					return w.Assert(false, "a refused request left an autonomy.preflight frame (it carries the request's %s %s): %s", path, steps.Text(v), f.raw)
				}
			}
		}
		return nil
	})
	c.Then(`^the WAL frame of that preflight satisfies the schema "([^"]*)"$`, func(ctx context.Context, name string) error {
		f, _, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		return steps.From(ctx).ExpectSchema(name, f.raw)
	})
	c.Then(`^the WAL frame of that preflight carries the decision's (.+)$`, func(ctx context.Context, list string) error {
		w := steps.From(ctx)
		f, d, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		for _, name := range splitList(list) {
			path := name
			if name == "expires_at" {
				path = "execution_eligibility.expires_at"
			}
			want, _ := steps.Lookup(d.doc, path)
			got, ok := f.attr(name)
			if err := w.Assert(ok && got == steps.Text(want), "frame attribute %s = %q (present: %v), the decision says %q", name, got, ok, steps.Text(want)); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the WAL frame of that preflight carries the request's plan_hash and capability$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		f, _, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		req := st(ctx).request
		for attr, path := range map[string]string{"plan_hash": "intent.plan_hash", "capability": "capability"} {
			want, _ := steps.Lookup(req, path)
			got, ok := f.attr(attr)
			if err := w.Assert(ok && got == steps.Text(want), "frame attribute %s = %q (present: %v), the request sent %q", attr, got, ok, steps.Text(want)); err != nil {
				return err
			}
		}
		return nil
	})
	c.Then(`^the WAL frame of that preflight has contract_results encoding the decision's contract_results$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		f, d, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		enc, ok := f.attr("contract_results")
		want, _ := json.Marshal(d.doc["contract_results"])
		return w.Assert(ok && steps.JSONEqual([]byte(enc), want), "frame contract_results %q does not encode the decision's %s", enc, want)
	})
	c.Then(`^the WAL frame of that preflight has repair_hints_count equal to the number of the decision's repair hints$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		f, d, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		hints, _ := d.doc["repair_hints"].([]any)
		raw, ok := f.Attrs["repair_hints_count"]
		var n int
		isInt := ok && json.Unmarshal(raw, &n) == nil
		return w.Assert(isInt && n == len(hints), "frame repair_hints_count = %s, the decision has %d hints", raw, len(hints))
	})
	c.Then(`^the WAL frame's reason has the shape "contract: <subreason>"$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		f, _, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		reason, _ := f.attr("reason")
		return w.Assert(reasonShape.MatchString(reason), "frame reason %q does not have the shape contract: <subreason>", reason)
	})
	c.Then(`^the WAL frame of that preflight has "([^"]*)" = "([^"]*)"$`, func(ctx context.Context, name, want string) error {
		w := steps.From(ctx)
		f, _, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		got, ok := f.attr(name)
		return w.Assert(ok && got == want, "frame attribute %s = %q (present: %v), want %q", name, got, ok, want)
	})
	c.Then(`^the WAL frame's decision_json equals the decision that POST returned$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		f, d, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		dj, _ := f.attr("decision_json")
		return w.Assert(steps.JSONEqual([]byte(dj), d.raw), "decision_json differs from the decision:\nframe: %s\nPOST:  %s", dj, d.raw)
	})
	c.Then(`^the response is the WAL frame's decision_json$`, func(ctx context.Context) error {
		w := steps.From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		f, _, err := preflightFrame(ctx)
		if err != nil {
			return err
		}
		dj, _ := f.attr("decision_json")
		return w.Assert(steps.JSONEqual([]byte(dj), r.Body), "GET differs from the frame's decision_json:\nframe: %s\nGET:   %s", dj, r.Body)
	})
}

// splitList reads "a, b, c and d".
func splitList(s string) []string {
	s = strings.ReplaceAll(s, " and ", ", ")
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
