// Package version orders the protocol versions the suite compares: A2A
// versions ("0.3" < "1.0" < "1.10") and MCP date revisions ("2025-03-26" <
// "2025-06-18"). The steps and the fake peers share it; the reference host
// keeps an order of its own, so that a mistake here cannot hide the same
// mistake there.
package version

import (
	"strconv"
	"strings"
)

// Compare splits a and b on dots and dashes, compares numeric parts as
// numbers and anything else as text; a version that extends another
// ("1.0.1" after "1.0") comes after it.
func Compare(a, b string) int {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.ParseUint(pa[i], 10, 64)
		nb, eb := strconv.ParseUint(pb[i], 10, 64)
		if ea == nil && eb == nil {
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			continue
		}
		if c := strings.Compare(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(pa) < len(pb):
		return -1
	case len(pa) > len(pb):
		return 1
	}
	return strings.Compare(a, b)
}
