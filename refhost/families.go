package refhost

import (
	"crypto/tls"
	"encoding/json"
	"errors"
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
		// AGTP/1.0 with RCNS. The section carries the host's TOML document
		// as a string and, optionally, TLS material:
		//   {"toml": "...", "tls": {"cert_pem": "...", "key_pem": "..."}}
		// With tls the AGTP listener speaks TLS 1.3 only; without it,
		// plaintext from loopback peers only. No HTTP paths: the seams
		// mount under /conformance/seams/agtp/.
		name:  "agtp",
		seams: agtp.SeamPrefix,
		open: func(section json.RawMessage, env hostenv.Env) (family, error) {
			var cfg struct {
				TOML string `json:"toml"`
				TLS  *struct {
					CertPEM string `json:"cert_pem"`
					KeyPEM  string `json:"key_pem"`
				} `json:"tls"`
			}
			if err := decodeStrict(section, &cfg); err != nil {
				return nil, err
			}
			c, err := agtp.ParseTOML([]byte(cfg.TOML))
			if err != nil {
				return nil, err
			}
			var tc *tls.Config
			if cfg.TLS != nil {
				if cfg.TLS.CertPEM == "" || cfg.TLS.KeyPEM == "" {
					return nil, errors.New("agtp: tls needs cert_pem and key_pem")
				}
				cert, err := tls.X509KeyPair([]byte(cfg.TLS.CertPEM), []byte(cfg.TLS.KeyPEM))
				if err != nil {
					return nil, err
				}
				tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{"agtp"}}
			}
			h, err := agtp.Open(c, env)
			if err != nil {
				return nil, err
			}
			return agtpServed{Host: h, tls: tc}, nil
		},
	},
}

// agtpServed adapts the AGTP host to the assembler: it has no HTTP surface
// beyond its seams and serves AGTP on a listener of its own.
type agtpServed struct {
	*agtp.Host
	tls *tls.Config
}

func (agtpServed) Handler() http.Handler  { return http.NotFoundHandler() }
func (a agtpServed) AGTPTLS() *tls.Config { return a.tls }
