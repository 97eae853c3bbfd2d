package wire

import (
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	for _, c := range []struct {
		supported []string
		ask, want string
	}{
		{[]string{"0.3", "1.0"}, "1.0", "1.0"},
		{[]string{"0.3", "1.0"}, "0.5", "0.3"},
		{[]string{"1.0", "0.3"}, "2.0", "1.0"},
		{[]string{"0.3", "1.0"}, "0.1", "1.0"},
		{[]string{"2025-03-26", "2025-06-18"}, "2025-11-25", "2025-06-18"},
	} {
		if got, ok := Choose(c.supported, c.ask); !ok || got != c.want {
			t.Errorf("Choose(%v, %q) = %q, want %q", c.supported, c.ask, got, c.want)
		}
	}
	if _, ok := Choose(nil, "1.0"); ok {
		t.Error("an empty set chooses nothing")
	}
}

func TestReadLimited(t *testing.T) {
	if _, err := ReadLimited(strings.NewReader("abcd"), 4); err != nil {
		t.Error(err)
	}
	if _, err := ReadLimited(strings.NewReader("abcde"), 4); err == nil {
		t.Error("over-limit body accepted")
	}
}
