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
	WitnessUnwitnessable = "unwitnessable" // no observable; Rationale says why
)

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
}

// Scored reports whether a host's verdict on this entry counts toward
// certification: active, witnessable, and MUST or SHOULD.
func (e Entry) Scored() bool {
	return e.Status == StatusActive && e.Witness != WitnessUnwitnessable && e.Level != MAY
}

type familyFile struct {
	Family      string  `toml:"family"`
	Spec        string  `toml:"spec"`
	Requirement []Entry `toml:"requirement"`
}

// Registry is the set of all requirement entries, in id order.
type Registry struct {
	Entries []Entry
	byID    map[string]int
	digest  string
}

var idPattern = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9][a-z0-9-]*)+$`)

// LoadRegistry reads the embedded registry files.
func LoadRegistry() (*Registry, error) { return loadRegistry(registryFS) }

func loadRegistry(fsys fs.FS) (*Registry, error) {
	names, err := fs.Glob(fsys, "*.toml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	r := &Registry{byID: map[string]int{}}
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
			if _, dup := r.byID[e.ID]; dup {
				return nil, fmt.Errorf("registry %s: duplicate id %s", name, e.ID)
			}
			r.byID[e.ID] = len(r.Entries)
			r.Entries = append(r.Entries, e)
		}
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
		case WitnessWire, WitnessSeam, WitnessLog:
		case WitnessUnwitnessable:
			if strings.TrimSpace(e.Rationale) == "" {
				bad("an unwitnessable requirement needs a rationale")
			}
		default:
			bad("witness %q is not wire, seam, log or unwitnessable", e.Witness)
		}
		switch e.Status {
		case StatusActive, StatusRetired:
		default:
			bad("status %q is not active or retired", e.Status)
		}
		if e.Section == "" || e.Statement == "" || e.Profile == "" {
			bad("section, statement and profile are required")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("registry:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// Lookup returns the entry with the given id.
func (r *Registry) Lookup(id string) (Entry, bool) {
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
