package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildBatond runs `go build -o outDir/batond ./cmd/batond` in the module
// root (found by walking up from the working directory to go.mod) and
// returns the binary's absolute path. Tests call it once, from TestMain.
func BuildBatond(ctx context.Context, outDir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out, err := filepath.Abs(filepath.Join(outDir, "batond"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/batond")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: go build ./cmd/batond in %s: %w\n%s", root, err, msg)
	}
	return out, nil
}

// ModuleRoot returns the nearest directory at or above the working
// directory that holds a go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cluster: no go.mod above the working directory")
		}
		dir = parent
	}
}
