// Package docs holds Baton's documentation. Its Go files are tests: this
// one keeps the repository's docs self-contained (a clone must have every
// page its files point to), imports_test.go keeps design.md's package map
// true to the import graph.
package docs

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbidden are strings no tracked file may contain, each with the reason.
// They are spelt in pieces so that this file does not contain them itself.
var forbidden = []struct{ needle, why string }{
	// The wire contract and the design notes were once kept in a directory
	// beside the repository, which a clone does not have.
	{".." + "/shared", "points outside the repository; link the page under docs/ instead"},
	// The names of those outside files. The API reference is docs/api.md
	// and the design page docs/design.md (lower case).
	{"API" + ".md", "names the old outside contract; say docs/api.md"},
	{"DESIGN" + ".md", "names the old outside design notes; say docs/design.md"},
}

// TestNoOutsideReferences fails if any file tracked in the repository
// mentions documents that live outside it.
func TestNoOutsideReferences(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := trackedFiles(t, root)
	if len(files) == 0 {
		t.Fatal("found no files to check")
	}
	var found int
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			if os.IsNotExist(err) { // deleted in the work tree, not yet committed
				continue
			}
			t.Fatal(err)
		}
		for _, f := range forbidden {
			if !bytes.Contains(b, []byte(f.needle)) {
				continue
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, f.needle) {
					found++
					t.Errorf("%s:%d: %q %s\n\t%s", filepath.ToSlash(name), i+1, f.needle, f.why, strings.TrimSpace(line))
				}
			}
		}
	}
	if found > 0 {
		t.Logf("%d references to documents outside the repository; the repository's own are docs/api.md and docs/design.md", found)
	}
}

// trackedFiles lists the repository's files relative to root: the ones git
// tracks, or, without git (an exported tree), every file but .git and bin.
func trackedFiles(t *testing.T, root string) []string {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
		return files
	}
	t.Log("git ls-files failed; walking the tree instead")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == ".git" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
