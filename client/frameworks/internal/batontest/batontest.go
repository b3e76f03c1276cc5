// Package batontest starts a real three-node TLS cluster of batond for
// the frameworks' tests, as the SDKs' own tests do (never a mock server).
// The binary is $BATOND when set (make test-frameworks passes bin/batond);
// otherwise it is built from the tree this module sits in.
package batontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Tenant is the tenant Start creates.
const Tenant = "frameworks"

// Cluster is a running cluster and its base directory.
type Cluster struct {
	*cluster.Cluster
	dir string
}

// Start builds (when $BATOND is unset) and starts three nodes with
// extraArgs appended to each command line, waits for a leader and creates
// Tenant. The caller must Close it.
func Start(ctx context.Context, extraArgs ...string) (_ *Cluster, err error) {
	dir, err := os.MkdirTemp("", "baton-frameworks-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	bin := os.Getenv("BATOND")
	if bin == "" {
		if bin, err = build(ctx, dir); err != nil {
			return nil, err
		}
	}
	c, err := cluster.New(cluster.Config{Binary: bin, BaseDir: dir, Nodes: 3, Fast: true, TLS: true, ExtraArgs: extraArgs})
	if err != nil {
		return nil, err
	}
	bc := &Cluster{Cluster: c, dir: dir}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w\n%s", err, c.LogTail(0, 40))
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		c.Close()
		return nil, err
	}
	admin, err := bc.Client()
	if err == nil {
		_, err = admin.PutTenant(ctx, Tenant)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("creating tenant %s: %w", Tenant, err)
	}
	return bc, nil
}

// Env is the environment that client.FromEnv reads to reach the cluster
// with the admin token, for child processes.
func (c *Cluster) Env() []string {
	return []string{
		"BATON_ENDPOINTS=" + strings.Join(c.Endpoints(), ","),
		"BATON_TOKEN=" + c.AdminToken(),
		"BATON_CACERT=" + c.CAFile(),
	}
}

// Client is a client of the cluster with the admin token.
func (c *Cluster) Client() (*client.Client, error) {
	return client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(), CAFile: c.CAFile()})
}

// Close stops the nodes and removes their directory.
func (c *Cluster) Close() {
	c.Cluster.Close()
	os.RemoveAll(c.dir)
}

// build runs go build ./cmd/batond in the Baton module this one is nested
// in, into dir.
func build(ctx context.Context, dir string) (string, error) {
	root, err := batonRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "batond")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/batond")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/batond in %s: %w\n%s", root, err, msg)
	}
	return out, nil
}

// batonRoot is the nearest directory above the working directory whose
// go.mod is the module github.com/baton-dev/baton.
func batonRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/baton-dev/baton\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("batontest: no github.com/baton-dev/baton module above the working directory; set BATOND")
		}
		dir = parent
	}
}
