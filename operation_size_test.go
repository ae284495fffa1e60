package httpretry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The most fields an operation may reach and the most methods it may
// have: the per-RoundTrip state stays small enough to hold in one's head,
// the attempt's own state and behaviour on *attempt, the hedging state
// and behaviour on *hedged.
const (
	maxOperationFields  = 25
	maxOperationMethods = 35
)

// TestOperationStaysSmall parses the package's library files and counts
// what the operation reaches: each named field is one, an embedded struct
// value counts with all the fields it reaches in turn, and a pointer is
// one field however much it points to; and the methods whose receiver is
// operation or *operation. Either over its maximum fails, so that neither
// grows back unnoticed.
func TestOperationStaysSmall(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == "httpretry" {
			files = append(files, f)
		}
	}
	structs := map[string]*ast.StructType{}
	methods := 0
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							structs[ts.Name.Name] = st
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && receiverName(d.Recv.List[0].Type) == "operation" {
					methods++
				}
			}
		}
	}
	op, ok := structs["operation"]
	if !ok {
		t.Fatal("no struct type operation in the package")
	}
	fields := reachableFields(op, structs, map[string]bool{"operation": true})
	t.Logf("operation: %d fields, %d methods", fields, methods)
	if fields > maxOperationFields {
		t.Errorf("operation reaches %d fields; want at most %d (per-attempt state belongs on *attempt, hedging's on *hedged)", fields, maxOperationFields)
	}
	if methods > maxOperationMethods {
		t.Errorf("operation has %d methods; want at most %d (an attempt's steps belong on *attempt, hedging's on *hedged)", methods, maxOperationMethods)
	}
	if fields < 10 || methods < 10 {
		t.Errorf("counted %d fields and %d methods: the count no longer sees the operation", fields, methods)
	}
}

// reachableFields counts the fields of st: one per name, and for an
// embedded struct value of the package (seen guards against a cycle) all
// the fields it reaches.
func reachableFields(st *ast.StructType, structs map[string]*ast.StructType, seen map[string]bool) int {
	n := 0
	for _, f := range st.Fields.List {
		if len(f.Names) > 0 {
			n += len(f.Names)
			continue
		}
		id, ok := f.Type.(*ast.Ident)
		if inner, known := structs[nameOf(id, ok)]; known && !seen[id.Name] {
			seen[id.Name] = true
			n += reachableFields(inner, structs, seen)
			continue
		}
		n++ // a pointer, or a type from another package
	}
	return n
}

func nameOf(id *ast.Ident, ok bool) string {
	if !ok {
		return ""
	}
	return id.Name
}

// receiverName is the name of a receiver's type, without its star.
func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
