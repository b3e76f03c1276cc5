// Package clustertest runs the Go SDK's tests against real batond
// processes built from this tree: one shared cluster per test package
// (Main), a node that has lost its quorum for real 503s, and a proxy in
// front of real nodes that records what the client sent and cuts or
// stalls connections on cue. Nothing here answers a request itself.
package clustertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"go.uber.org/goleak"
)

// Tenant is created on every cluster Main starts.
const Tenant = "acme"

// Env is the package's shared batond processes.
type Env struct {
	// Cluster is a one-node cluster: the endpoint every test may use.
	Cluster *cluster.Cluster
	// Leaderless is a node of a two-node cluster whose other node was
	// stopped: it has no leader and answers what needs one with a real
	// 503 unavailable (Retry-After: 1). Empty unless Options.Leaderless.
	Leaderless string
	// Token is the admin token of both clusters.
	Token string
	// Binary is the batond the package built.
	Binary string
	// Dir holds the clusters' data; removed on stop.
	Dir string

	stops []func()
}

// Options chooses what Main starts besides the one-node cluster.
type Options struct {
	Prefix     string // of the temporary directory
	Leaderless bool
	// Ready, when set, is called with the Env before the tests run.
	Ready func(*Env)
}

// Main builds batond, starts the shared processes, sets BATON_ENDPOINTS
// and BATON_TOKEN for the runnable examples, runs the tests, stops the
// processes and fails the run when a goroutine the tests started outlives
// them: every background goroutine must stop on Close or with its context.
func Main(m *testing.M, opts Options) {
	env, err := start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustertest:", err)
		os.Exit(1)
	}
	if opts.Ready != nil {
		opts.Ready(env)
	}
	code := m.Run()
	env.stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func (e *Env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	os.RemoveAll(e.Dir)
}

func start(opts Options) (_ *Env, err error) {
	dir, err := os.MkdirTemp("", cmp.Or(opts.Prefix, "baton-clustertest-"))
	if err != nil {
		return nil, err
	}
	env := &Env{Dir: dir, Token: cluster.NewToken()}
	defer func() {
		if err != nil {
			env.stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if env.Binary, err = cluster.BuildBatond(ctx, dir); err != nil {
		return nil, err
	}
	if env.Cluster, err = env.startCluster(ctx, "main", 1); err != nil {
		return nil, err
	}
	if opts.Leaderless {
		lc, err := env.startCluster(ctx, "leaderless", 2)
		if err != nil {
			return nil, err
		}
		if err := lc.StopNode(1); err != nil {
			return nil, err
		}
		env.Leaderless = lc.URL(0)
		if err := waitUnavailable(ctx, env.Leaderless, env.Token); err != nil {
			return nil, err
		}
	}
	os.Setenv("BATON_ENDPOINTS", strings.Join(env.Cluster.Endpoints(), ","))
	os.Setenv("BATON_TOKEN", env.Token)
	return env, nil
}

func (e *Env) startCluster(ctx context.Context, name string, nodes int) (*cluster.Cluster, error) {
	c, err := cluster.New(cluster.Config{Binary: e.Binary, BaseDir: e.Dir + "/" + name, Nodes: nodes,
		Fast: true, AdminToken: e.Token})
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", name, err, c.LogTail(0, 40))
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	admin, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: e.Token, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	if _, err := admin.PutTenant(ctx, Tenant); err != nil {
		return nil, fmt.Errorf("%s: create tenant: %w", name, err)
	}
	return c, nil
}

// waitUnavailable polls the node until it answers a write with 503 at
// once: it has stopped holding requests for a leader that may come back.
func waitUnavailable(ctx context.Context, url, token string) error {
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	c, err := client.New(client.Config{Endpoints: []string{url}, Token: token, HTTPClient: hc,
		Timeout: 500 * time.Millisecond, MaxRetry: time.Millisecond, NoSession: true})
	if err != nil {
		return err
	}
	for {
		// A write, which the node forwards and so holds while it heard
		// from a leader recently (server/forward.go, holdAfterLeads); a
		// read is refused at once from the start, before writes are.
		_, err := c.PutTenant(ctx, "leaderless-probe")
		var e *client.Error
		if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("leaderless node never answered 503 (last: %v)", err)
		}
		time.Sleep(cluster.PollInterval)
	}
}

// URL is the one-node cluster's endpoint.
func (e *Env) URL() string { return e.Cluster.URL(0) }

// Client returns a client of the given endpoints (the shared node's when
// none) with the admin token, a transport of its own and cfg's other
// fields; the test's cleanup closes it.
func (e *Env) Client(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []string{e.URL()}
	}
	if cfg.Token == "" {
		cfg.Token = e.Token
	}
	if cfg.HTTPClient == nil {
		hc := newHTTPClient()
		t.Cleanup(hc.CloseIdleConnections)
		cfg.HTTPClient = hc
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

// CtxTimeout is a context the test's cleanup cancels.
func CtxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newHTTPClient has a transport of its own, so that closing its idle
// connections leaves no goroutine of it behind.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// StartCluster starts a cluster of the given size of its own for one test
// (tenant "acme" created, the Env's admin token); the test's cleanup
// stops it.
func StartCluster(t testing.TB, e *Env, nodes int) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.New(cluster.Config{Binary: e.Binary, BaseDir: t.TempDir(), Nodes: nodes,
		Fast: true, AdminToken: e.Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(0, 40))
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	admin, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: e.Token, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutTenant(ctx, Tenant); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return c
}
