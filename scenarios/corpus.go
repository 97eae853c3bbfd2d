package scenarios

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	gherkin "github.com/cucumber/gherkin/go/v42"
	messages "github.com/cucumber/messages/go/v34"

	"github.com/parley-conformance/parley/features"
	aglchecker "github.com/parley-conformance/parley/scenarios/agl-checker"
)

// Tag prefixes that bind a scenario to the registry.
const (
	ReqTagPrefix     = "@req:"
	ProfileTagPrefix = "@profile:"
	// FixtureTagPrefix names the fixture a scenario runs on (fixtures.Lookup).
	FixtureTagPrefix = "@fixture:"
	// ExclusiveTag marks a scenario that changes host-wide state (an
	// operator's policy edit, a sweep, a clock move, a fault armed for the
	// whole host): it takes its host alone, and the host is not lent again.
	ExclusiveTag = "@exclusive"
)

// File is one feature file of the corpus.
type File struct {
	Name     string // <family>/<section>.feature
	Contents []byte
}

// Scenario is one runnable scenario (a Gherkin pickle: an example row of an
// outline counts as its own scenario).
type Scenario struct {
	// PickleID is the id godog gives the pickle when it parses the corpus
	// as the runner hands it over (one id sequence across the files, in
	// order): results are matched back to scenarios by it, so that one row
	// of an outline is never mistaken for another.
	PickleID string
	URI      string
	Name     string
	Line     int64
	Tags     []string
	ReqIDs   []string
	Profile  string
	// Fixture is the fixture the scenario names ("" when it names none);
	// Fixtures lists every @fixture tag, for the lint that wants exactly one.
	Fixture  string
	Fixtures []string
	// Exclusive says the scenario takes its host alone (ExclusiveTag).
	Exclusive bool
	// Steps are the texts of the scenario's steps, as godog matches them.
	Steps []string
}

// Corpus is the parsed feature set.
type Corpus struct {
	Files     []File
	Scenarios []Scenario
	digest    string
}

// LoadCorpus parses the embedded feature files.
func LoadCorpus() (*Corpus, error) { return loadCorpus(features.FS) }

func loadCorpus(fsys fs.FS) (*Corpus, error) {
	names, err := fs.Glob(fsys, "*/*.feature")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	var files []File
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		files = append(files, File{Name: name, Contents: b})
	}
	// The checker's fixtures are what its scenarios send: a changed fixture
	// is a changed suite even when no feature file moved.
	for _, name := range aglchecker.Names() {
		b, _ := aglchecker.Fixture(name)
		fmt.Fprintf(h, "agl-checker/%s.json\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return parse(files, "sha256:"+hex.EncodeToString(h.Sum(nil)))
}

// Reorder returns the corpus of the files names gives, in that order (each
// at most once; a file not named is left out), as the runner will hand them
// to godog: godog starts the scenarios of earlier files first, and numbers
// pickles in that order, so the scenarios' pickle ids are those of the new
// order. A run hands godog only the files holding a scenario it selected:
// parsing the whole corpus twice for a run of one requirement was most of
// such a run's work. The digest, which names the content loaded, is
// unchanged.
func (c *Corpus) Reorder(names []string) (*Corpus, error) {
	byName := make(map[string]File, len(c.Files))
	for _, f := range c.Files {
		byName[f.Name] = f
	}
	files := make([]File, 0, len(names))
	for _, n := range names {
		f, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("reorder: %q is not a file of the corpus, or is named twice", n)
		}
		delete(byName, n)
		files = append(files, f)
	}
	return parse(files, c.digest)
}

// parse reads the scenarios of files, in their order.
func parse(files []File, digest string) (*Corpus, error) {
	c := &Corpus{Files: files, digest: digest}
	// One id sequence across every file, in the order the runner passes
	// them to godog, exactly as godog numbers them.
	ids := (&messages.Incrementing{}).NewId
	for _, f := range files {
		name := f.Name
		doc, err := gherkin.ParseGherkinDocumentForLanguage(bytes.NewReader(f.Contents), gherkin.DefaultDialect, ids)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		lines := scenarioLines(doc)
		for _, p := range gherkin.Pickles(*doc, name, ids) {
			s := Scenario{PickleID: p.Id, URI: name, Name: p.Name}
			for _, st := range p.Steps {
				s.Steps = append(s.Steps, st.Text)
			}
			if len(p.AstNodeIds) > 0 {
				s.Line = lines[p.AstNodeIds[len(p.AstNodeIds)-1]]
				if s.Line == 0 {
					s.Line = lines[p.AstNodeIds[0]]
				}
			}
			for _, t := range p.Tags {
				s.Tags = append(s.Tags, t.Name)
				switch {
				case strings.HasPrefix(t.Name, ReqTagPrefix):
					s.ReqIDs = append(s.ReqIDs, strings.TrimPrefix(t.Name, ReqTagPrefix))
				case strings.HasPrefix(t.Name, ProfileTagPrefix):
					s.Profile = strings.TrimPrefix(t.Name, ProfileTagPrefix)
				case strings.HasPrefix(t.Name, FixtureTagPrefix):
					s.Fixture = strings.TrimPrefix(t.Name, FixtureTagPrefix)
					s.Fixtures = append(s.Fixtures, s.Fixture)
				case t.Name == ExclusiveTag:
					s.Exclusive = true
				}
			}
			c.Scenarios = append(c.Scenarios, s)
		}
	}
	return c, nil
}

// scenarioLines maps the AST ids of scenarios and example rows to their line.
func scenarioLines(doc *messages.GherkinDocument) map[string]int64 {
	out := map[string]int64{}
	add := func(sc *messages.Scenario) {
		if sc == nil {
			return
		}
		out[sc.Id] = sc.Location.Line
		for _, ex := range sc.Examples {
			for _, row := range ex.TableBody {
				out[row.Id] = row.Location.Line
			}
		}
	}
	if doc.Feature == nil {
		return out
	}
	for _, ch := range doc.Feature.Children {
		add(ch.Scenario)
		if ch.Rule != nil {
			for _, rc := range ch.Rule.Children {
				add(rc.Scenario)
			}
		}
	}
	return out
}

// Digest identifies the exact corpus; bundles carry it.
func (c *Corpus) Digest() string { return c.digest }

// Bind checks the corpus against the registry: every scenario names exactly
// one requirement and one profile, every tag names a live registry entry
// whose profile matches, and every active MUST or SHOULD is witnessed by a
// scenario or carries a rationale for why it cannot be.
func Bind(r *Registry, c *Corpus) error {
	var problems []string
	witnessed := map[string]bool{}
	for _, s := range c.Scenarios {
		where := fmt.Sprintf("%s:%d %q", s.URI, s.Line, s.Name)
		if len(s.ReqIDs) == 0 {
			problems = append(problems, where+": no @req tag")
		}
		if s.Profile == "" {
			problems = append(problems, where+": no @profile tag")
		}
		// One requirement per scenario: a scenario tagged with two ids
		// would fail both when only one rule broke, blaming an id whose
		// rule held. A duplicate of one id is reported below instead.
		if distinct := distinctIDs(s.ReqIDs); len(distinct) > 1 {
			problems = append(problems, fmt.Sprintf("%s: tags %d requirements (%s); a scenario witnesses one @req id, so split it", where, len(distinct), strings.Join(distinct, ", ")))
		}
		seenIDs := map[string]bool{}
		for _, id := range s.ReqIDs {
			if seenIDs[id] {
				problems = append(problems, where+": @req:"+id+" is tagged twice")
			}
			seenIDs[id] = true
			e, ok := r.Lookup(id)
			switch {
			case !ok:
				problems = append(problems, where+": @req:"+id+" names no registry entry")
			case e.Status == StatusRetired:
				problems = append(problems, where+": @req:"+id+" is retired")
			case e.Witness == WitnessUnwitnessable:
				problems = append(problems, where+": @req:"+id+" is registered as unwitnessable")
			case s.Profile != "" && e.Profile != s.Profile:
				problems = append(problems, fmt.Sprintf("%s: @req:%s belongs to profile %s, the scenario says %s", where, id, e.Profile, s.Profile))
			}
			witnessed[id] = true
		}
	}
	for _, p := range r.Preconditions {
		for _, id := range p.ReliesOn {
			if !witnessed[id] {
				problems = append(problems, "precondition "+p.ID+": relies_on "+id+", which no scenario witnesses")
			}
		}
	}
	for _, e := range r.Entries {
		if e.Status != StatusActive || witnessed[e.ID] || e.Witness == WitnessUnwitnessable {
			continue
		}
		if e.Level == MUST || e.Level == SHOULD {
			problems = append(problems, e.ID+": active "+e.Level+" with no scenario and no rationale")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("corpus and registry disagree:\n  %s", strings.Join(problems, "\n  "))
	}
	// Every scenario names the one fixture it runs on (the runner checks
	// that it exists: the verifier links the registry, not the fixtures).
	return CheckFixtures(c, nil)
}

// distinctIDs returns ids without repeats, in first-seen order.
func distinctIDs(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// CheckFixtures holds every scenario to the fixtures: it names exactly one
// (@fixture:NAME) and, when familyOf is given (fixtures.FamilyOf), the
// fixture exists and belongs to the scenario's family.
func CheckFixtures(c *Corpus, familyOf func(fixture string) (string, bool)) error {
	var problems []string
	for _, s := range c.Scenarios {
		where := fmt.Sprintf("%s:%d %q", s.URI, s.Line, s.Name)
		family, _, _ := strings.Cut(s.URI, "/")
		switch len(s.Fixtures) {
		case 0:
			problems = append(problems, where+": no @fixture tag (parley fixtures lists the fixtures of family "+family+")")
			continue
		case 1:
		default:
			problems = append(problems, where+": names "+strings.Join(s.Fixtures, ", ")+"; a scenario runs on one fixture")
			continue
		}
		if familyOf == nil {
			continue
		}
		f, ok := familyOf(s.Fixture)
		switch {
		case !ok:
			problems = append(problems, where+": @fixture:"+s.Fixture+" names no fixture")
		case f != family:
			problems = append(problems, where+": @fixture:"+s.Fixture+" belongs to family "+f)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("scenarios and fixtures disagree:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
