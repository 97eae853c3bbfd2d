package sabotage_test

import (
	"context"
	"testing"

	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// TestAGTPProxyIsTransparent is the AGTP proxy's control: a rule whose AGTP
// hooks change nothing leaves every AGTP requirement passing, over TLS 1.3
// and plaintext loopback alike, so an AGTP sabotage failure is the rule's
// doing and not the proxy's.
func TestAGTPProxyIsTransparent(t *testing.T) {
	reg, corpus := load(t)
	noop := sabotage.Rule{ID: "none",
		AGTPRequest: func(*sabotage.AGTPExchange) *agtp.Response { return nil },
		AGTP:        func(*sabotage.AGTPExchange, *agtp.Response) {}}
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: noop}
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
			t.Errorf("%s through a pass-through AGTP proxy: %s (%s)", r.ID, r.Result, r.Detail)
		}
	}
}
