package agtp_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// undeclaring is the reference host whose ready line declares some
// optional fixture members unsupported (it serves them all the same, so a
// scenario that runs where it should have been blocked still passes, and
// only the verdicts tell).
type undeclaring struct {
	*target.Refhost
	unsupported []string
}

func (u *undeclaring) Acquire(ctx context.Context, cfg target.Config) (*target.Host, error) {
	h, err := u.Refhost.Acquire(ctx, cfg)
	if err != nil || h == nil {
		return h, err
	}
	c := *h
	c.Unsupported = append([]string(nil), u.unsupported...)
	return &c, nil
}

// The reference policy's optional parts, as the fixtures write them
// (fixtures/agtp.go), read here without the steps' help: the custom
// methods, and the PROPOSE review and refusal lists.
var (
	customMethods = []string{"PENCIL"}
	reviewed      = []string{"BOOK /suite/{id}"}
	refused       = []string{"SCHEDULE /slot/{id}", "RESERVE /desk/{id}"}
	proposesPair  = regexp.MustCompile(`(?:proposes|has a proposal awaiting review for) ([A-Z]+) (/\S+)`)
	methodToken   = regexp.MustCompile(`\b[A-Z]{3,32}\b`)
)

// pairMatches reports whether a proposed pair matches a "METHOD /pattern"
// ({x} matches one segment).
func pairMatches(method, path, pattern string) bool {
	pm, pp, _ := strings.Cut(pattern, " ")
	if pm != method {
		return false
	}
	a, b := strings.Split(path, "/"), strings.Split(pp, "/")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.HasPrefix(b[i], "{") && a[i] != b[i] {
			return false
		}
	}
	return true
}

// reliesOn is the optional member, among the three, a scenario relies on,
// read from what it sends: a declared custom method anywhere in a step, a
// proposal of a pair under review, or a proposal of a refused pair.
func reliesOn(s scenarios.Scenario) string {
	for _, text := range s.Steps {
		for _, m := range methodToken.FindAllString(text, -1) {
			for _, c := range customMethods {
				if m == c {
					return fixtures.AGTPCustomMethodsMember
				}
			}
		}
		if m := proposesPair.FindStringSubmatch(text); m != nil {
			for _, p := range reviewed {
				if pairMatches(m[1], m[2], p) {
					return fixtures.AGTPProposeReviewMember
				}
			}
			for _, p := range refused {
				if pairMatches(m[1], m[2], p) {
					return fixtures.AGTPProposeRefusalsMember
				}
			}
		}
	}
	return ""
}

// TestAHostWithoutAnOptionalMember: a host declaring one of the optional
// members custom-methods, propose-review or propose-refusals unsupported in
// its ready line gets exactly the scenarios that rely on it blocked
// (configuration-declined) naming it; every other scenario runs and passes.
func TestAHostWithoutAnOptionalMember(t *testing.T) {
	t.Parallel() // waits on hosts of its own
	if testing.Short() {
		t.Skip("runs the AGTP profile once per member")
	}
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // scenario key -> member it relies on
	for _, s := range corpus.Scenarios {
		if strings.HasPrefix(s.URI, "agtp/") {
			if m := reliesOn(s); m != "" {
				want[fmt.Sprintf("%s:%d", s.URI, s.Line)] = m
			}
		}
	}
	for _, member := range []string{fixtures.AGTPCustomMethodsMember, fixtures.AGTPProposeReviewMember, fixtures.AGTPProposeRefusalsMember} {
		t.Run(member, func(t *testing.T) {
			for _, f := range fixtures.All() {
				if _, ok := f.Member(member); f.Family == "agtp" && !ok {
					t.Errorf("fixture %s does not declare member %s", f.Name, member)
				}
			}
			tgt := &undeclaring{Refhost: target.NewRefhost(), unsupported: []string{member}}
			defer tgt.Close()
			res, err := runner.Run(context.Background(), reg, corpus, runner.Options{Target: tgt, Tags: "@profile:agtp-rcns"})
			if err != nil {
				t.Fatal(err)
			}
			var blocked, passed int
			for _, s := range res.Scenarios {
				switch {
				case want[fmt.Sprintf("%s:%d", s.URI, s.Line)] == member:
					if s.Result != verdict.Blocked || s.Cause != verdict.CauseDeclined || !strings.Contains(s.Detail, `"`+member+`"`) {
						t.Errorf("%s:%d %s relies on %s: %s (%s: %s), want blocked naming it", s.URI, s.Line, s.Name, member, s.Result, s.Cause, s.Detail)
						continue
					}
					blocked++
				case s.Result == verdict.ExecutedPass:
					passed++
				default:
					t.Errorf("%s:%d %s does not rely on %s: %s (%s: %s), want executed-pass", s.URI, s.Line, s.Name, member, s.Result, s.Cause, s.Detail)
				}
			}
			if blocked == 0 || passed == 0 {
				t.Fatalf("%d scenarios blocked naming %s, %d passed: want both", blocked, member, passed)
			}
			t.Logf("%d scenarios blocked naming %s, %d passed", blocked, member, passed)
		})
	}
}
