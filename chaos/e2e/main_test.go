package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/server/core/tlsconf"
	"go.uber.org/goleak"
)

// batond is the server binary, built once by TestMain.
var (
	batond    string
	batondErr error
)

// With BATON_TEST_TLS=1 every cluster runs TLS everywhere, its node
// certificates signed by one CA that TestMain makes: e2eCAFile, which
// every client of the tests trusts ("" without TLS).
var (
	e2eTLS    = os.Getenv("BATON_TEST_TLS") == "1"
	e2eCAFile string
	e2eCA     *tlsconf.CA
)

// e2eTLSConfig trusts e2eCAFile; nil without TLS.
func e2eTLSConfig() *tls.Config {
	if e2eCA == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(e2eCA.Cert)
	return &tls.Config{RootCAs: pool}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a helper process (mutex_test.go): it builds and starts nothing
	}
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	batond, batondErr = cluster.BuildBatond(ctx, dir)
	cancel()
	if e2eTLS {
		if e2eCA, err = tlsconf.NewCA("Baton e2e CA"); err == nil {
			e2eCAFile = filepath.Join(dir, "ca.pem")
			err = os.WriteFile(e2eCAFile, e2eCA.CertPEM, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
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
	cfg.TLS = cfg.TLS || e2eTLS
	return startClusterExact(t, cfg)
}

// startClusterExact is startClusterWith without BATON_TEST_TLS's say:
// TLS only if cfg asks (for tests that speak raw HTTP/1.1 to a node).
func startClusterExact(t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	if batondErr != nil {
		t.Fatalf("batond did not build: %v", batondErr)
	}
	cfg.Binary, cfg.BaseDir, cfg.Fast = batond, t.TempDir(), true
	if cfg.TLS && e2eCA != nil {
		// The harness signs the nodes' certificates with the CA it finds.
		caCert, caKey := tlsconf.CAFiles(filepath.Join(cfg.BaseDir, "tls"))
		if err := os.MkdirAll(filepath.Dir(caCert), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caCert, e2eCA.CertPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caKey, e2eCA.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
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
