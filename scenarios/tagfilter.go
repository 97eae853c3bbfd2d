package scenarios

import (
	"fmt"
	"regexp"
	"strings"
)

// Filter is a tag expression in godog's syntax: "," is OR and binds loosest,
// "&&" is AND, "~" negates one tag. It is parsed here, not handed to godog
// raw, because godog silently matches nothing (or panics) on input it does not
// understand, and a filter that selects nothing must be a usage error rather
// than a green run.
type Filter struct {
	expr string
	alts [][]term // OR of ANDs
}

type term struct {
	tag    string // with its leading @
	negate bool
}

var (
	tagToken       = regexp.MustCompile(`^~?@[^\s,&~()@]+$`)
	cucumberSyntax = regexp.MustCompile(`(?i)(^|\s)(and|or|not)(\s|$)|[()]`)
)

// ParseFilter parses a godog tag expression. The empty expression matches
// every scenario.
func ParseFilter(expr string) (*Filter, error) {
	f := &Filter{expr: strings.TrimSpace(expr)}
	if f.expr == "" {
		return f, nil
	}
	if cucumberSyntax.MatchString(f.expr) {
		return nil, fmt.Errorf("tag filter %q uses Cucumber expression syntax; this suite takes godog's: ',' for OR, '&&' for AND, '~' for NOT (e.g. '@profile:x && ~@req:y')", expr)
	}
	for _, alt := range strings.Split(f.expr, ",") {
		var and []term
		for _, tok := range strings.Split(alt, "&&") {
			tok = strings.TrimSpace(tok)
			if !tagToken.MatchString(tok) {
				return nil, fmt.Errorf("tag filter %q: %q is not a tag (write @name or ~@name)", expr, tok)
			}
			t := term{tag: tok}
			if strings.HasPrefix(tok, "~") {
				t = term{tag: tok[1:], negate: true}
			}
			and = append(and, t)
		}
		f.alts = append(f.alts, and)
	}
	return f, nil
}

// String returns the expression as given, for godog.
func (f *Filter) String() string { return f.expr }

// Match reports whether a scenario with these tags is selected.
func (f *Filter) Match(tags []string) bool {
	if len(f.alts) == 0 {
		return true
	}
	has := map[string]bool{}
	for _, t := range tags {
		has[t] = true
	}
	for _, and := range f.alts {
		ok := true
		for _, t := range and {
			if has[t.tag] == t.negate {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
