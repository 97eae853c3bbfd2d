// Package aglchecker holds the conformance fixtures of the AGL workflow
// checker (profile agl-checker): agl-workflow/1 documents, positive and
// negative, one directory per judgment. Each <dir>/<name>.agl is the
// fixture in the notation of package notation (readable, with the places
// its spans point at) and <dir>/<name>.json is what the suite sends; the
// features under features/agl/ name the fixtures and what the checker must
// answer for each. TestFixturesAreGenerated holds the two forms together
// (PARLEY_UPDATE_FIXTURES=1 regenerates the JSON).
package aglchecker

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed */*.json
var files embed.FS

// Fixture returns the agl-workflow/1 document of a fixture ("join/if-same-state").
func Fixture(name string) ([]byte, error) {
	if strings.Contains(name, "..") {
		return nil, fmt.Errorf("no fixture %q", name)
	}
	b, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("no fixture %q", name)
	}
	return b, nil
}

// Names lists every fixture.
func Names() []string {
	var out []string
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			out = append(out, strings.TrimSuffix(path, ".json"))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// Reordered re-encodes a JSON value with every object's members in reverse
// order and no whitespace: the same workflow, other bytes. Both the
// suite and the checker's own tests use it to show an answer depends on
// the workflow, not on its encoding.
func Reordered(v any) []byte {
	var b bytes.Buffer
	var enc func(v any)
	enc = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteByte(':')
				enc(t[k])
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range t {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(e)
			}
			b.WriteByte(']')
		default:
			eb, _ := json.Marshal(t)
			b.Write(eb)
		}
	}
	enc(v)
	return b.Bytes()
}
