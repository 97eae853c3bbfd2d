package agtp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	agtpsteps "github.com/parley-conformance/parley/steps/agtp"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// TestRefhostPassesInEachBodyForm runs the AGTP corpus against the
// reference host declared as reading each request body form the drafts
// leave open (the envelope, the default; flat parameters). The reference
// host reads both, so every requirement must pass either way, and the
// bundle's facts must say the suite sent exactly the declared form and
// where it found refusal reasons.
func TestRefhostPassesInEachBodyForm(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("runs the AGTP corpus twice")
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{target.BodyFormEnvelope, target.BodyFormFlat} {
		t.Run(form, func(t *testing.T) {
			tgt := target.NewRefhost()
			tgt.AGTPBodyForm = form
			defer tgt.Close()
			res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) == 0 {
				t.Fatal("no AGTP requirement ran")
			}
			for _, r := range res.Rows {
				if r.Result != verdict.ExecutedPass {
					t.Errorf("%s with the %s body form: %s (%s)", r.ID, form, r.Result, r.Detail)
				}
			}
			if got := res.Facts[agtpsteps.FactRequestForm]; strings.Join(got, ",") != form {
				t.Errorf("declared %s, the suite recorded sending %v", form, got)
			}
			if got := res.Facts[agtpsteps.FactReasonPlacement]; strings.Join(got, ",") != "error.reason" {
				t.Errorf("the reference host nests reasons under error; the facts say %v", got)
			}
			if len(res.Facts[agtpsteps.FactResponseForm]) == 0 {
				t.Error("no response body form recorded")
			}
			t.Logf("%s: facts %v", form, res.Facts)
		})
	}
}
