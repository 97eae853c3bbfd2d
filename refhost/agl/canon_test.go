package agl

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite golden canonicalization fixtures")

// canonFixture is one golden case. Input is kept as a JSON string so its
// exact literal spelling (1.50, 1e2, escapes, key order) is what is tested.
type canonFixture struct {
	Description string    `json:"description"`
	Input       string    `json:"input"`
	Type        *TypeSpec `json:"type,omitempty"`
	Canonical   string    `json:"canonical,omitempty"`
	Digest      string    `json:"digest,omitempty"`
	Error       string    `json:"error,omitempty"`
}

func canonOf(f *canonFixture) (string, string, error) {
	v, err := ParseJSON([]byte(f.Input))
	if err != nil {
		return "", "", err
	}
	if f.Type != nil {
		if err := f.Type.check(""); err != nil {
			return "", "", err
		}
		if v, err = f.Type.materialize(v, "", nil); err != nil {
			return "", "", err
		}
	}
	dg, enc, err := Digest(v)
	return string(enc), dg, err
}

func TestCanonGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/canon/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			var f canonFixture
			require.NoError(t, json.Unmarshal(raw, &f))
			enc, dg, err := canonOf(&f)
			if *updateGolden && f.Error == "" {
				require.NoError(t, err)
				f.Canonical, f.Digest = enc, dg
				out, _ := json.MarshalIndent(f, "", "  ")
				require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
				return
			}
			if f.Error != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), f.Error)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, f.Canonical, enc)
			assert.Equal(t, f.Digest, dg)
		})
	}
}

// Equivalent spellings must agree; different values must not.
func TestCanonEquivalence(t *testing.T) {
	same := [][]string{
		{`{"b":1,"a":[1,2]}`, `{ "a" : [1, 2], "b" : 1.0 }`, `{"a":[1,2],"b":10e-1}`},
		{`1.50`, `1.5`, `15e-1`, `0.15E1`},
		{`-0`, `0`, `0.000`},
		{`"\u00e9"`, `"é"`},
		{`100`, `1e2`, `1E+2`},
	}
	for _, group := range same {
		var want string
		for i, in := range group {
			v, err := ParseJSON([]byte(in))
			require.NoError(t, err, in)
			dg, _, err := Digest(v)
			require.NoError(t, err, in)
			if i == 0 {
				want = dg
			} else {
				assert.Equal(t, want, dg, "%s vs %s", group[0], in)
			}
		}
	}
	differ := [][2]string{{`[1,2]`, `[2,1]`}, {`"1"`, `1`}, {`true`, `"true"`}, {`null`, `{}`}, {`[]`, `{}`}, {`1`, `1.1`}}
	for _, p := range differ {
		a, _ := ParseJSON([]byte(p[0]))
		b, _ := ParseJSON([]byte(p[1]))
		da, _, _ := Digest(a)
		db, _, _ := Digest(b)
		assert.NotEqual(t, da, db, "%s vs %s", p[0], p[1])
	}
	for _, bad := range []string{`{"a":1,"a":2}`, "\"\xff\"", `1e999999`, `[1] 2`, strings.Repeat("[", 100) + strings.Repeat("]", 100)} {
		_, err := ParseJSON([]byte(bad))
		if err == nil {
			v, _ := ParseJSON([]byte(bad))
			_, _, err = Digest(v)
		}
		assert.Error(t, err, bad)
	}
}
