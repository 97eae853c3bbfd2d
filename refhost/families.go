package refhost

import (
	"encoding/json"

	"github.com/parley-conformance/parley/refhost/contractrefine"
	"github.com/parley-conformance/parley/refhost/hostenv"
	"github.com/parley-conformance/parley/refhost/openwop"
)

// familySpecs lists every family the reference host can serve, with the
// HTTP paths each one owns.
var familySpecs = []familySpec{
	{
		name:     "contractrefine",
		patterns: []string{"/v1/preflight", "/v1/preflight/", "/v1/tool"},
		open: func(section json.RawMessage, env hostenv.Env) (family, error) {
			var cfg contractrefine.Config
			if err := decodeStrict(section, &cfg); err != nil {
				return nil, err
			}
			return contractrefine.Open(cfg, env)
		},
	},
	{
		name:     "openwop",
		patterns: openwop.Paths,
		seams:    openwop.SeamPrefix,
		open: func(section json.RawMessage, env hostenv.Env) (family, error) {
			var cfg openwop.Config
			if err := decodeStrict(section, &cfg); err != nil {
				return nil, err
			}
			return openwop.Open(cfg, env)
		},
	},
}
