package docs

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The layers of docs/design.md's "Package map", lowest first. A package
// imports Baton packages of lower layers only; the harness (chaos/, bench/)
// may also import its own kind (chaos from chaos, bench from bench). Every
// package must be listed here: a new one gets a layer, and a line in the
// map, before it builds a dependency nobody chose.
var layers = []struct {
	name     string
	packages []string // import paths below the module, a trailing /... for a subtree
}{
	{"wire", []string{"fsm/wire", "client/internal/cdc", "client/internal/backoff", "client/internal/transport"}},
	{"leaf", []string{"fsm", "client", "server/core/tlsconf", "server/core/chunkstore", "server/core/metricsink",
		"cmd/internal/buildinfo", "cmd/internal/gctune", "server/console", "docs"}},
	{"test support", []string{"chaos/artifactfake"}},
	{"sdk", []string{"client/concurrency"}},
	{"raft", []string{"server/core/node"}},
	{"replica", []string{"server/core/replica"}},
	{"chunk plane", []string{"server/core/chunkplane"}},
	{"mcp", []string{"server/mcpserver"}},
	{"http", []string{"server"}},
	{"launcher", []string{"cmd/batond/cluster"}},
	{"sdk test support", []string{"client/internal/clustertest"}},
	{"binaries", []string{"cmd/batond", "cmd/baton"}},
	{"harness", []string{"chaos/...", "bench/...", "deploy/..."}},
}

const module = "github.com/baton-dev/baton"

// layerOf returns the index of p's layer (p below the module), or -1.
func layerOf(p string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, q := range l.packages {
			match := p == q
			if prefix, ok := strings.CutSuffix(q, "/..."); ok {
				match = p == prefix || strings.HasPrefix(p, prefix+"/")
			}
			if match && len(q) > bestLen { // the most specific entry wins
				best, bestLen = i, len(q)
			}
		}
	}
	return best
}

// top is p's first path element: chaos, bench, server, ...
func top(p string) string { first, _, _ := strings.Cut(p, "/"); return first }

type goPackage struct {
	ImportPath string
	Imports    []string
}

// goList runs go list -json with args in dir and returns the packages.
func goList(t *testing.T, dir string, args ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v in %s: %v\n%s", args, dir, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// own strips the module's prefix; ok is false for other modules' packages.
func own(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// TestImportGraph keeps the package map true: no package imports a higher
// layer (or its own, outside the harness); chaos and bench, black-box
// harnesses, import no server/ or fsm package (but fsm/wire, the API's
// vocabulary) and not each other; and the
// binaries depend, even indirectly, on nothing under chaos/ or bench/.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go list of the whole tree")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goList(t, root, "./...")
	if peers := filepath.Join(root, "bench", "peers"); fileExists(filepath.Join(peers, "go.mod")) {
		pkgs = append(pkgs, goList(t, peers, "./...")...) // a module of its own, same rules
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		from, _ := own(p.ImportPath)
		lf := layerOf(from)
		if lf < 0 {
			t.Errorf("%s is in no layer: give it one in docs/imports_test.go and a line in docs/design.md's package map", from)
			continue
		}
		for _, imp := range p.Imports {
			to, ok := own(imp)
			if !ok {
				continue
			}
			lt := layerOf(to)
			switch {
			case lt < 0:
				t.Errorf("%s imports %s, which is in no layer", from, to)
			case layers[lf].name == "harness":
				if (top(to) == "server" || top(to) == "fsm") && layers[lt].name != "wire" {
					t.Errorf("%s imports %s: the harness sees the server only from outside (client, cmd/batond/cluster)", from, to)
				}
				if lt == lf && top(to) != top(from) {
					t.Errorf("%s imports %s: chaos and bench are separate harnesses", from, to)
				}
			case lt >= lf:
				t.Errorf("%s (layer %q) imports %s (layer %q): only lower layers may be imported", from, layers[lf].name, to, layers[lt].name)
			}
		}
	}
	for _, bin := range []string{"./cmd/batond", "./cmd/baton"} {
		for _, p := range goList(t, root, "-deps", bin) {
			if q, ok := own(p.ImportPath); ok && (top(q) == "chaos" || top(q) == "bench") {
				t.Errorf("%s depends on %s: the production binaries carry no test harness", bin, q)
			}
		}
	}
}

// TestPackageMapNamesEveryPackage fails when docs/design.md's package map
// leaves out a package of the tree, or names one that is gone.
func TestPackageMapNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Package map\n")
	if !ok {
		t.Fatal(`docs/design.md has no "## Package map" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:cmd|fsm|server|client|chaos|bench|deploy)[a-z0-9/]*)/?`").FindAllStringSubmatch(section, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goList(t, root, "./...")
	if peers := filepath.Join(root, "bench", "peers"); fileExists(filepath.Join(peers, "go.mod")) {
		pkgs = append(pkgs, goList(t, peers, "./...")...)
	}
	var listed []string
	for _, p := range pkgs {
		if q, ok := own(p.ImportPath); ok && q != "docs" && q != "" {
			listed = append(listed, q)
		}
	}
	if len(listed) < 10 {
		t.Fatalf("go list found %d packages", len(listed))
	}
	for _, q := range listed {
		if !named[q] && !named[parentListed(q, named)] {
			t.Errorf("the package map does not name %s (nor a parent of it)", q)
		}
	}
	for q := range named {
		if !slices.ContainsFunc(listed, func(p string) bool { return p == q || strings.HasPrefix(p, q+"/") }) {
			t.Errorf("the package map names %s, which is no package of the tree", q)
		}
	}
}

// parentListed returns the nearest parent of q that the map names, or "".
// The harness's packages may be named by their tree (chaos/, bench/).
func parentListed(q string, named map[string]bool) string {
	for p := filepath.ToSlash(filepath.Dir(q)); p != "." && p != "/"; p = filepath.ToSlash(filepath.Dir(p)) {
		if named[p] && (top(p) == "chaos" || top(p) == "bench") {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
