package einostore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// docs/frameworks.md's ```go blocks are checked as docs/sdkdoc_test.go
// checks sdk.md's (that test lives in the root module, which cannot import
// Eino): each compiles as the body of a function given ctx, c
// (*client.Client) and err, plus what an HTML comment just above it
// declares (<!-- given: store *einostore.Store -->). Only "declared and
// not used" and "imported and not used" are forgiven.
const docPage = "../../../docs/frameworks.md"

var (
	docBlockRE = regexp.MustCompile("(?s)(?:<!--\\s*given:([^>]*)-->\\s*\\n)?```go\\n(.*?)```")
	docImports = []string{"context", "errors", "fmt", "log", "os", "time",
		"github.com/baton-dev/baton/client",
		"github.com/baton-dev/baton/client/frameworks/einostore",
		"github.com/cloudwego/eino/adk",
		"github.com/cloudwego/eino/compose"}
	docForgiven = regexp.MustCompile(`declared and not used|imported and not used`)
)

type docBlock struct {
	line        int
	given, body string
}

func wrapDocBlock(i int, blk docBlock) (src string, bodyLine int) {
	var sb strings.Builder
	sb.WriteString("package frameworksdoc\n\nimport (\n")
	for _, p := range docImports {
		fmt.Fprintf(&sb, "\t%q\n", p)
	}
	sb.WriteString(")\n\n")
	fmt.Fprintf(&sb, "func block%d(ctx context.Context, c *client.Client, err error) error {\n", i)
	for _, g := range strings.Split(blk.given, ";") {
		if g = strings.TrimSpace(g); g != "" {
			fmt.Fprintf(&sb, "\tvar %s\n", g)
		}
	}
	sb.WriteString("\t{\n")
	bodyLine = strings.Count(sb.String(), "\n") + 1
	sb.WriteString(blk.body)
	sb.WriteString("\t}\n\treturn err\n}\n")
	return sb.String(), bodyLine
}

// docImporter imports packages from the export data of go list -export.
func docImporter(t *testing.T, fset *token.FileSet) types.Importer {
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, docImports...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
}

// checkDocBlock type-checks one block and returns its errors, with the
// page's line numbers.
func checkDocBlock(fset *token.FileSet, imp types.Importer, i int, blk docBlock) []string {
	src, bodyLine := wrapDocBlock(i, blk)
	f, err := parser.ParseFile(fset, fmt.Sprintf("block%d.go", i), src, 0)
	if err != nil {
		return []string{fmt.Sprintf("frameworks.md:%d: block does not parse: %v", blk.line, err)}
	}
	var errs []string
	conf := types.Config{Importer: imp, Error: func(err error) {
		te := err.(types.Error)
		if docForgiven.MatchString(te.Msg) {
			return
		}
		errs = append(errs, fmt.Sprintf("frameworks.md:%d: %s", blk.line+te.Fset.Position(te.Pos).Line-bodyLine, te.Msg))
	}}
	_, _ = conf.Check("frameworksdoc", fset, []*ast.File{f}, nil)
	return errs
}

func TestFrameworksDocCompiles(t *testing.T) {
	b, err := os.ReadFile(docPage)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, m := range docBlockRE.FindAllSubmatchIndex(b, -1) {
		blk := docBlock{line: 1 + bytes.Count(b[:m[4]], []byte("\n")), body: string(b[m[4]:m[5]])}
		if m[2] >= 0 {
			blk.given = strings.TrimSpace(string(b[m[2]:m[3]]))
		}
		blocks = append(blocks, blk)
	}
	if len(blocks) < 4 {
		t.Fatalf("found %d go blocks in frameworks.md, want at least 4: did the fences change?", len(blocks))
	}
	fset := token.NewFileSet()
	imp := docImporter(t, fset)
	for i, blk := range blocks {
		for _, e := range checkDocBlock(fset, imp, i, blk) {
			t.Error(e)
		}
	}
	// The check does catch a wrong call.
	bad := docBlock{body: "\t_, err = einostore.New(c, \"acme\")\n"}
	if errs := checkDocBlock(fset, imp, len(blocks), bad); len(errs) == 0 {
		t.Error("no error reported for a call with a missing argument")
	}
}
