package agl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"
	"unicode/utf8"
)

// CanonVersion names the canonical encoding. It is part of every encoded
// document, so a digest made under another version can never collide with one
// made under this version.
const CanonVersion = "agl-canon/1"

// Limits on canonical numbers. The spec asks for finite values with one
// encoding; bounding the digit count keeps a hostile 1e999999 literal from
// expanding into megabytes of zeros.
const (
	maxNumberDigits = 100
	maxNesting      = 64
)

// ErrCanon reports input that has no canonical encoding.
var ErrCanon = errors.New("not canonicalizable")

// ParseJSON decodes one JSON document into the value model used by the
// canonicalizer: map[string]any, []any, string, json.Number, bool and nil.
// Unlike encoding/json it refuses duplicate object keys and invalid UTF-8,
// because either would make two different texts hash to one snapshot.
func ParseJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrCanon)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after JSON value", ErrCanon)
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("%w: nesting deeper than %d", ErrCanon, maxNesting)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCanon, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrCanon, err)
				}
				k := kt.(string)
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("%w: duplicate object key %q", ErrCanon, k)
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCanon, err)
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCanon, err)
			}
			return a, nil
		}
		return nil, fmt.Errorf("%w: unexpected delimiter %v", ErrCanon, t)
	default:
		return t, nil
	}
}

// Canonicalize encodes v under agl-canon/1. Every value becomes a JSON array
// whose first element is an explicit type tag:
//
//	["null"] ["bool",b] ["int","<digits>"] ["dec","<digits>.<digits>"]
//	["str","..."] ["arr",[...]] ["obj",[["key",value],...]]
//
// Object members are sorted by the bytes of their UTF-8 keys, array order is
// kept, numbers are exact decimals (never binary floats) printed without
// exponent, leading or trailing zeros, and the whole is wrapped as
// ["agl-canon/1",value]. Strings escape only quote, backslash and control
// characters, so the encoding has no optional forms.
func Canonicalize(v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`["` + CanonVersion + `",`)
	if err := encodeValue(&b, v, 0); err != nil {
		return nil, err
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// Digest is the SHA-256 of the canonical encoding, as "sha256:<hex>".
func Digest(v any) (string, []byte, error) {
	enc, err := Canonicalize(v)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(enc)
	return "sha256:" + hex.EncodeToString(sum[:]), enc, nil
}

func encodeValue(b *bytes.Buffer, v any, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("%w: nesting deeper than %d", ErrCanon, maxNesting)
	}
	switch t := v.(type) {
	case nil:
		b.WriteString(`["null"]`)
	case bool:
		if t {
			b.WriteString(`["bool",true]`)
		} else {
			b.WriteString(`["bool",false]`)
		}
	case json.Number:
		tag, digits, err := canonNumber(string(t))
		if err != nil {
			return err
		}
		b.WriteString(`["` + tag + `","` + digits + `"]`)
	case string:
		if !utf8.ValidString(t) {
			return fmt.Errorf("%w: invalid UTF-8 in string", ErrCanon)
		}
		b.WriteString(`["str",`)
		writeString(b, t)
		b.WriteByte(']')
	case []any:
		b.WriteString(`["arr",[`)
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeValue(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteString(`]]`)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			if !utf8.ValidString(k) {
				return fmt.Errorf("%w: invalid UTF-8 in key", ErrCanon)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys) // Go compares strings bytewise: UTF-8 byte order.
		b.WriteString(`["obj",[`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			writeString(b, k)
			b.WriteByte(',')
			if err := encodeValue(b, t[k], depth+1); err != nil {
				return err
			}
			b.WriteByte(']')
		}
		b.WriteString(`]]`)
	default:
		// Host-built values must be converted to the JSON value model first;
		// float64 in particular is refused so binary rounding never leaks in.
		return fmt.Errorf("%w: unsupported Go type %T", ErrCanon, v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	const hexdig = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// canonNumber turns a JSON number literal into its exact decimal value,
// printed once: "int" with no leading zeros (and no "-0"), or "dec" with a
// fractional part that has no trailing zeros. 1.50, 15e-1 and 1.5 agree.
func canonNumber(lit string) (tag, out string, err error) {
	s := lit
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := s[i+1:]
		if len(e) > 6 {
			return "", "", fmt.Errorf("%w: number %q out of range", ErrCanon, lit)
		}
		var ev big.Int
		if _, ok := ev.SetString(strings.TrimPrefix(e, "+"), 10); !ok {
			return "", "", fmt.Errorf("%w: bad number %q", ErrCanon, lit)
		}
		exp = int(ev.Int64())
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", "", fmt.Errorf("%w: bad number %q", ErrCanon, lit)
	}
	exp -= len(frac)
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "int", "0", nil
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	sign := ""
	if neg {
		sign = "-"
	}
	if exp >= 0 {
		if len(digits)+exp > maxNumberDigits {
			return "", "", fmt.Errorf("%w: number %q out of range", ErrCanon, lit)
		}
		return "int", sign + digits + strings.Repeat("0", exp), nil
	}
	point := len(digits) + exp // digits before the decimal point
	if point > 0 {
		return "dec", sign + digits[:point] + "." + digits[point:], nil
	}
	if -point+len(digits) > maxNumberDigits {
		return "", "", fmt.Errorf("%w: number %q out of range", ErrCanon, lit)
	}
	return "dec", sign + "0." + strings.Repeat("0", -point) + digits, nil
}

// numberRat returns the exact rational value of a JSON number, used for
// schema bounds so that 10 and 1e1 compare equal.
func numberRat(n json.Number) (*big.Rat, bool) {
	_, s, err := canonNumber(string(n))
	if err != nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// toValue converts a Go value built by the host (maps, slices, strings,
// ints) into the JSON value model by a JSON round trip through ParseJSON.
func toValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ParseJSON(raw)
}
