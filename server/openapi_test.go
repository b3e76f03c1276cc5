package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/server/core/node"
	"github.com/getkin/kin-openapi/openapi3"
)

// openAPIFile is the API contract these tests hold the server to, and
// openAPIInternalFile the routes nodes call on each other, kept out of the
// public document; together they describe every route.
const (
	openAPIFile         = "../docs/openapi.yaml"
	openAPIInternalFile = "../docs/openapi-internal.yaml"
	internalPrefix      = "/v1/internal/"
)

// loadOpenAPI loads and validates docs/openapi.yaml, once for the whole
// package (about a second under -race). The document is shared: a test
// that changes it (newSpecChecker) loads a copy of its own.
func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) { return loadSpec(openAPIFile) })

// loadOpenAPIInternal loads docs/openapi-internal.yaml, whose shared
// components are references into openapi.yaml.
func loadOpenAPIInternal(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openAPIInternalDoc()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

var openAPIInternalDoc = sync.OnceValues(func() (*openapi3.T, error) { return loadSpec(openAPIInternalFile) })

func loadSpec(file string) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	doc, err := loader.LoadFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %v", file, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %v", file, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("%s declares openapi %q, want 3.1", file, doc.OpenAPI)
	}
	return doc, nil
}

// servedRoutes is every "METHOD pattern" the server registers, the
// failpoint routes included (they exist on a node started with
// --failpoints, and the spec documents them).
func servedRoutes() map[string]bool {
	s := &Server{cfg: Config{Faults: &node.Faults{}}}
	out := map[string]bool{}
	for pattern, methods := range s.routeTable() {
		for m := range methods {
			out[m+" "+pattern] = true
		}
	}
	return out
}

// specPattern is the ServeMux pattern an OpenAPI path stands for: its
// x-baton-pattern when it has one (a path whose last parameter takes the
// rest of the URL, or one of several paths a single pattern serves), else
// the path itself, which then uses the same {name} syntax as ServeMux.
func specPattern(path string, item *openapi3.PathItem) (string, error) {
	v, ok := item.Extensions["x-baton-pattern"]
	if !ok {
		return path, nil
	}
	p, ok := v.(string)
	if !ok || p == "" {
		return "", fmt.Errorf("%s: x-baton-pattern is %v, want a ServeMux pattern", path, v)
	}
	return p, nil
}

// documentedRoutes maps every "METHOD pattern" of the spec to the OpenAPI
// paths that document it.
func documentedRoutes(t *testing.T, doc *openapi3.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for path, item := range doc.Paths.Map() {
		pattern, err := specPattern(path, item)
		if err != nil {
			t.Error(err)
			continue
		}
		for method := range item.Operations() {
			key := strings.ToUpper(method) + " " + pattern
			out[key] = append(out[key], path)
		}
	}
	return out
}

// TestOpenAPIRoutes checks that every route the server registers is
// documented in docs/openapi.yaml or, for the /v1/internal/ routes, in
// docs/openapi-internal.yaml, and that every documented operation is a
// route the server registers, by method and ServeMux pattern. No route is
// in both files, and the public one has no internal route.
func TestOpenAPIRoutes(t *testing.T) {
	doc, internal := loadOpenAPI(t), loadOpenAPIInternal(t)
	served := servedRoutes()
	public, private := documentedRoutes(t, doc), documentedRoutes(t, internal)
	documented := map[string][]string{}
	for r, paths := range public {
		documented[r] = append(documented[r], paths...)
		if strings.Contains(r, " "+internalPrefix) {
			t.Errorf("%s documents %s, an internal route: it belongs in %s", openAPIFile, r, openAPIInternalFile)
		}
	}
	for r, paths := range private {
		documented[r] = append(documented[r], paths...)
		if !strings.Contains(r, " "+internalPrefix) {
			t.Errorf("%s documents %s, which is not under %s: it belongs in %s", openAPIInternalFile, r, internalPrefix, openAPIFile)
		}
		if len(public[r]) > 0 {
			t.Errorf("%s is documented in both %s and %s", r, openAPIFile, openAPIInternalFile)
		}
	}
	if len(private) == 0 {
		t.Fatalf("%s documents no route", openAPIInternalFile)
	}
	if len(served) < 50 {
		t.Fatalf("the server registers %d routes; the route table was not read", len(served))
	}
	var undocumented, unserved []string
	for r := range served {
		if len(documented[r]) == 0 {
			undocumented = append(undocumented, r)
		}
	}
	for r, paths := range documented {
		if !served[r] {
			unserved = append(unserved, fmt.Sprintf("%s (documented as %s)", r, strings.Join(paths, ", ")))
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unserved)
	for _, r := range undocumented {
		t.Errorf("the server registers %s, which %s does not document", r, openAPIFile)
	}
	for _, r := range unserved {
		t.Errorf("%s documents %s, which the server does not register", openAPIFile, r)
	}
}

// TestOpenAPIPathsReachTheirPattern checks that each OpenAPI path, filled
// with sample parameter values, is served by the pattern the spec says it
// is: an x-baton-pattern cannot name a route that serves other URLs.
func TestOpenAPIPathsReachTheirPattern(t *testing.T) {
	paths := map[string]*openapi3.PathItem{}
	for _, doc := range []*openapi3.T{loadOpenAPI(t), loadOpenAPIInternal(t)} {
		for path, item := range doc.Paths.Map() {
			paths[path] = item
		}
	}
	patterns := map[string]bool{}
	for r := range servedRoutes() {
		_, pattern, _ := strings.Cut(r, " ")
		patterns[pattern] = true
	}
	mux := http.NewServeMux()
	for pattern := range patterns {
		mux.Handle(pattern, http.NotFoundHandler())
	}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	samples := map[string]string{
		"version":     "3",
		"digest":      "sha256:" + strings.Repeat("ab", 32),
		"artifact_id": "sha256:" + strings.Repeat("cd", 32),
		"key":         "dir/leaf",
		"ref":         "report-42/approved",
	}
	for path, item := range paths {
		want, err := specPattern(path, item)
		if err != nil {
			t.Error(err)
			continue
		}
		url := param.ReplaceAllStringFunc(path, func(m string) string {
			if v, ok := samples[m[1:len(m)-1]]; ok {
				return v
			}
			return "p-" + m[1:len(m)-1]
		})
		_, got := mux.Handler(httptest.NewRequest(http.MethodGet, url, nil))
		if got != want {
			t.Errorf("%s (as %s) is served by pattern %q, want %q", path, url, got, want)
		}
	}
}

// TestOpenAPIServers: the public document's servers are the nodes that
// `make run` (batond local, TLS by default) serves: https on 7001-7003.
func TestOpenAPIServers(t *testing.T) {
	var got []string
	for _, s := range loadOpenAPI(t).Servers {
		got = append(got, s.URL)
	}
	want := []string{"https://127.0.0.1:7001", "https://127.0.0.1:7002", "https://127.0.0.1:7003"}
	if !slices.Equal(got, want) {
		t.Errorf("%s servers %v, want %v (what make run serves)", openAPIFile, got, want)
	}
}

// TestOpenAPIErrorCodes checks that the spec's ErrorCode enum is the set
// of codes in the server's status table (server/errors.go), and that its
// x-baton-status gives each code the status the server answers it with.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatalf("%s has no components.schemas.ErrorCode", openAPIFile)
	}
	var enum []string
	for _, v := range ref.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("ErrorCode enum holds %v (%T), want strings", v, v)
		}
		enum = append(enum, s)
	}
	var table []string
	for code := range statusOf {
		table = append(table, code)
	}
	sort.Strings(enum)
	sort.Strings(table)
	if !slices.Equal(enum, table) {
		t.Errorf("ErrorCode enum in %s:\n  %v\nserver/errors.go statusOf:\n  %v", openAPIFile, enum, table)
	}

	statuses, ok := ref.Value.Extensions["x-baton-status"].(map[string]any)
	if !ok {
		t.Fatalf("ErrorCode has no x-baton-status map (got %T)", ref.Value.Extensions["x-baton-status"])
	}
	for code, want := range statusOf {
		got, ok := statuses[code].(float64)
		if !ok || int(got) != want {
			t.Errorf("x-baton-status[%s] = %v, want %d", code, statuses[code], want)
		}
	}
	for code := range statuses {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("x-baton-status names %q, which is not a code of the server's table", code)
		}
	}

	// The error object's code is that enum.
	errSchema := doc.Components.Schemas["Error"]
	if errSchema == nil || errSchema.Value.Properties["error"] == nil {
		t.Fatalf("%s has no Error schema with an error property", openAPIFile)
	}
	if code := errSchema.Value.Properties["error"].Value.Properties["code"]; code == nil || code.Ref != "#/components/schemas/ErrorCode" {
		t.Errorf("Error.error.code is not a $ref to ErrorCode")
	}
}
