package agtp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/verdict"
)

// Steps that witness rules the other AGTP steps reach only through a
// precondition or through a path that never decides: the request path's
// own expiry check, with the host's expiry pass held by the clock seam.

func registerWitness(c *steps.Catalog) {
	c.Given(`^the host's clock seam can hold its expiry pass$`, func(ctx context.Context) error {
		// Moving the clock is host-wide: the scenario has its host alone.
		w := steps.From(ctx)
		if err := w.Alone(); err != nil {
			return err
		}
		return w.RequireSeams()
	})
	c.When(`^the host's clock passes the contract's expires_at while its expiry pass is held$`, func(ctx context.Context) error {
		return passExpiryHeld(ctx)
	})
}

// passExpiryHeld moves the host's clock past the current contract's
// expires_at (as its 461 or 263 named it) through the clock seam, asking the
// host to run no expiry pass and to hold its own until the scenario ends:
// afterwards only the request path can refuse the contract. A host without
// the clock seam blocks the scenario (seam absent); one that has it but
// cannot hold its pass answers 501 (target cannot provide). The clock is
// moved by what separates expires_at from the suite's clock, plus a second:
// if the host's clock still reads before expires_at (its answer's "now"),
// it is moved again by the difference.
func passExpiryHeld(ctx context.Context) error {
	w, s := steps.From(ctx), st(ctx)
	if s.current == "" {
		return s.noContract()
	}
	raw, ok := s.expiresAt[s.current]
	if !ok {
		return steps.Fault("the answer that issued contract %s named no expires_at (a 461 or a 263 names one)", s.current)
	}
	at, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return w.Assert(false, "the contract's expires_at %q is not an RFC 3339 timestamp", raw)
	}
	ahead := time.Until(at) + time.Second
	if ahead < time.Second {
		ahead = time.Second
	}
	path := SeamPrefix + "clock/advance"
	advance := func(d time.Duration, hold bool) (*steps.Response, error) {
		body := map[string]any{"seconds": d.Seconds()}
		if hold {
			body["expiry_pass"] = false
		}
		b, _ := json.Marshal(body)
		r, present, err := w.OptionalSeam(ctx, http.MethodPost, path, b, http.Header{"Content-Type": {"application/json"}})
		switch {
		case err != nil:
			return nil, err
		case r == nil:
			return nil, steps.Block(verdict.CauseSeamAbsent, "the host runs without seams or serves none (no HTTP surface), so the clock seam POST %s is absent; docs/hosts/agtp.md describes it", path)
		case !present && r.Status == http.StatusNotImplemented:
			return nil, steps.Block(verdict.CauseTarget, "the host's clock seam cannot move its clock while holding its expiry pass (it answered 501 to %s); the request path's own expiry check cannot be isolated on it", b)
		case !present:
			return nil, steps.Block(verdict.CauseSeamAbsent, "the host has no clock seam POST %s (it answered %d); docs/hosts/agtp.md describes it", path, r.Status)
		}
		return r, nil
	}
	r, err := advance(ahead, true)
	if err != nil {
		return err
	}
	// However the hold ends, the scenario gives the host its pass back.
	w.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, _ = w.OptionalSeam(cctx, http.MethodPost, path, []byte(`{"seconds": 0.001}`), http.Header{"Content-Type": {"application/json"}})
	})
	if err := w.Assert(r.Status == http.StatusOK, "the host's clock seam did not move its clock holding its expiry pass: %s", r); err != nil {
		return err
	}
	doc := map[string]any{}
	_ = json.NewDecoder(bytes.NewReader(r.Body)).Decode(&doc)
	if doc["expiry_pass"] != "held" {
		return steps.Block(verdict.CauseTarget, "the host's clock seam answered %s without \"expiry_pass\": \"held\": it may have run its expiry pass, so the request path's own check cannot be isolated on it", bytes.TrimSpace(r.Body))
	}
	if now, err := time.Parse(time.RFC3339Nano, steps.Text(doc["now"])); err == nil && now.Before(at) {
		r, err := advance(at.Sub(now)+time.Second, true)
		if err != nil {
			return err
		}
		return w.Assert(r.Status == http.StatusOK, "the host's clock seam did not move its clock holding its expiry pass: %s", r)
	}
	return nil
}
