package contractrefine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// checker is a small assertion vocabulary on the standard library, so these
// tests build with nothing beyond the module's own requirements.
// expect(t) records a failure and continues; must(t) stops the test.
type checker struct {
	t     testing.TB
	fatal bool
}

func expect(t testing.TB) checker { return checker{t, false} }
func must(t testing.TB) checker   { return checker{t, true} }

func (c checker) fail(msg []any, format string, args ...any) {
	c.t.Helper()
	text := fmt.Sprintf(format, args...)
	if len(msg) > 0 {
		if f, ok := msg[0].(string); ok {
			text = fmt.Sprintf(f, msg[1:]...) + ": " + text
		}
	}
	if c.fatal {
		c.t.Fatal(text)
	}
	c.t.Error(text)
}

func (c checker) Equal(want, got any, msg ...any) {
	c.t.Helper()
	if !reflect.DeepEqual(want, got) {
		c.fail(msg, "not equal\nwant: %#v\ngot:  %#v", want, got)
	}
}

func (c checker) NotEqual(a, b any, msg ...any) {
	c.t.Helper()
	if reflect.DeepEqual(a, b) {
		c.fail(msg, "both are %#v", a)
	}
}

func (c checker) True(v bool, msg ...any) {
	c.t.Helper()
	if !v {
		c.fail(msg, "want true")
	}
}

func (c checker) False(v bool, msg ...any) {
	c.t.Helper()
	if v {
		c.fail(msg, "want false")
	}
}

func (c checker) NoError(err error, msg ...any) {
	c.t.Helper()
	if err != nil {
		c.fail(msg, "unexpected error: %v", err)
	}
}

func (c checker) ErrorContains(err error, sub string, msg ...any) {
	c.t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		c.fail(msg, "want an error containing %q, got %v", sub, err)
	}
}

func (c checker) NotNil(v any, msg ...any) {
	c.t.Helper()
	if isNil(v) {
		c.fail(msg, "want non-nil")
	}
}

func (c checker) Len(v any, n int, msg ...any) {
	c.t.Helper()
	if got := reflect.ValueOf(v).Len(); got != n {
		c.fail(msg, "want length %d, got %d: %#v", n, got, v)
	}
}

func (c checker) Empty(v any, msg ...any) {
	c.t.Helper()
	if !isEmpty(v) {
		c.fail(msg, "want empty, got %#v", v)
	}
}

func (c checker) NotEmpty(v any, msg ...any) {
	c.t.Helper()
	if isEmpty(v) {
		c.fail(msg, "want non-empty")
	}
}

func (c checker) Zero(v any, msg ...any) {
	c.t.Helper()
	if !reflect.ValueOf(v).IsZero() {
		c.fail(msg, "want zero, got %#v", v)
	}
}

func (c checker) Contains(container, elem any, msg ...any) {
	c.t.Helper()
	if !contains(container, elem) {
		c.fail(msg, "%#v does not contain %#v", container, elem)
	}
}

func (c checker) NotContains(container, elem any, msg ...any) {
	c.t.Helper()
	if contains(container, elem) {
		c.fail(msg, "%#v contains %#v", container, elem)
	}
}

// ElementsMatch compares two slices as multisets.
func (c checker) ElementsMatch(want, got any, msg ...any) {
	c.t.Helper()
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	used := make([]bool, g.Len())
	ok := w.Len() == g.Len()
	for i := 0; ok && i < w.Len(); i++ {
		found := false
		for j := range used {
			if !used[j] && reflect.DeepEqual(w.Index(i).Interface(), g.Index(j).Interface()) {
				used[j], found = true, true
				break
			}
		}
		ok = found
	}
	if !ok {
		c.fail(msg, "elements differ\nwant: %#v\ngot:  %#v", want, got)
	}
}

func (c checker) JSONEq(want, got string, msg ...any) {
	c.t.Helper()
	var w, g any
	if err := errors.Join(json.Unmarshal([]byte(want), &w), json.Unmarshal([]byte(got), &g)); err != nil {
		c.fail(msg, "invalid JSON: %v", err)
		return
	}
	if !reflect.DeepEqual(w, g) {
		c.fail(msg, "JSON differs\nwant: %s\ngot:  %s", want, got)
	}
}

func (c checker) Regexp(re *regexp.Regexp, s string, msg ...any) {
	c.t.Helper()
	if !re.MatchString(s) {
		c.fail(msg, "%q does not match %s", s, re)
	}
}

func (c checker) NoFileExists(path string, msg ...any) {
	c.t.Helper()
	if _, err := os.Stat(path); err == nil {
		c.fail(msg, "file %s exists", path)
	}
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Pointer, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

func isEmpty(v any) bool {
	if isNil(v) {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array, reflect.Chan:
		return rv.Len() == 0
	}
	return rv.IsZero()
}

func contains(container, elem any) bool {
	if s, ok := container.(string); ok {
		e, ok := elem.(string)
		return ok && strings.Contains(s, e)
	}
	rv := reflect.ValueOf(container)
	switch rv.Kind() {
	case reflect.Map:
		k := reflect.ValueOf(elem)
		return k.Type().AssignableTo(rv.Type().Key()) && rv.MapIndex(k).IsValid()
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			if reflect.DeepEqual(rv.Index(i).Interface(), elem) {
				return true
			}
		}
	}
	return false
}
