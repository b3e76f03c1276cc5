package server

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/getkin/kin-openapi/openapi3"
)

// describedRoutes is every route of the route table with its descriptor,
// by "METHOD pattern".
func describedRoutes() map[string]route {
	s := &Server{cfg: Config{Faults: &node.Faults{}}}
	out := map[string]route{}
	for pattern, methods := range s.routeTable() {
		for m, rt := range methods {
			out[m+" "+pattern] = rt
		}
	}
	return out
}

// TestWriteRoutesDescribeTheirCommands: every write route is registered
// with its command descriptor (proposes), and names only kinds of fsm's
// command table.
func TestWriteRoutesDescribeTheirCommands(t *testing.T) {
	known := map[fsm.Kind]bool{}
	for _, k := range fsm.Kinds() {
		known[k] = true
	}
	writes := 0
	for r, rt := range describedRoutes() {
		if rt.kind != routeWrite && rt.kind != routeLongWrite {
			continue
		}
		writes++
		if rt.cmd == nil {
			t.Errorf("%s is a write route registered without its descriptor: add cmd(body, kinds...)", r)
			continue
		}
		for _, k := range rt.cmd.kinds {
			if !known[k] {
				t.Errorf("%s proposes %q, which is not in fsm's command table", r, k)
			}
		}
	}
	if writes < 40 {
		t.Fatalf("found %d write routes; the route table was not read", writes)
	}
}

// TestEveryKindIsProposed: every kind of fsm's command table is proposed
// by a route (its descriptor) or by a node itself (a call of the replica
// facade's ProposeOwn or Command, or fsm.NewCommand, naming the kind, in
// server/ or the chunk plane). A kind nothing proposes is a command
// whose route was forgotten.
func TestEveryKindIsProposed(t *testing.T) {
	proposed := map[fsm.Kind]string{}
	for r, rt := range describedRoutes() {
		if rt.cmd != nil {
			for _, k := range rt.cmd.kinds {
				proposed[k] = r
			}
		}
	}
	for _, dir := range []string{".", "core/chunkplane"} {
		for k, at := range nodeProposals(t, dir) {
			if _, ok := proposed[k]; !ok {
				proposed[k] = at
			}
		}
	}
	var missing []string
	for _, k := range fsm.Kinds() {
		if _, ok := proposed[k]; !ok {
			missing = append(missing, string(k))
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("nothing proposes %s: give its route a descriptor, cmd(body, fsm.Kind...), or propose it from a node's loop", k)
	}
}

// nodeProposals returns the kinds named in the arguments of ProposeOwn,
// Command or NewCommand calls in dir's non-test files, with where.
func nodeProposals(t *testing.T, dir string) map[fsm.Kind]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := kindConsts(t)
	fset := token.NewFileSet()
	out := map[fsm.Kind]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains([]string{"ProposeOwn", "Command", "NewCommand"}, fn.Sel.Name) {
				return true
			}
			for _, a := range call.Args {
				if sel, ok := a.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Kind") {
					if k, ok := kinds[sel.Sel.Name]; ok {
						out[k] = fset.Position(call.Pos()).String()
					}
				}
			}
			return true
		})
	}
	return out
}

// kindConsts maps the names of fsm's Kind constants to their values,
// read from fsm's source.
func kindConsts(t *testing.T) map[string]fsm.Kind {
	t.Helper()
	files, err := filepath.Glob("../fsm/*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fsm.Kind{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				v := sp.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Kind" {
					continue
				}
				for i, n := range v.Names {
					if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name] = fsm.Kind(strings.Trim(lit.Value, "`\""))
					}
				}
			}
		}
	}
	if len(out) < len(fsm.Kinds()) {
		t.Fatalf("read %d Kind constants from fsm's source, the table has %d kinds", len(out), len(fsm.Kinds()))
	}
	return out
}

// TestOpenAPIRequestBodies: for every route whose descriptor names a
// request body, docs/openapi.yaml (or openapi-internal.yaml) documents a
// JSON request body whose members are the body type's JSON fields, no
// more and no fewer; a route without one documents no JSON body.
func TestOpenAPIRequestBodies(t *testing.T) {
	docs := []*openapi3.T{loadOpenAPI(t), loadOpenAPIInternal(t)}
	checked := 0
	for r, rt := range describedRoutes() {
		if rt.cmd == nil {
			continue
		}
		method, pattern, _ := strings.Cut(r, " ")
		op := specOperation(t, docs, method, pattern)
		if op == nil {
			t.Errorf("%s: no operation in the spec (TestOpenAPIRoutes says more)", r)
			continue
		}
		var schema *openapi3.Schema
		if op.RequestBody != nil && op.RequestBody.Value != nil {
			if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
				schema = mt.Schema.Value
			}
		}
		if rt.cmd.body == nil {
			continue // no JSON body, or one the handler does not decode
		}
		checked++
		if schema == nil {
			t.Errorf("%s decodes %T, but the spec documents no JSON request body", r, rt.cmd.body)
			continue
		}
		want := jsonFields(reflect.TypeOf(rt.cmd.body))
		got := schemaProperties(schema)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the spec's request body has members %v, %T has %v", r, got, rt.cmd.body, want)
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d request bodies; the descriptors were not read", checked)
	}
}

// specOperation finds the operation of method and ServeMux pattern.
func specOperation(t *testing.T, docs []*openapi3.T, method, pattern string) *openapi3.Operation {
	t.Helper()
	for _, doc := range docs {
		for path, item := range doc.Paths.Map() {
			p, err := specPattern(path, item)
			if err != nil || p != pattern {
				continue
			}
			if op := item.GetOperation(method); op != nil {
				return op
			}
		}
	}
	return nil
}

// schemaProperties returns the sorted member names a schema documents,
// through allOf.
func schemaProperties(s *openapi3.Schema) []string {
	set := map[string]bool{}
	var walk func(*openapi3.Schema)
	walk = func(s *openapi3.Schema) {
		for name := range s.Properties {
			set[name] = true
		}
		for _, sub := range s.AllOf {
			if sub.Value != nil {
				walk(sub.Value)
			}
		}
	}
	walk(s)
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// jsonFields returns the sorted JSON member names of struct type t, the
// fields of embedded structs included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestMemberMetaBody: the member meta route takes the two addresses its
// spec lists and refuses other members, as every strictly decoded body
// does (it decoded the member-add body, and so took "voter" and "id" and
// ignored them).
func TestMemberMetaBody(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	addrs := fmt.Sprintf(`"raft_addr":%q,"http_addr":%q`, c.nodes[leader].node.RaftAddr(), c.nodes[leader].httpAddr)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{` + addrs + `}`, http.StatusOK},
		{`{` + addrs + `,"voter":false}`, http.StatusBadRequest},
		{`{` + addrs + `,"id":"n9"}`, http.StatusBadRequest},
	} {
		status, _, body := c.do(t, leader, "PUT", "/v1/cluster/members/"+c.nodes[leader].id+"/meta", tc.body, adminAuth())
		if status != tc.want {
			t.Errorf("PUT meta %s: got %d %s, want %d", tc.body, status, body, tc.want)
		}
	}
}
