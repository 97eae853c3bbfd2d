package agl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// FuzzCanonicalEncoding holds the canonical encoding to its two promises on
// arbitrary JSON: decoding an encoding gives back the value (encoding it
// again gives the same bytes), and equal values encode equally whatever
// their text (another key order, other whitespace, another number spelling).
func FuzzCanonicalEncoding(f *testing.F) {
	for _, s := range []string{
		`{"to":["a@example.com"],"amount":100,"currency":"EUR"}`,
		`{"b":1,"a":[true,false,null,"x\u00e9\n"],"c":{"d":1.50,"e":-0.0}}`,
		`[1e2,100,1.0e+2,0.1,1E-1]`,
		`"\ud83d\ude00 \u0000"`,
		`{"a":{"a":{"a":{"a":[]}}}}`,
		`12345678901234567890.000000000000000000001`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		enc, err := Canonicalize(v)
		if err != nil {
			return // a value with no canonical form (too many digits, too deep)
		}
		back, err := ParseJSON(enc)
		if err != nil {
			t.Fatalf("the encoding %s does not parse: %v", enc, err)
		}
		arr, ok := back.([]any)
		if !ok || len(arr) != 2 || arr[0] != CanonVersion {
			t.Fatalf("the encoding %s is not [%q, value]", enc, CanonVersion)
		}
		decoded, err := decodeCanon(arr[1])
		if err != nil {
			t.Fatalf("the encoding %s does not decode: %v", enc, err)
		}
		again, err := Canonicalize(decoded)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("decode(encode(x)) encodes to %s, not %s (%v)", again, enc, err)
		}
		// The same value in another text: re-marshalled by encoding/json,
		// which reorders keys and respells nothing it does not have to.
		var generic any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&generic) != nil {
			return
		}
		other, err := json.MarshalIndent(generic, "", "  ")
		if err != nil {
			return
		}
		v2, err := ParseJSON(other)
		if err != nil {
			return
		}
		enc2, err := Canonicalize(v2)
		if err != nil || !bytes.Equal(enc2, enc) {
			t.Fatalf("one value, two encodings:\n%s\n%s", enc, enc2)
		}
	})
}

// decodeCanon reads a tagged canonical value back into the JSON value model.
func decodeCanon(v any) (any, error) {
	t, ok := v.([]any)
	if !ok || len(t) == 0 {
		return nil, fmt.Errorf("not a tagged value: %v", v)
	}
	tag, _ := t[0].(string)
	switch {
	case tag == "null" && len(t) == 1:
		return nil, nil
	case tag == "bool" && len(t) == 2:
		b, ok := t[1].(bool)
		if !ok {
			return nil, fmt.Errorf("bool %v", t[1])
		}
		return b, nil
	case (tag == "int" || tag == "dec") && len(t) == 2:
		s, ok := t[1].(string)
		if !ok {
			return nil, fmt.Errorf("number %v", t[1])
		}
		return json.Number(s), nil
	case tag == "str" && len(t) == 2:
		s, ok := t[1].(string)
		if !ok {
			return nil, fmt.Errorf("string %v", t[1])
		}
		return s, nil
	case tag == "arr" && len(t) == 2:
		items, ok := t[1].([]any)
		if !ok {
			return nil, fmt.Errorf("array %v", t[1])
		}
		out := make([]any, len(items))
		for i, e := range items {
			d, err := decodeCanon(e)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	case tag == "obj" && len(t) == 2:
		members, ok := t[1].([]any)
		if !ok {
			return nil, fmt.Errorf("object %v", t[1])
		}
		out := map[string]any{}
		for _, m := range members {
			kv, ok := m.([]any)
			if !ok || len(kv) != 2 {
				return nil, fmt.Errorf("member %v", m)
			}
			k, ok := kv[0].(string)
			if !ok {
				return nil, fmt.Errorf("key %v", kv[0])
			}
			d, err := decodeCanon(kv[1])
			if err != nil {
				return nil, err
			}
			out[k] = d
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown tag %v", t)
}
