package agl

// Holds: a dispatch stopped at a boundary (inside the claim, or after it
// and before the external call) for exactly as long as the scenario
// observes it. The host's fault seam holds it ("hold") until the suite
// releases it (POST faults/release); a scenario that lets the held dispatch
// go on says so in a step, and one that ends while a dispatch is held
// releases it as it ends. See docs/hosts/agl.md (faults) and
// docs/interpretations.md for a host whose seam has no "hold".

import (
	"context"
	"net/http"

	"github.com/parley-conformance/parley/steps"
)

// holdBoundary maps a step's words to the fault seam's boundary.
var holdBoundary = map[string]string{"in the claim": "claim", "at the external call": "external_call"}

// holdFallbackMS is how long a "delay" lasts in place of a "hold" the
// host's seam does not offer, unless the step names another: the pauses
// the scenarios used before holds existed, long enough for their
// observations on an unloaded machine.
var holdFallbackMS = map[string]int{"claim": 1500, "external_call": 5000}

// armHold arms a hold for the scenario's send operation at boundary. A
// host whose seam refuses the action (422: an older seam that knows
// "delay" but not "hold") gets a "delay" of fallbackMS instead, and the
// release is then nothing to do.
func (s *state) armHold(ctx context.Context, boundary string, fallbackMS int) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	w := steps.From(ctx)
	h, err := w.Host(ctx)
	if err != nil {
		return err
	}
	if !h.Config.Seams() {
		return steps.Fault(`a hold needs "the AGL test seams are enabled" among the Given steps`)
	}
	op := s.sendOp
	body := mustJSON(map[string]any{"boundary": boundary, "action": "hold", "operation": op, "count": 1})
	r, err := w.Seam(ctx, http.MethodPost, seamPath+"/faults", body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	if r.Status == http.StatusUnprocessableEntity {
		s.mu.Lock()
		if s.delayed == nil {
			s.delayed = map[string]bool{}
		}
		s.delayed[boundary] = true
		s.mu.Unlock()
		return s.seamFault(ctx, boundary, "delay", map[string]any{"delay_ms": fallbackMS})
	}
	if err := w.Assert(r.Status == http.StatusCreated, "the host's fault seam refused %s/hold: %s", boundary, r); err != nil {
		return err
	}
	// A scenario that ends (passed, failed or blocked) with the dispatch
	// still held lets it go, so the shared host is not left holding it.
	base, raw := h.HTTP, mustJSON(map[string]any{"boundary": boundary, "operation": op})
	w.Cleanup(func() {
		_, _ = w.Exchange(context.WithoutCancel(ctx), base, http.MethodPost, seamPath+"/faults/release", raw, http.Header{"Content-Type": {"application/json"}})
	})
	return nil
}

// releaseHold lets the dispatch held at boundary go on.
func (s *state) releaseHold(ctx context.Context, boundary string) error {
	s.mu.Lock()
	delayed := s.delayed[boundary]
	s.mu.Unlock()
	if delayed {
		// The host paused for a fixed time instead; the dispatch goes on
		// when that time is up.
		return nil
	}
	w := steps.From(ctx)
	raw := mustJSON(map[string]any{"boundary": boundary, "operation": s.sendOp})
	r, err := w.Seam(ctx, http.MethodPost, seamPath+"/faults/release", raw, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	if err := w.Assert(r.Status == http.StatusOK, "the host's fault seam did not release the hold at %s: %s", boundary, r); err != nil {
		return err
	}
	m, err := r.JSON()
	if err != nil {
		return err
	}
	return w.Assert(intOf(m["released"]) == 1, "the host's fault seam released %v hold(s) at %s, want the 1 the scenario armed: %s", m["released"], boundary, r)
}
