package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/parley-conformance/parley/schemas"
)

// The shared vocabulary of wire assertions. Each counts one assertion and
// names, on failure, what the host sent.

// ExpectStatus asserts the last response's status code.
func (w *World) ExpectStatus(code int) error {
	r, err := w.LastResponse()
	if err != nil {
		return err
	}
	return w.Assert(r.Status == code, "%s", r.Unexpected(code))
}

// Lookup walks a dotted path ("execution_eligibility.expires_at",
// "contract_results.0.contract") through decoded JSON.
func Lookup(doc any, path string) (any, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Field returns a field of the last response's JSON body.
func (w *World) Field(path string) (any, bool, error) {
	r, err := w.LastResponse()
	if err != nil {
		return nil, false, err
	}
	doc, err := r.JSON()
	if err != nil {
		return nil, false, err
	}
	v, ok := Lookup(doc, path)
	return v, ok, nil
}

// StringField returns a string field of the last response, failing the
// assertion when it is absent or not a string.
func (w *World) StringField(path string) (string, error) {
	v, ok, err := w.Field(path)
	if err != nil {
		return "", err
	}
	s, isStr := v.(string)
	r, _ := w.LastResponse()
	if err := w.Assert(ok && isStr, "expected a string field %q: %s", path, r); err != nil {
		return "", err
	}
	return s, nil
}

// ExpectField asserts that a field of the last response equals want, compared
// as JSON text ("true", "3") for non-strings.
func (w *World) ExpectField(path, want string) error {
	v, ok, err := w.Field(path)
	if err != nil {
		return err
	}
	r, _ := w.LastResponse()
	return w.Assert(ok && Text(v) == want, "expected %s = %q, got %s: %s", path, want, describe(v, ok), r)
}

// ExpectNoField asserts that the last response has no such field.
func (w *World) ExpectNoField(path string) error {
	v, ok, err := w.Field(path)
	if err != nil {
		return err
	}
	return w.Assert(!ok, "expected no field %s, got %s", path, describe(v, ok))
}

// ExpectSchema validates a JSON document against an embedded schema.
func (w *World) ExpectSchema(name string, doc []byte) error {
	if _, err := schemas.Compile(name); err != nil {
		return Fault("no schema %s: %v", name, err)
	}
	err := schemas.ValidateJSON(name, doc)
	return w.Assert(err == nil, "the document does not satisfy %s: %v\n%s", name, err, clip(doc))
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// IsUUIDv4 reports whether s is a UUID of version 4 and the RFC 4122
// variant, in canonical lower-case form.
func IsUUIDv4(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && uuidV4.MatchString(strings.ToLower(s)) && u.Version() == 4 && u.Variant() == uuid.RFC4122
}

// Text renders a decoded JSON value the way a feature file writes it.
func Text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

// JSONEqual compares two JSON documents by value.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func describe(v any, ok bool) string {
	if !ok {
		return "no such field"
	}
	return fmt.Sprintf("%q", Text(v))
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// Common adds the step phrases every family shares.
func Common(c *Catalog) {
	c.Given(`^the host keeps its state where the suite can restart it$`, func(ctx context.Context) error {
		return From(ctx).KeepState()
	}).TakesTurns()
	c.Given(`^the host keeps its state on a disk whose power the suite can cut$`, func(ctx context.Context) error {
		return From(ctx).KeepStateOnCuttableDisk()
	}).TakesTurns()
	c.When(`^the power is cut under the host and it is started again$`, func(ctx context.Context) error {
		return From(ctx).PowerCut(ctx)
	})
	c.When(`^the host is restarted$`, func(ctx context.Context) error {
		return From(ctx).Restart(ctx, false)
	})
	c.When(`^the host crashes and is started again$`, func(ctx context.Context) error {
		return From(ctx).Restart(ctx, true)
	})
	c.Then(`^the response status is (\d+)$`, func(ctx context.Context, code int) error {
		return From(ctx).ExpectStatus(code)
	})
	c.Then(`^the response field "([^"]*)" is "([^"]*)"$`, func(ctx context.Context, path, want string) error {
		return From(ctx).ExpectField(path, want)
	})
	c.Then(`^the response field "([^"]*)" is empty$`, func(ctx context.Context, path string) error {
		return From(ctx).ExpectField(path, "")
	})
	c.Then(`^the response has no field "([^"]*)"$`, func(ctx context.Context, path string) error {
		return From(ctx).ExpectNoField(path)
	})
	c.Then(`^the response field "([^"]*)" is a UUID version 4$`, func(ctx context.Context, path string) error {
		w := From(ctx)
		s, err := w.StringField(path)
		if err != nil {
			return err
		}
		return w.Assert(IsUUIDv4(s), "%s = %q is not a UUID version 4", path, s)
	})
	c.Then(`^the response body satisfies the schema "([^"]*)"$`, func(ctx context.Context, name string) error {
		w := From(ctx)
		r, err := w.LastResponse()
		if err != nil {
			return err
		}
		return w.ExpectSchema(name, r.Body)
	})
	c.Then(`^the response field "([^"]*)" lists exactly "([^"]*)"$`, func(ctx context.Context, path, csv string) error {
		w := From(ctx)
		v, ok, err := w.Field(path)
		if err != nil {
			return err
		}
		var want []any
		for _, s := range strings.Split(csv, ",") {
			want = append(want, strings.TrimSpace(s))
		}
		r, _ := w.LastResponse()
		return w.Assert(ok && reflect.DeepEqual(v, want), "expected %s to list exactly %v, got %s: %s", path, want, describe(v, ok), r)
	})
}
