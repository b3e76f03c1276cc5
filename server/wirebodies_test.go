package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestHandlersDecodeWireTypes: every JSON body a handler decodes strictly
// (readJSON, decodeStrict) is decoded into a type of package wire, the one
// definition the SDK encodes too (docs/design.md, package map). A body
// type declared here instead would drift from the SDK's unseen. Allowed
// besides: a type parameter of the enclosing function (generic handlers,
// instantiated with wire types) and a map (a free-form JSON object such as
// the checkpoint filter, which has no members to define).
func TestHandlersDecodeWireTypes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "readJSON" { // readJSON passes its v on
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isDecodeCall(call) {
					return true
				}
				calls++
				at := fset.Position(call.Pos())
				v := decodeTarget(call.Args[len(call.Args)-1])
				if v == "" {
					t.Errorf("%s: %s decodes into an expression, not a variable of a wire type", at, fn.Name.Name)
					return true
				}
				typ := varType(fn, v)
				if !allowedBodyType(fn, typ) {
					t.Errorf("%s: %s decodes %s into %s; body types are defined in fsm/wire", at, fn.Name.Name, v, exprString(typ))
				}
				return true
			})
		}
	}
	if calls < 20 {
		t.Fatalf("found only %d decode calls: has the decoding moved?", calls)
	}
}

func isDecodeCall(call *ast.CallExpr) bool {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name == "decodeStrict"
	case *ast.SelectorExpr:
		return f.Sel.Name == "readJSON"
	}
	return false
}

// decodeTarget is the variable v of a decode call's last argument, &v or v.
func decodeTarget(e ast.Expr) string {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// varType is the type of "var v T" in fn, or nil.
func varType(fn *ast.FuncDecl, v string) ast.Expr {
	var typ ast.Expr
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		for _, name := range vs.Names {
			if name.Name == v {
				typ = vs.Type
			}
		}
		return true
	})
	return typ
}

func allowedBodyType(fn *ast.FuncDecl, typ ast.Expr) bool {
	switch t := typ.(type) {
	case *ast.SelectorExpr:
		pkg, ok := t.X.(*ast.Ident)
		return ok && pkg.Name == "wire"
	case *ast.MapType:
		return true
	case *ast.Ident:
		if fn.Type.TypeParams == nil {
			return false
		}
		for _, f := range fn.Type.TypeParams.List {
			for _, n := range f.Names {
				if n.Name == t.Name {
					return true
				}
			}
		}
	}
	return false
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case nil:
		return "a variable not declared with var"
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.StructType:
		return "an anonymous struct"
	}
	return "a type that is not one of package wire"
}
