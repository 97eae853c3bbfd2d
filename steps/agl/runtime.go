package agl

// Steps for the rest of the AGL runtime (sections 5 to 12 of the proposal):
// timeouts, the legacy entry point, handler context and identity, party
// binding, audit storage, retries under changed authority, admission and
// budget scopes, cancellation, parallel map and race, retention, and
// recovery across a restart.

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/parley-conformance/parley/steps"
)

func registerRuntime(c *steps.Catalog) {
	c.Given(`^the host gives a handler (\d+) ms to answer$`, func(ctx context.Context, ms int) error {
		return st(ctx).edit(ctx, func(sec map[string]any) { sec["handler_timeout_ms"] = ms })
	})

	// The legacy entry point (spec sections 7 and 10).
	c.When(`^the caller asks the legacy entry point to run "([^"]*)"$`, func(ctx context.Context, tool string) error {
		s := st(ctx)
		if err := s.ensure(ctx); err != nil {
			return err
		}
		var args map[string]any
		switch tool {
		case "legacy.echo":
			args = map[string]any{"text": random("echo-")}
		case sendOp, "email.send/v1":
			args = map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": "Sent around the dispatcher."}
		default:
			args = s.transferArgs(1500, "DE89370400440532013000")
		}
		s.legacyArgs = args
		_, err := s.do(ctx, http.MethodPost, api+"/legacy/invoke", roleNone, map[string]any{"tool": tool, "arguments": args})
		return err
	})
	c.Then(`^the legacy entry point answered with the arguments it was given$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if err := w.ExpectStatus(http.StatusOK); err != nil {
			return err
		}
		r, _ := w.LastResponse()
		if err := w.ExpectSchema("agl/legacy-invoke-result.json", r.Body); err != nil {
			return err
		}
		m, _ := r.JSON()
		want, _ := decodeJSON(mustJSON(s.legacyArgs))
		return w.Assert(reflect.DeepEqual(m["result"], want), "the legacy tool answered %v, it was given %v", m["result"], want)
	})
	c.Then(`^no request reached the destination or the ledger$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		w.Observe(nil)
		a, b := s.mail.fake.Requests(), s.ledger.fake.Requests()
		return w.Assert(len(a) == 0 && len(b) == 0, "the destination received %d request(s) and the ledger %d: %v %v", len(a), len(b), a, b)
	})
}

// mustJSON encodes a value the suite built itself.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the suite's own values always encode
	}
	return b
}
