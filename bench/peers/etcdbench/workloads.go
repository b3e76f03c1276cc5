package etcdbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Params are the timings and seed of one workload run.
type Params struct {
	Warmup   time.Duration
	Duration time.Duration
	Seed     uint64
}

func (p Params) loadConfig(workers int) loadgen.Config {
	return loadgen.Config{Workers: workers, Warmup: p.Warmup, Duration: p.Duration, Seed: p.Seed}
}

// opTimeout bounds one etcd call, as the Baton client's attempt timeout
// bounds one of its calls.
const opTimeout = 10 * time.Second

// leaseTTL is the lease of every claim, in seconds: longer than any run.
const leaseTTL = 3600

// errFenced is a transaction whose fencing comparison failed.
var errFenced = errors.New("fenced: the claim's revision is no longer current")

// casTask is one cas client's task: it owns ownerKey under a lease, and
// its claim's revision is the fencing token of every update of dataKey.
type casTask struct {
	cli      *clientv3.Client
	ownerKey string
	dataKey  string
	token    int64
	n        int
}

// clients returns n clients, as Cluster.Client(0..n-1).
func clients(c *Cluster, n int) ([]*clientv3.Client, error) {
	out := make([]*clientv3.Client, n)
	for i := range out {
		cli, err := c.Client(i)
		if err != nil {
			closeAll(out[:i])
			return nil, err
		}
		out[i] = cli
	}
	return out, nil
}

func closeAll(cs []*clientv3.Client) {
	for _, c := range cs {
		c.Close()
	}
}

// setupCAS gives every client a task it claims: a lease, and the owner
// key created under it in a transaction that requires it absent. The
// claim's revision is the client's fencing token.
func setupCAS(ctx context.Context, c *Cluster, prefix string, n int) ([]*casTask, error) {
	cs, err := clients(c, n)
	if err != nil {
		return nil, err
	}
	tasks := make([]*casTask, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range tasks {
		tasks[i] = &casTask{cli: cs[i], ownerKey: prefix + strconv.Itoa(i) + "/owner", dataKey: prefix + strconv.Itoa(i) + "/task"}
		wg.Go(func() { errs[i] = tasks[i].claim(ctx, "client-"+strconv.Itoa(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(cs)
		return nil, err
	}
	return tasks, nil
}

func (t *casTask) claim(ctx context.Context, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	lease, err := t.cli.Grant(ctx, leaseTTL)
	if err != nil {
		return err
	}
	resp, err := t.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.ownerKey), "=", 0)).
		Then(clientv3.OpPut(t.ownerKey, owner, clientv3.WithLease(lease.ID)),
			clientv3.OpPut(t.dataKey, `{"status":"pending"}`)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("claim %s: already owned", t.ownerKey)
	}
	t.token = resp.Header.Revision
	return nil
}

// casOp is one fenced update: put the task only if the owner key is still
// the one written by this client's claim.
func casOp(tasks []*casTask) loadgen.Op {
	return func(ctx context.Context, w *loadgen.Worker) error {
		t := tasks[w.ID]
		t.n++
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		resp, err := t.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(t.ownerKey), "=", t.token)).
			Then(clientv3.OpPut(t.dataKey, `{"status":"running","result":{"n":`+strconv.Itoa(t.n)+`}}`)).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return errFenced
		}
		return nil
	}
}

// CAS is the cas workload: n clients, each owning one task it claimed,
// loop fenced updates of it (one etcd transaction each).
func CAS(ctx context.Context, c *Cluster, p Params, n int) (*result.Run, error) {
	tasks, err := setupCAS(ctx, c, fmt.Sprintf("cas%d/", n), n)
	if err != nil {
		return nil, err
	}
	defer closeTasks(tasks)
	out := loadgen.Run(ctx, p.loadConfig(n), casOp(tasks))
	r := out.Run
	r.System, r.Workload, r.Variant = result.SystemEtcd, result.WorkloadCAS, fmt.Sprintf("C=%d", n)
	return r, nil
}

func closeTasks(tasks []*casTask) {
	for _, t := range tasks {
		t.cli.Close()
	}
}

// Recovery is the recovery workload: the cas load with n clients while the
// leader is killed on schedule s and restarted, and a prober
// (loadgen.Recovery) writes its own task every 20 ms.
func Recovery(ctx context.Context, c *Cluster, p Params, n int, s loadgen.KillSchedule) (*result.Run, error) {
	// One task more than clients: the prober's.
	tasks, err := setupCAS(ctx, c, fmt.Sprintf("rec%d/", n), n+1)
	if err != nil {
		return nil, err
	}
	defer closeTasks(tasks)
	pt := tasks[n]
	probe := func(ctx context.Context) error {
		resp, err := pt.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(pt.ownerKey), "=", pt.token)).
			Then(clientv3.OpPut(pt.dataKey, `{"status":"running","result":{"probe":true}}`)).
			Commit()
		if err == nil && !resp.Succeeded {
			err = errFenced
		}
		return err
	}
	r, err := loadgen.Recovery(ctx, p.loadConfig(n), s, killer{c}, casOp(tasks), probe)
	if err != nil {
		return nil, err
	}
	r.System, r.Workload, r.Variant = result.SystemEtcd, result.WorkloadRecovery, fmt.Sprintf("C=%d", n)
	return r, nil
}

type killer struct{ c *Cluster }

func (k killer) KillLeader(ctx context.Context) (string, time.Time, error) {
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	i, err := k.c.Leader(lctx)
	if err != nil {
		return "", time.Time{}, err
	}
	at := time.Now()
	return k.c.Name(i), at, k.c.Kill(i)
}

func (k killer) Restart(ctx context.Context, node string) error {
	for i := range k.c.members {
		if k.c.Name(i) == node {
			return k.c.Restart(i)
		}
	}
	return fmt.Errorf("no etcd member %s", node)
}
