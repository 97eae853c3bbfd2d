// Package target gives the suite a host configured the way a scenario needs.
// A scenario states a configuration (a JSON document, one section per spec
// family); a target turns it into a running host's addresses: the bundled
// refhost in-process, a command the implementer supplies (exec), or a host
// that is already running (url). Hosts are cached by configuration digest so
// that one restarts only when a scenario needs a different configuration.
package target

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Config is a host configuration document:
//
//	{"seams": true, "contractrefine": {"mode": "enforce"}}
//
// Its canonical form (sorted keys, no insignificant space) is what targets
// receive and what its digest covers. The schema is schemas/host-config.json.
type Config struct {
	canon []byte
	// digest is canon's, computed once: a fixture's document carries its
	// certificates, and every lease asks for its key.
	digest string
	doc    map[string]any
	// instance, when set, asks for a host of this configuration that no
	// other instance shares (a scenario that takes its host exclusively, or
	// an isolated run); it is not part of the document the host receives.
	instance string
	// lane says the instance is lent again once released, to one scenario
	// at a time (the callers take turns): a host restarted on its state by
	// one scenario is as good as new for the next.
	lane bool
	// from, when set, is the key of the configuration a running host was
	// started with before it was restarted under this one (ChangedFrom):
	// the host is the same one, cached under its first key, and is never
	// lent to another scenario once released.
	from string
}

// NewConfig builds a configuration from family sections (any JSON-encodable
// values) and whether the host must expose its test seams.
func NewConfig(families map[string]any, seams bool) (Config, error) {
	doc := map[string]any{}
	for k, v := range families {
		doc[k] = v
	}
	if seams {
		doc["seams"] = true
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(b)
}

// ParseConfig reads a configuration document and canonicalizes it.
func ParseConfig(b []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return Config{}, fmt.Errorf("host configuration: %w", err)
	}
	if doc == nil {
		return Config{}, errors.New("host configuration: must be a JSON object")
	}
	if s, ok := doc["seams"]; ok {
		if _, isBool := s.(bool); !isBool {
			return Config{}, errors.New(`host configuration: "seams" must be true or false`)
		}
	}
	if s, ok := doc["fixture"]; ok {
		if d, isStr := s.(string); !isStr || d == "" {
			return Config{}, errors.New(`host configuration: "fixture" must be a fixture name`)
		}
	}
	if s, ok := doc["state_dir"]; ok {
		if d, isStr := s.(string); !isStr || d == "" {
			return Config{}, errors.New(`host configuration: "state_dir" must be a directory path`)
		}
	}
	// encoding/json writes map keys sorted, which makes this canonical.
	canon, err := json.Marshal(doc)
	if err != nil {
		return Config{}, err
	}
	sum := sha256.Sum256(canon)
	return Config{canon: canon, digest: "sha256:" + hex.EncodeToString(sum[:]), doc: doc}, nil
}

// JSON returns the canonical document.
func (c Config) JSON() []byte { return append([]byte(nil), c.canon...) }

// Digest identifies the configuration.
func (c Config) Digest() string {
	if c.digest == "" { // the zero Config
		sum := sha256.Sum256(c.canon)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return c.digest
}

// Fixture names the published fixture the configuration is ("" for a
// document that names none, as a test or an embedder may build).
func (c Config) Fixture() string { s, _ := c.doc["fixture"].(string); return s }

// Instance is the name of the host instance asked for ("" for the one a
// configuration's scenarios share).
func (c Config) Instance() string { return c.instance }

// WithInstance returns c asking for a host instance of its own, named
// name: targets start one apart from every other instance of the same
// document, and never lend it to another scenario once it is released.
func (c Config) WithInstance(name string) Config { c.instance, c.lane = name, false; return c }

// WithLane returns c asking for a host instance apart from the one its
// scenarios share, which, unlike WithInstance's, is kept once released and
// lent again: scenarios that restart a fixture's host take turns on it.
func (c Config) WithLane(name string) Config { c.instance, c.lane = name, true; return c }

// Lane reports whether the instance is lent again once released.
func (c Config) Lane() bool { return c.lane }

// ChangedFrom returns c as the configuration the host running base is
// restarted under (Reconfigurer.RestartWith): the same host instance, so
// targets keep it under base's key, but its document changed, so once the
// scenario that changed it releases it the host is retired rather than lent
// again, and the next to ask for base gets a host started under base.
func (c Config) ChangedFrom(base Config) Config {
	c.instance, c.lane, c.from = base.instance, base.lane, base.Key()
	return c
}

// Changed reports whether the configuration is one a host was restarted
// under in place of the one it was first started with.
func (c Config) Changed() bool { return c.from != "" }

// Key is what targets cache hosts by: the document's digest and the
// instance; for a changed configuration, the key of the host it changed.
func (c Config) Key() string {
	if c.from != "" {
		return c.from
	}
	if c.instance == "" {
		return c.Digest()
	}
	return c.Digest() + "#" + c.instance
}

// Seams reports whether the configuration asks for the test seams.
func (c Config) Seams() bool { s, _ := c.doc["seams"].(bool); return s }

// WithStateDir returns c with its state directory set.
func (c Config) WithStateDir(dir string) (Config, error) { return c.with("state_dir", dir) }

// WithSeams returns c with the host's test seams on.
func (c Config) WithSeams() (Config, error) { return c.with("seams", true) }

// with returns c with one top-level member set.
func (c Config) with(key string, v any) (Config, error) {
	doc := map[string]any{}
	for k, v := range c.doc {
		doc[k] = v
	}
	doc[key] = v
	b, err := json.Marshal(doc)
	if err != nil {
		return Config{}, err
	}
	out, err := ParseConfig(b)
	out.instance, out.lane, out.from = c.instance, c.lane, c.from
	return out, err
}

// StateDir is the directory the configuration tells the host to keep its
// durable state in, so that the suite can restart it on that state ("" when
// the host keeps it where it likes).
func (c Config) StateDir() string { s, _ := c.doc["state_dir"].(string); return s }

// Families returns the family names the configuration has sections for.
func (c Config) Families() []string {
	var out []string
	for k := range c.doc {
		if k != "seams" && k != "state_dir" && k != "fixture" {
			out = append(out, k)
		}
	}
	return out
}

// Section returns one family's section as JSON, or nil.
func (c Config) Section(family string) json.RawMessage {
	v, ok := c.doc[family]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// Differences says, for a reader, how c falls short of want: which sections
// differ (by digest, since sections may hold credentials) and whether seams
// are missing.
func (c Config) Differences(want Config) string {
	var out []string
	if want.Seams() && !c.Seams() {
		out = append(out, "the scenario needs seams")
	}
	fams := want.Families()
	sort.Strings(fams)
	for _, f := range fams {
		have, need := c.Section(f), want.Section(f)
		switch {
		case have == nil:
			out = append(out, "section "+f+" is not declared")
		case !bytes.Equal(have, need):
			out = append(out, fmt.Sprintf("section %s differs (declared %s, needed %s)", f, shortDigest(have), shortDigest(need)))
		}
	}
	if len(out) == 0 {
		return "no difference"
	}
	return strings.Join(out, "; ")
}

func shortDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// Satisfies reports whether a host running c can serve a scenario that asks
// for want: every family want names has an identical section here, and the
// seams are there if want needs them. Sections want does not name are the
// host's own business.
func (c Config) Satisfies(want Config) bool {
	if want.Seams() && !c.Seams() {
		return false
	}
	for _, f := range want.Families() {
		if !bytes.Equal(c.Section(f), want.Section(f)) {
			return false
		}
	}
	return true
}
