package target

import (
	"testing"

	"github.com/parley-conformance/parley/schemas"
)

// FuzzParseConfig: a configuration document is untrusted input (a url
// target's --host-config, an exec host's file). Parsing never panics, a
// parsed document is canonical (parsing its canonical form gives the same
// digest), and the schema check never panics on it.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"contractrefine":{"mode":"enforce","policy":{"requires_preflight":["tool.echo"]}},"seams":true}`,
		`{"agl":{"keys":{"operator_key":"k"}},"state_dir":"/tmp/x"}`,
		`{"seams":"yes"}`, `{"state_dir":""}`, `[]`, `null`, `{"a":1e999}`, `{"b":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		again, err := ParseConfig(c.JSON())
		if err != nil || again.Digest() != c.Digest() {
			t.Fatalf("the canonical form %s does not parse to the same configuration: %v", c.JSON(), err)
		}
		_ = schemas.ValidateJSON("host-config.json", c.JSON())
		_ = c.Differences(again)
		if !c.Satisfies(again) {
			t.Fatalf("a configuration does not satisfy itself: %s", c.JSON())
		}
	})
}
