package agl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parley-conformance/parley/steps"
)

// canonVersion is the encoding docs/agl-binding.md §2 defines. The suite
// carries its own implementation, so a host's canonical_encoding is checked
// against an independent one rather than against itself.
const canonVersion = "agl-canon/1"

// canonicalize encodes a decoded JSON value (numbers as json.Number) as
// ["agl-canon/1", <tagged value>]. The values come from the host, so a value
// the encoding does not admit is the host's failure (*steps.Failure).
func canonicalize(v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`["` + canonVersion + `",`)
	if err := encodeCanon(&b, v); err != nil {
		return nil, err
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

func encodeCanon(b *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		b.WriteString(`["null"]`)
	case bool:
		fmt.Fprintf(b, `["bool",%t]`, t)
	case json.Number:
		tag, text, err := canonNumber(string(t))
		if err != nil {
			return err
		}
		fmt.Fprintf(b, `[%q,%q]`, tag, text)
	case string:
		b.WriteString(`["str",`)
		canonString(b, t)
		b.WriteByte(']')
	case []any:
		b.WriteString(`["arr",[`)
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeCanon(b, e); err != nil {
				return err
			}
		}
		b.WriteString(`]]`)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // Go compares strings by their UTF-8 bytes
		b.WriteString(`["obj",[`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			canonString(b, k)
			b.WriteByte(',')
			if err := encodeCanon(b, t[k]); err != nil {
				return err
			}
			b.WriteByte(']')
		}
		b.WriteString(`]]`)
	default:
		return steps.Fail("agl-canon/1 has no encoding for a %T the host sent", v)
	}
	return nil
}

func canonString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// canonNumber gives the one encoding of an exact decimal: "int" with no
// leading zeros, or "dec" with no exponent and no trailing fractional zeros.
func canonNumber(lit string) (tag, text string, err error) {
	// A huge exponent would make the exact value itself huge: the binding
	// refuses numbers of more than 100 digits, so anything far beyond is
	// refused before it is expanded.
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+")); err != nil || e > 400 || e < -400 {
			return "", "", steps.Fail("the number %q the host sent is beyond what agl-canon/1 encodes", clip(lit))
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return "", "", steps.Fail("the host sent %q, which is not a JSON number", clip(lit))
	}
	if r.IsInt() {
		return "int", r.Num().String(), nil
	}
	// A JSON literal's denominator is a power of ten, so 100 fractional
	// digits are exact for anything the binding accepts.
	s := strings.TrimRight(r.FloatString(100), "0")
	return "dec", s, nil
}

// decodeJSON decodes with json.Number, as the host's snapshot is read.
func decodeJSON(raw []byte) (any, error) {
	if !utf8.Valid(raw) {
		return nil, steps.Fail("the body is not valid UTF-8: %s", clip(string(raw)))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, steps.Fail("the body is not JSON (%v): %s", err, clip(string(raw)))
	}
	return v, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
