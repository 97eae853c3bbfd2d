package main

import (
	"bytes"
	"regexp"
	"testing"
)

// TestVersionNamesTheBuild: `parley --version` and `parley version` print
// the module version, the commit and the dirty flag from the build info.
func TestVersionNamesTheBuild(t *testing.T) {
	t.Parallel()
	want := regexp.MustCompile(`^parley \S+\ncommit ([0-9a-f]{12,40}|unknown)\ndirty (true|false)\n$`)
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !want.Match(out.Bytes()) {
			t.Errorf("%v printed %q", args, out.String())
		}
	}
}
