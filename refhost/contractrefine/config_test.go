package contractrefine

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

func TestResolveMode(t *testing.T) {
	cases := []struct {
		raw  string
		want Mode
		ok   bool
	}{
		{"", ModeAdvisory, true},
		{"disabled", ModeDisabled, true},
		{"advisory", ModeAdvisory, true},
		{"enforce", ModeEnforce, true},
		{"advsiory", ModeDisabled, false},
		{"Advisory", ModeDisabled, false},
		{" enforce", ModeDisabled, false},
		{"on", ModeDisabled, false},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			got, ok := ResolveMode(tc.raw)
			expect(t).Equal(tc.want, got)
			expect(t).Equal(tc.ok, ok)
		})
	}
}

func TestModeTypoWarnsWithTheBadValue(t *testing.T) {
	hs := newHarness(t, Config{Mode: "advsiory"})
	expect(t).Equal(ModeDisabled, hs.h.Mode())
	var warn map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(hs.logs.String()), "\n") {
		var rec map[string]any
		must(t).NoError(json.Unmarshal([]byte(line), &rec))
		if rec["level"] == "WARN" {
			warn = rec
		}
	}
	must(t).NotNil(warn, "a startup warning is logged")
	expect(t).Contains(warn["msg"], "advsiory")
	expect(t).Equal("advsiory", warn["mode"])

	for _, mode := range []string{"", "disabled", "advisory", "enforce"} {
		hs := newHarness(t, Config{Mode: mode})
		expect(t).NotContains(hs.logs.String(), `"level":"WARN"`, "no warning for %q", mode)
	}
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown emitter", Config{Emitter: "kafka"}, "emitter"},
		{"bad ttl", Config{EligibilityTTL: "soon"}, "eligibility_ttl"},
		{"non-positive ttl", Config{EligibilityTTL: "0s"}, "eligibility_ttl"},
		{"negative attempts", Config{MaxRepairAttempts: ptr(-1)}, "max_repair_attempts"},
		{"unimplemented tool", Config{Policy: PolicyConfig{AllowedTools: []string{"tool.rm"}}}, "tool.rm"},
		{"unknown fault", Config{Faults: FaultConfig{WALEmit: "slow"}}, "wal_emit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.cfg, hostenv.Env{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			must(t).ErrorContains(err, tc.want)
		})
	}
}

func TestConfigJSON(t *testing.T) {
	var cfg Config
	must(t).NoError(json.Unmarshal([]byte(`{
		"mode": "enforce",
		"verifier": {"wired": true, "lock_fingerprint": "blake3:v", "allowed_zones": [], "write_capabilities": ["tool.write"]},
		"emitter": "wal",
		"policy_ref": "p/2",
		"max_repair_attempts": 0,
		"eligibility_ttl": "1m",
		"policy": {"allowed_tools": ["tool.echo"], "requires_preflight": ["tool.echo"]},
		"faults": {"wal_emit": "fail"}
	}`), &cfg))
	s, err := resolve(cfg, slog.New(slog.DiscardHandler))
	must(t).NoError(err)
	expect(t).Equal(ModeEnforce, s.mode)
	expect(t).True(s.verifierWired)
	expect(t).Empty(s.verifier.allowedZones, "an explicit [] is not the default")
	expect(t).Equal(0, s.maxRepairAttempts)
	expect(t).Equal(Fingerprint("p/2"), s.lockFingerprint)
	expect(t).True(s.requiresPreflight["tool.echo"])
	expect(t).True(s.walFail)

	var zero Config
	s, err = resolve(zero, slog.New(slog.DiscardHandler))
	must(t).NoError(err)
	expect(t).Equal(ModeAdvisory, s.mode)
	expect(t).True(s.verifierWired)
	expect(t).True(s.emitterWired)
	expect(t).Equal(DefaultMaxRepairAttempts, s.maxRepairAttempts)
	expect(t).Equal(DefaultEligibilityTTL, s.ttl)
	expect(t).Equal(map[string]bool{"default": true, "lab": true, "edge": true}, s.verifier.allowedZones)
	expect(t).Equal(Fingerprint("verifier-default"), s.verifier.lockFingerprint)
}
