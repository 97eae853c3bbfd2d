package certify_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/certify"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target/targettest"
	"github.com/parley-conformance/parley/verdict"
)

// TestMain builds the reference image while the tests that need no engine
// run (targettest.MainWithImage).
func TestMain(m *testing.M) { targettest.MainWithImage(m) }

// TestCertifyTheReferenceImageInContainers is how an implementer with a
// container image certifies it from go test; here the image is the
// reference host's (target/testdata/refhost.Dockerfile). Every requirement
// passes in containers, as it does against the reference host in process
// (runner's test), except what the container target cannot do by design
// (docs/host-interface.md: cut the power under a host), which is blocked
// with the target as its cause. It skips, saying so, where no Docker engine
// answers.
//
// Each configuration is a container of its own, and the engine starts them
// one after another (about 0.6 s each on two cores): the whole corpus takes
// minutes. So by default the test runs a sample (containerSample): a
// restarting requirement per feature file that restarts its host, and every
// third other requirement; PARLEY_CONTAINER_ALL=1 runs them all.
func TestCertifyTheReferenceImageInContainers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the corpus in containers")
	}
	image, _ := targettest.ReferenceImage(t)
	reg, corpus, err := scenarios.Load()
	if err != nil {
		t.Fatal(err)
	}
	opts := []certify.Option{certify.Container(image), certify.Concurrency(8), certify.AllowBlocked()}
	if os.Getenv("PARLEY_CONTAINER_ALL") == "" {
		opts = append(opts, certify.Tags(containerSample(reg, corpus)))
	}
	o := certify.Run(t, opts...)
	passed := 0
	for _, r := range o.Statement.Predicate.Requirements {
		switch {
		case r.Result == verdict.ExecutedPass:
			passed++
		case r.Result == verdict.Skipped:
		case r.Result == verdict.Blocked && r.Cause == verdict.CauseTarget && strings.HasSuffix(r.ID, "power-cut"):
			// The container target cannot cut the power under a host.
		default:
			t.Errorf("%s in containers: %s (%s): %s", r.ID, r.Result, r.Cause, r.Detail)
		}
	}
	if passed == 0 {
		t.Fatal("no requirement executed-pass in containers")
	}
	t.Logf("%d requirements executed-pass in containers (%d in the registry; PARLEY_CONTAINER_ALL=1 runs them all); %d containers started, %d restarts", passed, len(reg.Entries), o.Result.Hosts, o.Result.Restarts)
	if s := o.Statement.Subject; len(s) == 0 || s[0].Digest["sha256"] == "" {
		t.Errorf("the bundle names no image digest: %+v", s)
	}
}

// containerSample is a tag expression for the requirements the container
// test runs by default: in each feature file whose scenarios restart their
// host on a kept state, the requirements of its first such scenario (the
// volume is what the container target adds, and it holds one family's state
// as it holds another's, scenario after scenario), and every third other
// requirement in registry order. Every restart is a new container, and the
// engine starts containers one after another, so the other restarting
// requirements run with PARLEY_CONTAINER_ALL=1.
func containerSample(reg *scenarios.Registry, corpus *scenarios.Corpus) string {
	const keeps = "the host keeps its state where the suite can restart it"
	restarts, kept, firstOf := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, sc := range corpus.Scenarios {
		if !slices.ContainsFunc(sc.Steps, func(step string) bool { return strings.Contains(step, keeps) }) {
			continue
		}
		for _, id := range sc.ReqIDs {
			restarts[id] = true
			if !firstOf[sc.URI] {
				kept[id] = true
			}
		}
		firstOf[sc.URI] = true
	}
	var alts []string
	for i, e := range reg.Entries {
		if kept[e.ID] || (!restarts[e.ID] && i%3 == 0) {
			alts = append(alts, scenarios.ReqTagPrefix+e.ID)
		}
	}
	return strings.Join(alts, ",")
}
