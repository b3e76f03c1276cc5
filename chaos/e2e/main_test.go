package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/cluster"
	"github.com/baton-dev/baton/client"
	"go.uber.org/goleak"
)

// batond is the server binary, built once by TestMain.
var (
	batond    string
	batondErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	batond, batondErr = cluster.BuildBatond(ctx, dir)
	cancel()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// startCluster starts n fast-timing batond processes, with extra flags if
// given, and waits for a leader. Everything is stopped in t.Cleanup; node
// logs stay in t.TempDir() and are printed when the test failed.
func startCluster(t *testing.T, n int, extraArgs ...string) *cluster.Cluster {
	t.Helper()
	return startClusterWith(t, cluster.Config{Nodes: n, ExtraArgs: extraArgs})
}

// startClusterWith is startCluster with more of the harness's Config (TLS);
// Binary, BaseDir and Fast are set here.
func startClusterWith(t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	if batondErr != nil {
		t.Fatalf("batond did not build: %v", batondErr)
	}
	cfg.Binary, cfg.BaseDir, cfg.Fast = batond, t.TempDir(), true
	n := cfg.Nodes
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := 0; i < n; i++ {
				t.Logf("--- log of %s:\n%s", cluster.NodeID(i), c.LogTail(i, 40))
			}
		}
		c.Close()
	})
	ctx := ctxFor(t, 60*time.Second)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// adminClient is a client over every node's endpoint with the admin token.
func adminClient(t *testing.T, c *cluster.Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(), MaxRetry: 20 * time.Second,
		CAFile: c.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// nodeClient talks to node i only (no failover).
func nodeClient(t *testing.T, c *cluster.Cluster, i int, token string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(i)}, Token: token, MaxRetry: time.Nanosecond,
		CAFile: c.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestHarnessSmoke proves the e2e setup itself: a cluster starts, takes a
// write through a follower and converges.
func TestHarnessSmoke(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 30*time.Second)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	if _, err := nodeClient(t, c, follower, c.AdminToken()).PutTenant(ctx, "smoke"); err != nil {
		t.Fatalf("write through follower %d: %v", follower, err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	tenants, err := adminClient(t, c).ListTenants(ctx)
	if err != nil || len(tenants) != 1 || tenants[0] != "smoke" {
		t.Fatalf("got tenants %v (err %v), want [smoke]", tenants, err)
	}
}
