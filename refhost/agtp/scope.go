package agtp

import (
	"fmt"
	"strings"
)

// covers reports whether a granted or claimed token g covers the needed
// token n: segment by segment, where '*' stands for one segment and a final
// '*' for one or more.
func covers(g, n string) bool {
	gs, ns := strings.Split(g, ":"), strings.Split(n, ":")
	for i, seg := range gs {
		if i >= len(ns) {
			return false
		}
		if seg == "*" {
			if i == len(gs)-1 {
				return true
			}
			continue
		}
		if seg != ns[i] {
			return false
		}
	}
	return len(gs) == len(ns)
}

func anyCovers(set []string, n string) bool {
	for _, g := range set {
		if covers(g, n) {
			return true
		}
	}
	return false
}

// parseClaim reads Authority-Scope: comma-separated tokens with optional
// white space.
func parseClaim(v string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !scopeRe.MatchString(t) {
			return nil, fmt.Errorf("scope token %q is malformed", t)
		}
		out = append(out, t)
	}
	return out, nil
}

// authority is the requester's resolved authority: what the identity
// document grants and what this request claims (the grant when unclaimed).
type authority struct {
	granted   []string
	effective []string
}

// lack is the first needed token the effective claim does not cover, and
// whether the identity document would have granted it (the obtainability
// rule: granted but unclaimed is 262 scope-required, not granted is 455
// scope-exceeded).
func (a authority) lack(needed []string) (token string, obtainable bool, ok bool) {
	for _, n := range needed {
		if !anyCovers(a.effective, n) {
			return n, anyCovers(a.granted, n), false
		}
	}
	return "", false, true
}
