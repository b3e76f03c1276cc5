package concurrency_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"go.uber.org/goleak"
)

// TestMain starts one real batond (built by the launcher) for the node
// tests and the runnable examples, which find it as a user would:
// BATON_ENDPOINTS and BATON_TOKEN, with the tenant "acme" created. After
// the run it stops the node and fails the package when a goroutine its
// tests started outlives them: every background goroutine must stop on
// Close or with its context.
func TestMain(m *testing.M) {
	stop, err := startExampleNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples' batond:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func startExampleNode() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "baton-concurrency-examples-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := cluster.BuildBatond(ctx, dir)
	if err != nil {
		return nil, err
	}
	c, err := cluster.New(cluster.Config{Binary: bin, BaseDir: dir, Nodes: 1, Fast: true})
	if err != nil {
		return nil, err
	}
	stop = func() { c.Close(); os.RemoveAll(dir) }
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w\n%s", err, c.LogTail(0, 40))
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		c.Close()
		return nil, err
	}
	admin, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken()})
	if err == nil {
		_, err = admin.PutTenant(ctx, "acme")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	os.Setenv("BATON_ENDPOINTS", strings.Join(c.Endpoints(), ","))
	os.Setenv("BATON_TOKEN", c.AdminToken())
	return stop, nil
}
