package openwop

import (
	"strconv"
	"strings"
)

// compareVersions orders A2A versions ("0.3" < "1.0" < "1.10") and MCP date
// revisions ("2025-03-26" < "2025-06-18"): split on dots and dashes, compare
// numeric parts as numbers and anything else as text, and a version that
// extends another ("1.0.1" after "1.0") comes after it. The suite needs an
// order only to say whether a version the host answered lies below the
// preferred one it was configured with.
func compareVersions(a, b string) int {
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
