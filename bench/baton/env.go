package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Tenant is the tenant every workload runs in.
const Tenant = "bench"

// EnvConfig describes the cluster a workload runs on.
type EnvConfig struct {
	Binary  string // batond
	BaseDir string // one directory per node below it
	Nodes   int    // 0: 3
	// Fast selects the harness's short Raft timings (smoke tests only);
	// the benchmark uses batond's defaults.
	Fast bool
	// ExtraArgs are added to every node's command line.
	ExtraArgs []string
	// Procs is the nodes' GOMAXPROCS rule (cmd/batond/cluster.Config.Procs):
	// the zero value, cluster.ProcsShare, pins each node to its share of
	// the cores; the driver's default runs use cluster.ProcsRuntime.
	Procs cluster.ProcsRule
	// Output, when set, receives the nodes' log lines.
	Output io.Writer
	// Launch, when set, rewrites node i's command line
	// (cmd/batond/cluster.Config.Launch).
	Launch func(i int, bin string, args []string) (string, []string)
}

// Env is a running Baton cluster with a tenant and a principal whose
// token the workloads use.
type Env struct {
	Cluster *cluster.Cluster
	Admin   *client.Client
	Token   string // the bench principal's token
}

// StartEnv starts the cluster, waits for a leader and every node ready,
// and creates the tenant and a principal with every grant in it.
func StartEnv(ctx context.Context, cfg EnvConfig) (*Env, error) {
	n := cfg.Nodes
	if n == 0 {
		n = cluster.DefaultNodes
	}
	// All ports from one call: the harness picks each node's pair in a
	// call of its own, and two calls can return the same just-freed port.
	ports, err := cluster.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c, err := cluster.New(cluster.Config{Binary: cfg.Binary, BaseDir: cfg.BaseDir, Nodes: n,
		HTTPPorts: ports[:n], RaftPorts: ports[n:],
		Fast: cfg.Fast, ExtraArgs: cfg.ExtraArgs, Procs: cfg.Procs, Output: cfg.Output, Launch: cfg.Launch})
	if err != nil {
		return nil, err
	}
	env := &Env{Cluster: c}
	if err := env.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return env, nil
}

func (e *Env) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c := e.Cluster
	if err := c.Start(ctx); err != nil {
		return err
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		return err
	}
	for i := range c.Size() {
		if err := c.WaitReady(ctx, i); err != nil {
			return err
		}
	}
	admin, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken()})
	if err != nil {
		return err
	}
	e.Admin = admin
	if _, err := admin.PutTenant(ctx, Tenant); err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	p, err := admin.CreatePrincipal(ctx, Tenant, "bench", []client.Grant{
		{Resource: "*", Prefix: "", Actions: []string{"read", "write", "delete"}}})
	if err != nil {
		return fmt.Errorf("create principal: %w", err)
	}
	e.Token = p.Token
	return nil
}

// Close stops the cluster.
func (e *Env) Close() error { return e.Cluster.Close() }

// Client returns a new client for worker i, as an agent process would have
// its own: its own connections, and the node it tries first is i's node
// (i modulo the cluster size), so the load spreads over all nodes.
func (e *Env) Client(i int) (*client.Client, error) {
	eps := e.Cluster.Endpoints()
	k := i % len(eps)
	rotated := append(append([]string(nil), eps[k:]...), eps[:k]...)
	return client.New(client.Config{Endpoints: rotated, Token: e.Token})
}

// Clients returns n clients, as Client(0..n-1).
func (e *Env) Clients(n int) ([]*client.Client, error) {
	out := make([]*client.Client, n)
	for i := range out {
		c, err := e.Client(i)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// txnBatch is the number of operations per loading transaction: the
// server's limit.
const txnBatch = 128

// Load applies n operations built by op(i), in transactions of txnBatch,
// from parallel loaders. It returns the time it took.
func (e *Env) Load(ctx context.Context, n, parallel int, op func(i int) client.TxnOp) (time.Duration, error) {
	start := time.Now()
	batches := make(chan int)
	errc := make(chan error, parallel)
	var wg sync.WaitGroup
	for w := range parallel {
		c, err := e.Client(w)
		if err != nil {
			return 0, err
		}
		wg.Go(func() {
			for from := range batches {
				ops := make([]client.TxnOp, 0, txnBatch)
				for i := from; i < min(from+txnBatch, n); i++ {
					ops = append(ops, op(i))
				}
				if _, err := c.Txn(ctx, Tenant, ops); err != nil {
					errc <- fmt.Errorf("load ops %d-%d: %w", from, from+len(ops)-1, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for from := 0; from < n; from += txnBatch {
		select {
		case batches <- from:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(batches)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return time.Since(start), err
}

// createTask is a task.create op of a pending task in queue.
func createTask(id, queue string, payload any) client.TxnOp {
	req := client.CreateTaskRequest{TaskID: id, Queue: queue}
	if payload != nil {
		req.Payload, _ = json.Marshal(payload)
	}
	return client.TxnCreateTask(req)
}

// leaseFor is the lease of every claim: far longer than any run, so no
// lease expires during one.
const leaseFor = time.Hour

// Term is the highest Raft term any live node reports (0 if none answers).
// Every election raises it, whether or not the leader changes, so the
// difference across a run counts the elections that disturbed it.
func (e *Env) Term(ctx context.Context) uint64 {
	var term uint64
	for _, i := range e.Cluster.LiveNodes() {
		if st, err := e.Cluster.Status(ctx, i); err == nil && st.Term > term {
			term = st.Term
		}
	}
	return term
}

// CountElections records on r, as the metric "raft_elections", how far the
// Raft term rose from before (Env.Term at the run's start) to now.
func (e *Env) CountElections(ctx context.Context, r *result.Run, before uint64) {
	if after := e.Term(ctx); r != nil && after >= before && before > 0 {
		r.SetMetric("raft_elections", float64(after-before))
	}
}
