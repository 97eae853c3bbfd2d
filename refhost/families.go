package refhost

import (
	"crypto/tls"
	"encoding/json"
	"net/http"

	"github.com/parley-conformance/parley/refhost/agl"
	"github.com/parley-conformance/parley/refhost/agtp"
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
		// The AGL binding agl-binding/1 (docs/agl-binding.md); the section
		// is agl.Config (schemas/agl/host-config.json).
		name:     "agl",
		patterns: agl.Paths,
		seams:    agl.SeamPrefix,
		open: func(section json.RawMessage, env hostenv.Env) (family, error) {
			var cfg agl.Config
			if err := decodeStrict(section, &cfg); err != nil {
				return nil, err
			}
			return agl.Open(cfg, env)
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
	{
		// AGTP/1.0 with RCNS. The section is spec-level
		// (schemas/agtp/host-config.json, docs/hosts/agtp.md): the RCNS
		// knobs, agents, capabilities, Tier A/B endpoints, recipes and
		// passthroughs, and optionally TLS material; agtp.ParseListeners
		// translates it into the reference host's own configuration. With
		// tls the AGTP listener speaks TLS 1.3 only (and plaintext_listener
		// adds a second, plaintext one on loopback); without it, plaintext
		// from loopback peers only. No HTTP paths: the seams mount under
		// /conformance/seams/agtp/.
		name:  "agtp",
		seams: agtp.SeamPrefix,
		open: func(section json.RawMessage, env hostenv.Env) (family, error) {
			c, l, err := agtp.ParseListeners(section)
			if err != nil {
				return nil, err
			}
			h, err := agtp.Open(c, env)
			if err != nil {
				return nil, err
			}
			return agtpServed{Host: h, tls: l.TLS, plaintext: l.Plaintext}, nil
		},
	},
}

// agtpServed adapts the AGTP host to the assembler: it has no HTTP surface
// beyond its seams and serves AGTP on a listener of its own.
type agtpServed struct {
	*agtp.Host
	tls       *tls.Config
	plaintext bool
}

func (agtpServed) Handler() http.Handler  { return http.NotFoundHandler() }
func (a agtpServed) AGTPTLS() *tls.Config { return a.tls }
func (a agtpServed) AGTPPlaintext() bool  { return a.plaintext }
