package redlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The library package's size rules (#12): a function that does not fit on one screen,
// or a file too long to hold in one's head, is split into parts with names.
const (
	maxFuncLines = 60  // from the func keyword to the closing brace, both counted
	maxFileLines = 500 // every line of the file, comments included
)

// TestLibrarySizeRules parses the non-test Go files of the root package and fails on
// any function or method longer than maxFuncLines lines and any file longer than
// maxFileLines lines, so that the rule stays enforced as the library changes.
func TestLibrarySizeRules(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "redlock" {
			continue
		}
		checked++
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it", name, n, maxFileLines)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			from, to := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := to.Line - from.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s has %d lines, more than %d: split it", name, from.Line, funcName(fd), n, maxFuncLines)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no library file found: run the test from the package's directory")
	}
}

// funcName returns a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
