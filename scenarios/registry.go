// Package scenarios holds the requirement registry (one TOML file per spec
// family) and binds the feature corpus to it: every scenario names the
// requirements it witnesses with @req:<id> tags, and every active MUST or
// SHOULD is witnessed by a scenario or explains why it cannot be.
package scenarios

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

//go:embed *.toml
var registryFS embed.FS

// Levels as the specs use them.
const (
	MUST   = "MUST"
	SHOULD = "SHOULD"
	MAY    = "MAY"
)

// Witness classes: how the suite observes a requirement.
const (
	WitnessWire          = "wire"          // only the spec's own wire surface
	WitnessSeam          = "seam"          // a documented test seam (WAL read-back, fault injection)
	WitnessLog           = "log"           // the host's startup log, as the target captured it
	WitnessModel         = "model"         // seeded operation sequences over the wire, each answer checked against an executable model (models/)
	WitnessUnwitnessable = "unwitnessable" // no observable; Rationale says why
)

// Bases of an entry: where the rule comes from. The fairness rule (GUIDE,
// "Spec conflicts and gaps"): a spec profile holds a host only to what the
// text says (text) or to a reading of it recorded with the id in
// docs/interpretations.md (interpretation) that accepts every reading the
// text allows; a check that needs a choice the text leaves open is parley's
// own (binding) and lives in the family's <family>-parley-binding profile.
const (
	BasisText           = "text"
	BasisInterpretation = "interpretation"
	BasisBinding        = "binding"
)

// BindingProfileSuffix ends the name of every profile of binding rules.
const BindingProfileSuffix = "-parley-binding"

// Statuses of an entry. A retired id keeps its entry as a tombstone so that
// the id is never reused for something else.
const (
	StatusActive  = "active"
	StatusRetired = "retired"
)

// Entry is one normative requirement, paraphrased.
type Entry struct {
	ID        string `toml:"id" json:"id"`
	Family    string `toml:"-" json:"family"`
	Section   string `toml:"section" json:"section"`
	Level     string `toml:"level" json:"level"`
	Statement string `toml:"statement" json:"statement"`
	Witness   string `toml:"witness" json:"witness"`
	Profile   string `toml:"profile" json:"profile"`
	Status    string `toml:"status" json:"status"`
	Rationale string `toml:"rationale,omitempty" json:"rationale,omitempty"`
	// Basis is text, interpretation or binding (BasisText when unset).
	Basis string `toml:"basis,omitempty" json:"basis"`
}

// Scored reports whether a host's verdict on this entry counts toward
// certification: active, witnessable, and MUST or SHOULD.
func (e Entry) Scored() bool {
	return e.Status == StatusActive && e.Witness != WitnessUnwitnessable && e.Level != MAY
}

// Precondition is a setup that scenarios rely on without witnessing it
// (obtain a contract through the gate, register the contracts and a grant).
// When a setup step fails because the host misbehaved, a scenario that does
// not witness one of ReliesOn is blocked naming them: their own scenarios
// fail on the root cause, and a reader fixes that first.
type Precondition struct {
	ID        string   `toml:"id" json:"id"`
	Family    string   `toml:"-" json:"family"`
	Statement string   `toml:"statement" json:"statement"`
	ReliesOn  []string `toml:"relies_on" json:"reliesOn"`
}

type familyFile struct {
	Family       string         `toml:"family"`
	Spec         string         `toml:"spec"`
	Requirement  []Entry        `toml:"requirement"`
	Precondition []Precondition `toml:"precondition"`
}

// Registry is the set of all requirement entries, in id order, and the
// preconditions setups establish.
type Registry struct {
	Entries       []Entry
	Preconditions []Precondition
	byID          map[string]int
	preByID       map[string]int
	digest        string
}

var idPattern = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9][a-z0-9-]*)+$`)

// LoadRegistry reads the embedded registry files.
func LoadRegistry() (*Registry, error) { return loadRegistry(registryFS) }

// Load reads the embedded registry and corpus, what a run needs.
func Load() (*Registry, *Corpus, error) {
	reg, err := LoadRegistry()
	if err != nil {
		return nil, nil, err
	}
	corpus, err := LoadCorpus()
	if err != nil {
		return nil, nil, err
	}
	return reg, corpus, nil
}

func loadRegistry(fsys fs.FS) (*Registry, error) {
	names, err := fs.Glob(fsys, "*.toml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	r := &Registry{byID: map[string]int{}, preByID: map[string]int{}}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		var ff familyFile
		dec := toml.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ff); err != nil {
			var strict *toml.StrictMissingError
			if errors.As(err, &strict) {
				return nil, fmt.Errorf("registry %s: unknown field:\n%s", name, strict.String())
			}
			return nil, fmt.Errorf("registry %s: %w", name, err)
		}
		if want := strings.TrimSuffix(path.Base(name), ".toml"); ff.Family != want {
			return nil, fmt.Errorf("registry %s: family %q must match the file name", name, ff.Family)
		}
		for _, e := range ff.Requirement {
			e.Family = ff.Family
			if e.Status == "" {
				e.Status = StatusActive
			}
			if e.Basis == "" {
				e.Basis = BasisText
			}
			if _, dup := r.byID[e.ID]; dup {
				return nil, fmt.Errorf("registry %s: duplicate id %s", name, e.ID)
			}
			r.byID[e.ID] = len(r.Entries)
			r.Entries = append(r.Entries, e)
		}
		for _, p := range ff.Precondition {
			p.Family = ff.Family
			if _, dup := r.preByID[p.ID]; dup {
				return nil, fmt.Errorf("registry %s: duplicate precondition %s", name, p.ID)
			}
			r.preByID[p.ID] = len(r.Preconditions)
			r.Preconditions = append(r.Preconditions, p)
		}
	}
	sort.Slice(r.Preconditions, func(i, j int) bool { return r.Preconditions[i].ID < r.Preconditions[j].ID })
	for i, p := range r.Preconditions {
		r.preByID[p.ID] = i
	}
	sort.Slice(r.Entries, func(i, j int) bool { return r.Entries[i].ID < r.Entries[j].ID })
	for i, e := range r.Entries {
		r.byID[e.ID] = i
	}
	r.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return r, r.checkEntries()
}

// checkEntries enforces the shape of each entry; binding to the corpus is
// checked by Bind.
func (r *Registry) checkEntries() error {
	var problems []string
	for _, e := range r.Entries {
		bad := func(format string, a ...any) {
			problems = append(problems, e.ID+": "+fmt.Sprintf(format, a...))
		}
		if !idPattern.MatchString(e.ID) || !strings.HasPrefix(e.ID, e.Family+".") {
			bad("id must be <family>.<area>.<slug> in lower case and start with %q", e.Family+".")
		}
		switch e.Level {
		case MUST, SHOULD, MAY:
		default:
			bad("level %q is not MUST, SHOULD or MAY", e.Level)
		}
		switch e.Witness {
		case WitnessWire, WitnessSeam, WitnessLog, WitnessModel:
		case WitnessUnwitnessable:
			if strings.TrimSpace(e.Rationale) == "" {
				bad("an unwitnessable requirement needs a rationale")
			}
		default:
			bad("witness %q is not wire, seam, log, model or unwitnessable", e.Witness)
		}
		switch e.Status {
		case StatusActive, StatusRetired:
		default:
			bad("status %q is not active or retired", e.Status)
		}
		if e.Section == "" || e.Statement == "" || e.Profile == "" {
			bad("section, statement and profile are required")
		}
		switch binding := strings.HasSuffix(e.Profile, BindingProfileSuffix); e.Basis {
		case BasisText, BasisInterpretation:
			if binding {
				bad("profile %s holds parley's own choices: its entries have basis = %q", e.Profile, BasisBinding)
			}
		case BasisBinding:
			if !binding {
				bad("a binding rule (parley's own choice) belongs to profile %s%s, not %s", e.Family, BindingProfileSuffix, e.Profile)
			}
		default:
			bad("basis %q is not text, interpretation or binding", e.Basis)
		}
	}
	for _, p := range r.Preconditions {
		bad := func(format string, a ...any) {
			problems = append(problems, "precondition "+p.ID+": "+fmt.Sprintf(format, a...))
		}
		if !preconditionPattern.MatchString(p.ID) || !strings.HasPrefix(p.ID, p.Family+".") {
			bad("id must be %s.precondition.<slug> in lower case", p.Family)
		}
		if _, clash := r.byID[p.ID]; clash {
			bad("id is also a requirement id")
		}
		if strings.TrimSpace(p.Statement) == "" {
			bad("a statement is required")
		}
		if len(p.ReliesOn) == 0 {
			bad("relies_on names no requirement")
		}
		for _, id := range p.ReliesOn {
			e, ok := r.Lookup(id)
			switch {
			case !ok:
				bad("relies_on %s, which is not a requirement", id)
			case e.Status != StatusActive || e.Witness == WitnessUnwitnessable:
				bad("relies_on %s, which is not an active witnessable requirement", id)
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("registry:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

var preconditionPattern = regexp.MustCompile(`^[a-z0-9]+\.precondition\.[a-z0-9][a-z0-9-]*$`)

// LookupPrecondition returns the precondition with the given id.
func (r *Registry) LookupPrecondition(id string) (Precondition, bool) {
	i, ok := r.preByID[id]
	if !ok {
		return Precondition{}, false
	}
	return r.Preconditions[i], true
}

// Lookup returns the entry with the given id.
func (r *Registry) Lookup(id string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	i, ok := r.byID[id]
	if !ok {
		return Entry{}, false
	}
	return r.Entries[i], true
}

// Digest identifies the registry's exact content.
func (r *Registry) Digest() string { return r.digest }

// Families lists the families that have entries, sorted.
func (r *Registry) Families() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range r.Entries {
		if !seen[e.Family] {
			seen[e.Family] = true
			out = append(out, e.Family)
		}
	}
	sort.Strings(out)
	return out
}
