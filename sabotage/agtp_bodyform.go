package sabotage

import (
	"encoding/json"

	"github.com/parley-conformance/parley/target"
	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// ReadsOnlyBodyForm is a host that reads one request body form only (the
// drafts leave the choice open): a flat host takes the whole body as the
// request's parameters, an envelope host takes only its parameters object.
// Modelled in front of the reference host (which reads both) by handing it
// the parameters the strict host would have seen, as an envelope. It is a
// faithful host, not a broken one: declaring the form it reads, it must
// pass every AGTP requirement (steps/agtp's body-form test).
func ReadsOnlyBodyForm(form string) Rule {
	return Rule{ID: "none", Broken: "reads only the " + form + " request body form",
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
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
