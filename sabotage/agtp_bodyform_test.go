package sabotage_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// onlyReads is a host that reads one request body form only (the drafts
// leave the choice open): a flat host takes the whole body as the request's
// parameters, an envelope host takes only its parameters object. Modelled in
// front of the reference host (which reads both) by handing it the
// parameters the strict host would have seen, as an envelope.
func onlyReads(form string) sabotage.Rule {
	return sabotage.Rule{ID: "none", Broken: "reads only the " + form + " request body form",
		AGTPRequest: func(x *sabotage.AGTPExchange) *agtp.Response {
			var body map[string]any
			if json.Unmarshal(x.Request.Body, &body) != nil || body == nil {
				return nil
			}
			params := any(body)
			if form == target.BodyFormEnvelope {
				if params = body["parameters"]; params == nil {
					params = map[string]any{}
				}
			}
			x.Request.Body, _ = json.Marshal(map[string]any{"parameters": params})
			return nil
		}}
}

// TestTheSuiteSendsTheDeclaredBodyForm: a host that reads only the flat
// form, or only the envelope, passes every AGTP requirement when it declares
// the form it reads, so the suite sends nothing else; and fails when it
// declares the other, so the declaration is what decides the form.
func TestTheSuiteSendsTheDeclaredBodyForm(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("runs the AGTP corpus against two strict hosts")
	}
	reg, corpus := load(t)
	run := func(t *testing.T, reads, declared, tags string) *runner.Result {
		inner := target.NewRefhost()
		inner.AGTPBodyForm = declared
		tgt := &sabotage.Target{Inner: inner, Rule: onlyReads(reads)}
		defer tgt.Close()
		res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) == 0 {
			t.Fatal("no AGTP requirement ran")
		}
		return res
	}
	for _, form := range []string{target.BodyFormFlat, target.BodyFormEnvelope} {
		t.Run("declared/"+form, func(t *testing.T) {
			for _, r := range run(t, form, form, "@profile:agtp-rcns").Rows {
				if r.Result != verdict.ExecutedPass {
					t.Errorf("a host reading only the %s form, declaring it: %s is %s (%s)", form, r.ID, r.Result, r.Detail)
				}
			}
		})
		other := target.BodyFormEnvelope
		if form == other {
			other = target.BodyFormFlat
		}
		t.Run("misdeclared/"+form, func(t *testing.T) {
			const ids = "@req:agtp.propose.body.wrapped-form,@req:agtp.rcns.delivery.optimistic-header"
			for _, r := range run(t, form, other, ids).Rows {
				if r.Result != verdict.ExecutedFail {
					t.Errorf("a host reading only the %s form but declaring %s: %s is %s, want executed-fail (%s)", form, other, r.ID, r.Result, r.Detail)
				}
			}
		})
	}
}
