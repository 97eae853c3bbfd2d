package evidence_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/xml"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/evidence"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

var (
	once   sync.Once
	reg    *scenarios.Registry
	corpus *scenarios.Corpus
	stmt   evidence.Statement
	setup  error
)

// statement runs a slice of the suite against the refhost once, so the
// bundle under test is a real one.
func statement(t testing.TB) evidence.Statement {
	t.Helper()
	once.Do(func() {
		if reg, corpus, setup = scenarios.Load(); setup != nil {
			return
		}
		tgt := target.NewRefhost()
		defer tgt.Close()
		var res *runner.Result
		res, setup = runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:contractrefine-tool-binding"})
		if setup == nil {
			host := evidence.Host{Kind: tgt.Kind(), Subject: evidence.Subject{Name: "parley-refhost", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}, Configurations: map[string][]byte{}}
			for _, c := range tgt.Configurations() {
				host.Configurations[c.Digest()] = c.JSON()
			}
			stmt = evidence.Build(reg, corpus, evidence.Run{Seed: res.Seed, Tags: res.Tags, Profiles: res.Profiles, Started: res.Started, Finished: res.Finished, Rows: res.Rows}, host, evidence.SigningInfo{})
		}
	})
	if setup != nil {
		t.Fatal(setup)
	}
	// A deep copy, so tests may tamper freely.
	var c evidence.Statement
	b, _ := json.Marshal(stmt)
	_ = json.Unmarshal(b, &c)
	return c
}

func sign(t testing.TB, st evidence.Statement) ([]byte, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := evidence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	st.Predicate.Signing = evidence.SigningInfo{KeyID: evidence.KeyID(pub), Ephemeral: true}
	b, err := evidence.Sign(st, priv)
	if err != nil {
		t.Fatal(err)
	}
	return b, pub
}

func TestAGoodBundleVerifies(t *testing.T) {
	b, pub := sign(t, statement(t))
	st, err := evidence.Verify(b, pub, reg, corpus)
	if err != nil {
		t.Fatal(err)
	}
	if st.Predicate.Totals.ExecutedPass == 0 || st.Predicate.Totals.ExecutedPass != st.Predicate.Totals.Requirements {
		t.Fatalf("the refhost slice should pass every requirement: %+v", st.Predicate.Totals)
	}
}

// TestEveryChangedByteFails flips each byte of a real bundle in turn.
func TestEveryChangedByteFails(t *testing.T) {
	b, pub := sign(t, statement(t))
	for i := range b {
		mut := bytes.Clone(b)
		mut[i] ^= 0x01
		if _, err := evidence.Verify(mut, pub, reg, corpus); err == nil {
			t.Fatalf("flipping byte %d (%q) still verifies", i, b[i])
		}
	}
	if _, err := evidence.Verify(append(bytes.Clone(b), ' '), pub, reg, corpus); err == nil {
		t.Fatal("a byte appended still verifies")
	}
}

func TestAWrongKeyFails(t *testing.T) {
	b, _ := sign(t, statement(t))
	other, _, _ := evidence.GenerateKey()
	_, err := evidence.Verify(b, other, reg, corpus)
	if !errors.Is(err, evidence.ErrOtherKey) {
		t.Fatalf("want a wrong-key error, got %v", err)
	}
}

// TestSignedButFalseContentFails re-signs tampered statements with a good
// key: the signature holds, the content checks must not.
func TestSignedButFalseContentFails(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(p *evidence.Predicate)
		want   string
	}{
		{"totals that do not add up", func(p *evidence.Predicate) { p.Totals.ExecutedPass++ }, "do not add up"},
		{"a vacuous pass", func(p *evidence.Predicate) {
			p.Requirements[0].Assertions = 0
			for i := range p.Requirements[0].Scenarios {
				p.Requirements[0].Scenarios[i].Assertions = 0
			}
		}, "vacuous pass"},
		{"a duplicate id", func(p *evidence.Predicate) {
			p.Requirements = append(p.Requirements, p.Requirements[0])
			p.Totals = evidence.Count(p.Requirements)
		}, "duplicate requirement row"},
		{"an unknown id", func(p *evidence.Predicate) { p.Requirements[0].ID = "contractrefine.made.up" }, "unknown requirement id"},
		{"another corpus", func(p *evidence.Predicate) {
			p.CorpusDigest = "sha256:" + strings.Repeat("ab", 32)
		}, "not this suite's"},
		{"another registry", func(p *evidence.Predicate) {
			p.RegistryDigest = "sha256:" + strings.Repeat("cd", 32)
		}, "registry digest"},
		{"a failure hidden under a pass", func(p *evidence.Predicate) {
			p.Requirements[0].Scenarios[0].Result = verdict.ExecutedFail
		}, "worst of its scenarios"},
		{"inflated assertions", func(p *evidence.Predicate) { p.Requirements[0].Assertions += 7 }, "add up to"},
		{"a profile certified that failed", func(p *evidence.Predicate) {
			p.Requirements[0].Result = verdict.ExecutedFail
			p.Requirements[0].Scenarios[0].Result = verdict.ExecutedFail
			p.Totals = evidence.Count(p.Requirements)
		}, "profilesCertified"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := statement(t)
			c.tamper(&st.Predicate)
			b, pub := sign(t, st)
			_, err := evidence.Verify(b, pub, reg, corpus)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestJUnitNamesRequirementIDs(t *testing.T) {
	st := statement(t)
	var buf bytes.Buffer
	if err := evidence.WriteJUnit(&buf, st); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if _, ok := reg.Lookup(c.Name); !ok {
				t.Errorf("test case %q is not a requirement id", c.Name)
			}
			n++
		}
	}
	if n != len(st.Predicate.Requirements) {
		t.Fatalf("%d test cases for %d requirements", n, len(st.Predicate.Requirements))
	}
}

func TestHTMLReportShowsEveryRequirement(t *testing.T) {
	st := statement(t)
	var buf bytes.Buffer
	if err := evidence.RenderHTML(&buf, st, reg, "test"); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Predicate.Requirements {
		if !strings.Contains(buf.String(), `id="`+r.ID+`"`) {
			t.Errorf("the report has no row for %s", r.ID)
		}
	}
}
