package server

import (
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestWriteRoutesRefuseDerived: what every write route must refuse, derived
// from the route table and each route's descriptor, so a new write route is
// held to it without a test of its own: no token is 401, a principal of
// the tenant without a grant for it (a KV reader) is 403, before its body
// is read (a route whose grant the body names checks first that the
// caller has some grant of the kind), and for a route
// whose descriptor names a JSON body, a body with a member its wire type
// does not have is 400 and a body over the limit is 413. None of them
// reaches the log: the state's applied index and digest are unchanged.
func TestWriteRoutesRefuseDerived(t *testing.T) {
	fx := newAPIFixture(t)
	f := fx.c.nodes[0].fsm
	// The task the task routes name, so that they get as far as the body.
	if st, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"x1","queue":"q"}`, adminAuth()); st != http.StatusCreated {
		t.Fatalf("create task x1: %d %s", st, b)
	}
	huge := `{"pad":"` + strings.Repeat("a", 9<<20) + `"}`
	routes := describedRoutes()
	names := make([]string, 0, len(routes))
	for r := range routes {
		names = append(names, r)
	}
	sort.Strings(names)
	checked := 0
	for _, r := range names {
		rt := routes[r]
		if (rt.kind != routeWrite && rt.kind != routeLongWrite) || rt.cmd == nil {
			continue
		}
		method, pattern, _ := strings.Cut(r, " ")
		path := derivedPath(pattern)
		type refusal struct {
			what    string
			body    any
			headers map[string]string
			status  int
		}
		var cases []refusal
		var empty any // a body that is no request: refused 400 if read before the grant is checked
		if rt.cmd.body != nil && reflect.TypeOf(rt.cmd.body).Kind() == reflect.Struct {
			empty = `{"no_such_member_x":1}`
			cases = append(cases, refusal{"a member its wire type does not have", `{"no_such_member_x":1}`, adminAuth(), 400},
				refusal{"a body over the limit", huge, adminAuth(), 413})
		}
		cases = append(cases, refusal{"no token", nil, nil, 401})
		if strings.HasPrefix(path, "/v1/tenants/acme/") {
			cases = append(cases, refusal{"a principal without the grant", empty, bearer(fx.reader), 403})
		}
		for _, tc := range cases {
			before := f.Status()
			status, _, resp := fx.c.do(t, 0, method, path, tc.body, tc.headers)
			if status != tc.status {
				t.Errorf("%s %s, %s: got %d %.200s, want %d", method, path, tc.what, status, resp, tc.status)
			}
			if after := f.Status(); after.AppliedIndex != before.AppliedIndex || after.StateDigest != before.StateDigest {
				t.Errorf("%s %s, %s: the state changed (applied %d to %d)", method, path, tc.what, before.AppliedIndex, after.AppliedIndex)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d refusals; the route table was not read", checked)
	}
	t.Logf("%d refusals checked", checked)
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)(\.\.\.)?\}`)

// derivedPath fills a route pattern's parameters: the fixture's tenant,
// a digest for a digest, an artifact's versions for a path (the one
// route parameter that spans segments), a name otherwise.
func derivedPath(pattern string) string {
	return pathParam.ReplaceAllStringFunc(pattern, func(p string) string {
		switch name := pathParam.FindStringSubmatch(p)[1]; name {
		case "tenant":
			return "acme"
		case "path":
			return "x1/versions"
		case "digest":
			return "sha256:" + strings.Repeat("ab", 32)
		default:
			return "x1"
		}
	})
}
