package httpretry

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The package's public surface stays small enough to hold in one's head:
// at most maxExportedNames exported top-level names (every exported const,
// var, func and type counts, each name of a grouped declaration on its own;
// methods and struct fields do not), and `go doc -all` of the package at
// most maxDocLines lines. Longer explanations belong in docs/.
const (
	maxExportedNames = 60
	maxDocLines      = 800
)

// exportedNames returns the exported top-level names of the package's
// library files for this platform, sorted.
func exportedNames(t *testing.T) []string {
	t.Helper()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			names = append(names, declNames(decl)...)
		}
	}
	slices.Sort(names)
	return names
}

// declNames returns the exported names a top-level declaration adds to the
// package: none for a method.
func declNames(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			names = append(names, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// TestAPIExportsAtMost60Names counts the package's exported top-level
// names.
func TestAPIExportsAtMost60Names(t *testing.T) {
	names := exportedNames(t)
	t.Logf("%d exported names: %s", len(names), strings.Join(names, " "))
	if len(names) > maxExportedNames {
		t.Errorf("the package exports %d top-level names; want at most %d", len(names), maxExportedNames)
	}
}

// TestAPIDocAllIsAtMost800Lines counts the lines `go doc -all` prints for
// the package.
func TestAPIDocAllIsAtMost800Lines(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to count go doc's lines: %v", err)
	}
	out, err := exec.Command(goTool, "doc", "-all", ".").Output()
	if err != nil {
		t.Fatalf("go doc -all .: %v", err)
	}
	lines := strings.Count(string(out), "\n")
	t.Logf("go doc -all . prints %d lines", lines)
	if lines > maxDocLines {
		t.Errorf("go doc -all . prints %d lines; want at most %d", lines, maxDocLines)
	}
}
