package agl

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStepsDoNotImportTheReferenceHost: the AGL steps drive a host through
// the binding and the fakes the suite runs (peers/fakemail); they never
// reach into the reference host's code for an answer or a fake.
func TestStepsDoNotImportTheReferenceHost(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/parley-conformance/parley/refhost") {
				t.Errorf("%s imports %s: the steps use the suite's own fakes (peers/) and the binding, not the reference host", f, p)
			}
		}
	}
}
