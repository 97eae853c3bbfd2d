package agl

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// TypeSpec is the restricted schema language of operation input types: a
// small subset of JSON Schema whose every construct has one canonical
// meaning. The spec lets the first release restrict proposed payloads to
// supported types until the encoding has fixtures; this is that restriction.
// Objects are closed (unknown members are schema errors) so that nothing
// effect-relevant can ride along outside the approved snapshot.
type TypeSpec struct {
	Type       string               `json:"type"`
	Properties map[string]*TypeSpec `json:"properties,omitempty"`
	Required   []string             `json:"required,omitempty"`
	Items      *TypeSpec            `json:"items,omitempty"`
	Enum       []string             `json:"enum,omitempty"`
	Default    json.RawMessage      `json:"default,omitempty"`
	MinLength  *int                 `json:"minLength,omitempty"`
	MaxLength  *int                 `json:"maxLength,omitempty"`
	MinItems   *int                 `json:"minItems,omitempty"`
	MaxItems   *int                 `json:"maxItems,omitempty"`
	Minimum    *json.Number         `json:"minimum,omitempty"`
	Maximum    *json.Number         `json:"maximum,omitempty"`
	// Handle marks a string that is an opaque resource handle of the named
	// kind; it is resolved through the trusted store, never trusted as data.
	Handle string `json:"x-agl-handle,omitempty"`
}

var knownTypes = map[string]bool{"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true}

// check validates the type declaration itself at registration time.
func (t *TypeSpec) check(path string) error {
	if t == nil {
		return fmt.Errorf("%s: missing type", path)
	}
	if !knownTypes[t.Type] {
		return fmt.Errorf("%s: unsupported type %q", path, t.Type)
	}
	if t.Handle != "" && t.Type != "string" {
		return fmt.Errorf("%s: x-agl-handle requires type string", path)
	}
	if t.Handle != "" && len(t.Default) > 0 {
		return fmt.Errorf("%s: a handle cannot have a default", path)
	}
	switch t.Type {
	case "object":
		for _, r := range t.Required {
			if _, ok := t.Properties[r]; !ok {
				return fmt.Errorf("%s: required member %q is not declared", path, r)
			}
		}
		for k, p := range t.Properties {
			if err := p.check(path + "/" + k); err != nil {
				return err
			}
		}
	case "array":
		if t.Items == nil {
			return fmt.Errorf("%s: array needs items", path)
		}
		if err := t.Items.check(path + "/items"); err != nil {
			return err
		}
	}
	if len(t.Default) > 0 {
		d, err := ParseJSON(t.Default)
		if err != nil {
			return fmt.Errorf("%s: default: %v", path, err)
		}
		if _, err := t.materialize(d, path+"(default)", nil); err != nil {
			return fmt.Errorf("%s: default does not match its type: %v", path, err)
		}
	}
	return nil
}

// handleRef records where a handle occurs in materialized arguments.
type handleRef struct {
	Path  []string
	Kind  string
	Value string
}

// materialize validates v against t and returns a copy with every absent
// member that has a default filled in, so that the approved snapshot states
// every effect-relevant value explicitly.
func (t *TypeSpec) materialize(v any, path string, handles *[]handleRef) (any, error) {
	return t.mat(v, path, nil, handles)
}

func (t *TypeSpec) mat(v any, path string, segs []string, handles *[]handleRef) (any, error) {
	fail := func(format string, a ...any) (any, error) {
		p := path
		if p == "" {
			p = "/"
		}
		return nil, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, a...))
	}
	switch t.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fail("expected object")
		}
		out := map[string]any{}
		for k := range m {
			if _, ok := t.Properties[k]; !ok {
				return fail("unknown member %q", k)
			}
		}
		keys := make([]string, 0, len(t.Properties))
		for k := range t.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := t.Properties[k]
			val, present := m[k]
			if !present {
				if len(p.Default) > 0 {
					d, err := ParseJSON(p.Default)
					if err != nil {
						return fail("default of %q: %v", k, err)
					}
					val, present = d, true
				} else if contains(t.Required, k) {
					return fail("missing required member %q", k)
				}
			}
			if !present {
				continue
			}
			r, err := p.mat(val, path+"/"+escapePointer(k), append(append([]string{}, segs...), k), handles)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fail("expected array")
		}
		if t.MinItems != nil && len(a) < *t.MinItems {
			return fail("fewer than %d items", *t.MinItems)
		}
		if t.MaxItems != nil && len(a) > *t.MaxItems {
			return fail("more than %d items", *t.MaxItems)
		}
		out := make([]any, len(a))
		for i, e := range a {
			r, err := t.Items.mat(e, fmt.Sprintf("%s/%d", path, i), append(append([]string{}, segs...), fmt.Sprint(i)), handles)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case "string":
		s, ok := v.(string)
		if !ok {
			return fail("expected string")
		}
		n := utf8.RuneCountInString(s)
		if t.MinLength != nil && n < *t.MinLength {
			return fail("shorter than %d characters", *t.MinLength)
		}
		if t.MaxLength != nil && n > *t.MaxLength {
			return fail("longer than %d characters", *t.MaxLength)
		}
		if len(t.Enum) > 0 && !contains(t.Enum, s) {
			return fail("value %q is not one of %v", s, t.Enum)
		}
		if t.Handle != "" && handles != nil {
			*handles = append(*handles, handleRef{Path: segs, Kind: t.Handle, Value: s})
		}
		return s, nil
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return fail("expected %s", t.Type)
		}
		tag, _, err := canonNumber(string(n))
		if err != nil {
			return fail("%v", err)
		}
		if t.Type == "integer" && tag != "int" {
			return fail("expected integer, got %s", n)
		}
		r, _ := numberRat(n)
		if t.Minimum != nil {
			if lo, ok := numberRat(*t.Minimum); ok && r.Cmp(lo) < 0 {
				return fail("below minimum %s", *t.Minimum)
			}
		}
		if t.Maximum != nil {
			if hi, ok := numberRat(*t.Maximum); ok && r.Cmp(hi) > 0 {
				return fail("above maximum %s", *t.Maximum)
			}
		}
		return n, nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return fail("expected boolean")
		}
		return b, nil
	}
	return fail("unsupported type %q", t.Type)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// lookupPointer returns the value at an RFC 6901 pointer.
func lookupPointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, raw := range strings.Split(ptr[1:], "/") {
		seg := strings.ReplaceAll(strings.ReplaceAll(raw, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[seg]; !ok {
				return nil, false
			}
		case []any:
			i := -1
			if _, err := fmt.Sscanf(seg, "%d", &i); err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// setPath replaces the value at a path of segments produced by materialize.
func setPath(v any, segs []string, nv any) any {
	if len(segs) == 0 {
		return nv
	}
	switch t := v.(type) {
	case map[string]any:
		t[segs[0]] = setPath(t[segs[0]], segs[1:], nv)
		return t
	case []any:
		var i int
		fmt.Sscanf(segs[0], "%d", &i)
		t[i] = setPath(t[i], segs[1:], nv)
		return t
	}
	return v
}
