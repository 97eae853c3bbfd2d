package version

import "testing"

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.3", "1.0", -1}, {"1.10", "1.9", 1}, {"1.0", "1.0", 0}, {"1.0.1", "1.0", 1},
		{"2025-03-26", "2025-06-18", -1}, {"2026-01-01", "2025-11-25", 1}, {"2025-11-25", "2025-11-25", 0},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
