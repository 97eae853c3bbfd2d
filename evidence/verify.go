package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/verdict"
)

// ErrOtherKey: the bundle names a signing key other than the one given, so
// nothing about its payload can be said (ask for the signer's key).
var ErrOtherKey = errors.New("signed by another key")

// ErrPayloadChanged: the bundle names the given key, and its signature does
// not cover the payload it carries now: the bundle was changed after signing.
var ErrPayloadChanged = errors.New("the payload changed after signing")

// Verify checks a bundle against a public key and this suite's registry and
// corpus. It returns the statement when every check passes, and otherwise an
// error that lists each problem found.
func Verify(bundle []byte, pub ed25519.PublicKey, reg *scenarios.Registry, corpus *scenarios.Corpus) (*Statement, error) {
	if reg == nil || corpus == nil {
		return nil, errors.New("verify needs this suite's registry and corpus")
	}
	return verify(bundle, pub, reg, corpus)
}

// VerifySigned checks a bundle's signature and that its content holds
// together (totals, verdicts, causes, no vacuous pass), without asking that
// it came from this suite's registry and corpus: for comparing bundles of
// different suite versions.
func VerifySigned(bundle []byte, pub ed25519.PublicKey) (*Statement, error) {
	return verify(bundle, pub, nil, nil)
}

func verify(bundle []byte, pub ed25519.PublicKey, reg *scenarios.Registry, corpus *scenarios.Corpus) (*Statement, error) {
	var env dsse.Envelope
	if err := strictDecode(bundle, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	// The envelope must be byte-for-byte the canonical encoding of what it
	// says, so that no byte outside the signed payload can change unnoticed.
	if canon, err := encodeEnvelope(&env); err != nil || !bytes.Equal(canon, bundle) {
		return nil, errors.New("the envelope is not in the canonical form parley writes: it was changed after signing")
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("payloadType is %q, want %q", env.PayloadType, PayloadType)
	}
	if len(env.Signatures) != 1 {
		return nil, fmt.Errorf("want exactly one signature, the envelope has %d", len(env.Signatures))
	}
	if want := KeyID(pub); env.Signatures[0].KeyID != want {
		return nil, fmt.Errorf("%w: the bundle was signed by key %s, not by the given key %s", ErrOtherKey, env.Signatures[0].KeyID, want)
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{Key: pub})
	if err != nil {
		return nil, err
	}
	_, payload, err := ev.VerifyAndDecode(context.Background(), &env)
	if err != nil {
		// The envelope names the given key, so the key is right and what it
		// signed is not what the envelope carries now.
		return nil, fmt.Errorf("%w: the signature by the given key %s does not verify over the payload the envelope carries now (or the signature itself was changed)", ErrPayloadChanged, KeyID(pub))
	}
	if base64.StdEncoding.EncodeToString(payload) != env.Payload {
		return nil, errors.New("the payload is not canonical base64: it was changed after signing")
	}
	if err := schemas.ValidateJSON("evidence-predicate.json", payload); err != nil {
		return nil, fmt.Errorf("the statement does not satisfy schemas/evidence-predicate.json: %w", err)
	}
	var st Statement
	if err := strictDecode(payload, &st); err != nil {
		return nil, fmt.Errorf("the payload is not a parley statement: %w", err)
	}
	if canon, _ := json.Marshal(st); !bytes.Equal(canon, payload) {
		return nil, errors.New("the statement is not in the canonical form parley writes")
	}
	if problems := check(st, reg, corpus); len(problems) > 0 {
		return &st, fmt.Errorf("the bundle is signed but its content does not hold:\n  %s", strings.Join(problems, "\n  "))
	}
	return &st, nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

var verdicts = map[string]bool{
	verdict.ExecutedPass: true, verdict.ExecutedFail: true, verdict.Skipped: true,
	verdict.Inapplicable: true, verdict.Blocked: true,
}

// checkCause holds a verdict and its cause together: a blocked verdict
// carries a cause from the closed list, nothing else carries one, and a
// failed precondition names the known requirements it relied on.
func checkCause(where, result, cause string, reliesOn []string, reg *scenarios.Registry, bad func(string, ...any)) {
	switch {
	case result == verdict.Blocked && !verdict.IsCause(cause):
		bad("%s: blocked with cause %q, which is not one of %v", where, cause, verdict.Causes)
	case result != verdict.Blocked && cause != "":
		bad("%s: %s carries a cause (%s); only blocked does", where, result, cause)
	case cause == verdict.CausePrecondition && len(reliesOn) == 0:
		bad("%s: a failed precondition names no requirement it relied on", where)
	case cause != verdict.CausePrecondition && len(reliesOn) > 0:
		bad("%s: reliesOn is set but the cause is %q", where, cause)
	}
	for _, id := range reliesOn {
		if reg == nil {
			break
		}
		if _, ok := reg.Lookup(id); !ok {
			bad("%s: relies on %s, which is not a requirement of this suite", where, id)
		}
	}
}

// check recomputes what a bundle asserts about itself.
func check(st Statement, reg *scenarios.Registry, corpus *scenarios.Corpus) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	p := st.Predicate
	if st.Type != StatementType {
		bad("_type is %q, want %q", st.Type, StatementType)
	}
	if st.PredicateType != PredicateType {
		bad("predicateType is %q, want %q", st.PredicateType, PredicateType)
	}
	switch {
	case len(st.Subject) != 1:
		bad("the statement names %d subjects, want one (the host build)", len(st.Subject))
	case len(st.Subject[0].Digest) == 0 && st.Subject[0].Name != Undeclared:
		bad("subject %q has no digest; a subject without one must be named %q", st.Subject[0].Name, Undeclared)
	}
	if corpus != nil && p.CorpusDigest != corpus.Digest() {
		bad("feature corpus digest %s is not this suite's (%s): the bundle came from another corpus", p.CorpusDigest, corpus.Digest())
	}
	if reg != nil && p.RegistryDigest != reg.Digest() {
		bad("registry digest %s is not this suite's (%s)", p.RegistryDigest, reg.Digest())
	}
	seen := map[string]bool{}
	for _, r := range p.Requirements {
		if seen[r.ID] {
			bad("%s: duplicate requirement row", r.ID)
		}
		seen[r.ID] = true
		if _, ok := reg.Lookup(r.ID); reg != nil && !ok {
			bad("%s: unknown requirement id", r.ID)
		}
		if !verdicts[r.Result] {
			bad("%s: %q is not a verdict", r.ID, r.Result)
		}
		checkCause(r.ID, r.Result, r.Cause, r.ReliesOn, reg, bad)
		if r.Result == verdict.ExecutedPass && r.Assertions == 0 {
			bad("%s: vacuous pass (executed-pass with zero assertions)", r.ID)
		}
		if r.Result == verdict.ExecutedPass && len(r.Scenarios) == 0 {
			bad("%s: executed-pass with no scenario", r.ID)
		}
		sum, worst := 0, ""
		for _, s := range r.Scenarios {
			sum += s.Assertions
			if !verdicts[s.Result] {
				bad("%s: scenario %q has %q, not a verdict", r.ID, s.Name, s.Result)
			}
			checkCause(fmt.Sprintf("%s: scenario %s:%d", r.ID, s.URI, s.Line), s.Result, s.Cause, s.ReliesOn, reg, bad)
			if s.Result == verdict.ExecutedPass && s.Assertions == 0 {
				bad("%s: scenario %q is a vacuous pass", r.ID, s.Name)
			}
			if worst == "" {
				worst = s.Result
			} else {
				worst = verdict.Worst(worst, s.Result)
			}
		}
		if len(r.Scenarios) > 0 {
			if sum != r.Assertions {
				bad("%s: %d assertions claimed, its scenarios add up to %d", r.ID, r.Assertions, sum)
			}
			if worst != r.Result {
				bad("%s: result %s, but the worst of its scenarios is %s", r.ID, r.Result, worst)
			}
			// The row's cause and detail are its worst scenario's.
			f := verdict.Row{ID: r.ID, Scenarios: r.Scenarios}
			f.Fold()
			if f.Cause != r.Cause || !reflect.DeepEqual(f.ReliesOn, r.ReliesOn) || f.Detail != r.Detail || !reflect.DeepEqual(f.Exchange, r.Exchange) {
				bad("%s: the row's cause, detail or exchange is not that of its worst scenario", r.ID)
			}
		}
	}
	if got := Count(p.Requirements); got != p.Totals {
		bad("totals %+v do not add up; the rows give %+v", p.Totals, got)
	}
	if reg != nil {
		if want := certified(reg, p.Requirements); !reflect.DeepEqual(want, p.ProfilesCertified) {
			bad("profilesCertified %v, the rows certify %v", p.ProfilesCertified, want)
		}
	}
	return out
}
