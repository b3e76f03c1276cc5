package docs

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

// The Go SDK page's ```go blocks are fragments of a tour. Each compiles as
// the body of a function that is given ctx (context.Context), c
// (*client.Client) and err (error), plus whatever an HTML comment just
// above the block declares, e.g. <!-- given: l *concurrency.Lease -->. The
// fragment may return an error. Only "declared and not used" and
// "imported and not used" are forgiven (a fragment shows a call, not what
// the caller does next); any other type error fails the test, as it would
// fail a reader who pasted the block.
var (
	goBlockRE = regexp.MustCompile("(?s)(?:<!--\\s*given:([^>]*)-->\\s*\\n)?```go\\n(.*?)```")
	// sdkDocImports are the packages a block may use without importing.
	sdkDocImports = []string{"bytes", "context", "encoding/json", "errors", "fmt", "io", "log", "os", "strings", "time",
		module + "/client", module + "/client/concurrency"}
)

type sdkBlock struct {
	line        int
	given, body string
}

func sdkBlocks(t *testing.T, page string) []sdkBlock {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []sdkBlock
	for _, m := range goBlockRE.FindAllSubmatchIndex(b, -1) {
		blk := sdkBlock{line: 1 + bytes.Count(b[:m[4]], []byte("\n")), body: string(b[m[4]:m[5]])}
		if m[2] >= 0 {
			blk.given = strings.TrimSpace(string(b[m[2]:m[3]]))
		}
		out = append(out, blk)
	}
	return out
}

// wrapBlock is a Go file whose function runs blk. Its lines up to the
// body's are counted by bodyLine so that errors point at the page.
func wrapBlock(i int, blk sdkBlock) (src string, bodyLine int) {
	var sb strings.Builder
	sb.WriteString("package sdkdoc\n\nimport (\n")
	for _, p := range sdkDocImports {
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

// exportImporter imports packages from the export data the go command
// builds (go list -export), so the check costs a build of the SDK, not a
// type check of its dependencies from source.
func exportImporter(t *testing.T, fset *token.FileSet, pkgs []string) types.Importer {
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, pkgs...)...)
	cmd.Dir = ".."
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

var forgiven = regexp.MustCompile(`declared and not used|imported and not used`)

// TestSDKDocCompiles type-checks every ```go block of sdk.md.
func TestSDKDocCompiles(t *testing.T) {
	blocks := sdkBlocks(t, "sdk.md")
	if len(blocks) < 10 {
		t.Fatalf("found %d go blocks in sdk.md, want at least 10: did the fences change?", len(blocks))
	}
	fset := token.NewFileSet()
	imp := exportImporter(t, fset, sdkDocImports)
	for i, blk := range blocks {
		src, bodyLine := wrapBlock(i, blk)
		f, err := parser.ParseFile(fset, fmt.Sprintf("block%d.go", i), src, 0)
		if err != nil {
			t.Errorf("sdk.md:%d: block does not parse: %v", blk.line, err)
			continue
		}
		conf := types.Config{Importer: imp, Error: func(err error) {
			te := err.(types.Error)
			if forgiven.MatchString(te.Msg) {
				return
			}
			pos := te.Fset.Position(te.Pos)
			t.Errorf("sdk.md:%d: %s", blk.line+pos.Line-bodyLine, te.Msg)
		}}
		_, _ = conf.Check("sdkdoc", fset, []*ast.File{f}, nil)
	}
}

// TestSDKDocCheckCatches: the check fails on the two errors a newcomer
// met (RunOnce returns two values; the field is TaskID, not ID).
func TestSDKDocCheckCatches(t *testing.T) {
	fset := token.NewFileSet()
	imp := exportImporter(t, fset, sdkDocImports)
	for _, body := range []string{
		"\tw, _ := concurrency.NewWorker(c, concurrency.WorkerConfig{})\n\terr = w.RunOnce(ctx, nil)\n",
		"\tt, _ := c.GetTask(ctx, \"acme\", \"x\")\n\tfmt.Println(t.ID)\n",
	} {
		src, _ := wrapBlock(0, sdkBlock{body: body})
		f, err := parser.ParseFile(fset, "bad.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var hard int
		conf := types.Config{Importer: imp, Error: func(err error) {
			if !forgiven.MatchString(err.(types.Error).Msg) {
				hard++
			}
		}}
		_, _ = conf.Check("sdkdoc", fset, []*ast.File{f}, nil)
		if hard == 0 {
			t.Errorf("no error reported for\n%s", body)
		}
	}
}
