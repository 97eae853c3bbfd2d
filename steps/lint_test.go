package steps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoAssertionIsPadding: an assertion whose condition is the constant
// true checks nothing, yet it would count toward the vacuous-pass rule. Every
// step asserts a condition computed from what the host sent.
func TestNoAssertionIsPadding(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Assert" {
				return true
			}
			if id, ok := call.Args[0].(*ast.Ident); ok && id.Name == "true" {
				t.Errorf("%s: Assert(true, ...) asserts nothing; assert the condition itself", fset.Position(call.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStepsNeverSeeGodog: family step packages register through the
// Catalog, whose wrapper classifies every error; a step bound with godog
// directly would escape that.
func TestStepsNeverSeeGodog(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == "." {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "cucumber/godog") {
				t.Errorf("%s imports godog; register steps through steps.Catalog", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStepsDoNotImportTheReferenceHost: steps drive a host through its
// binding and the fakes the suite runs (peers/); an answer or a fake taken
// from the reference host's code would let the suite agree with itself.
func TestStepsDoNotImportTheReferenceHost(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "parley-conformance/parley/refhost") {
				t.Errorf("%s imports %s; use peers/ and the binding", path, imp.Path.Value)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
