package refhost

import (
	"os"
	"testing"
)

// A start that fails removes the temporary data directory it made: a run
// that hands a host configurations it rejects must not fill the disk.
func TestAFailedStartLeavesNoDataDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, cfg := range []string{
		`{"no-such-family": {}}`,
		`{"openwop": {}, "zz-unknown-family": {}}`, // fails after opening a family
	} {
		if h, err := Start(Options{Config: []byte(cfg)}); err == nil {
			h.Close()
			t.Fatalf("%s: started", cfg)
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("a failed start left %s", e.Name())
	}
}
