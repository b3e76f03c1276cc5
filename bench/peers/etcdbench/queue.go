package etcdbench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxTxnOps is etcd's default --max-txn-ops.
const maxTxnOps = 128

// candidatesPerWorker sizes the claim's window: with W workers, a claim
// picks one of the pending keys among the next candidatesPerWorker×W task
// numbers at random, so workers seldom race for the same key (the order
// is first-in, first-out within that window). 32 measured best of 2, 8
// and 32 at W=64.
const candidatesPerWorker = 32

// pendingKey is the key of pending task i; task numbers are dense, so a
// window of numbers is a bounded key range.
func pendingKey(q string, i int) string { return fmt.Sprintf("%spending/%09d", q, i) }

// Queue is the queue workload in etcd: pending tasks are keys under
// <q>/pending/, numbered in creation order. A claim reads the keys of a
// window of task numbers from the lowest one it saw pending (a
// serializable range, keys only: the member's local view is enough to
// pick, since the transaction checks), and moves a random one to
// <q>/claimed/ under the worker's lease in a transaction that requires the
// pending key unchanged; a lost race retries. The claim's revision is the
// fencing token of the update that moves the task to <q>/done/ (a
// transaction requiring the claimed key's revision).
//
// The window keeps every range bounded: etcd 3.4 counts every key of a
// range even under a limit, so "the first N of the prefix" would cost a
// scan of the whole queue per claim.
func Queue(ctx context.Context, c *Cluster, p Params, workers, preload int) (*result.Run, error) {
	q := fmt.Sprintf("q%d/", workers)
	loadTime, err := preloadQueue(ctx, c, q, preload)
	if err != nil {
		return nil, err
	}
	cs, err := clients(c, workers)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	leases := make([]clientv3.LeaseID, workers)
	fronts := make([]int, workers)
	for i, cli := range cs {
		gctx, cancel := context.WithTimeout(ctx, opTimeout)
		l, err := cli.Grant(gctx, leaseTTL)
		cancel()
		if err != nil {
			return nil, err
		}
		leases[i] = l.ID
	}
	var conflicts atomic.Int64
	op := func(ctx context.Context, w *loadgen.Worker) error {
		cli := cs[w.ID]
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		t0 := time.Now()
		cl := claimer{cli: cli, q: q, window: candidatesPerWorker * workers, lease: leases[w.ID],
			owner: "worker-" + strconv.Itoa(w.ID), front: &fronts[w.ID], conflicts: &conflicts}
		id, token, err := cl.claimNext(ctx, w)
		if err != nil {
			return err
		}
		t1 := time.Now()
		w.Observe("claim", t1.Sub(t0))
		claimed := q + "claimed/" + id
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(claimed), "=", token)).
			Then(clientv3.OpDelete(claimed), clientv3.OpPut(q+"done/"+id, `{"status":"done"}`)).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return errFenced
		}
		w.Observe("update", time.Since(t1))
		return nil
	}
	out := loadgen.Run(ctx, p.loadConfig(workers), op)
	r := out.Run
	r.System, r.Workload, r.Variant = result.SystemEtcd, result.WorkloadQueue, fmt.Sprintf("W=%d", workers)
	r.SetMetric("tasks_per_s", r.OpsPerSec)
	r.SetMetric("preload_tasks", float64(preload))
	r.SetMetric("preload_s", loadTime.Seconds())
	r.SetMetric("claim_conflicts", float64(conflicts.Load()))
	return r, nil
}

// claimer is one worker's claim of the next pending task.
type claimer struct {
	cli       *clientv3.Client
	q         string
	window    int
	lease     clientv3.LeaseID
	owner     string
	front     *int // the lowest task number this worker saw pending
	conflicts *atomic.Int64
}

// claimNext claims one pending task and returns its id and fencing token;
// loadgen.ErrDrained when none is left.
func (c claimer) claimNext(ctx context.Context, w *loadgen.Worker) (string, int64, error) {
	pending := c.q + "pending/"
	for {
		get, err := c.cli.Get(ctx, pendingKey(c.q, *c.front), clientv3.WithRange(pendingKey(c.q, *c.front+c.window)),
			clientv3.WithKeysOnly(), clientv3.WithSerializable())
		if err != nil {
			return "", 0, err
		}
		if len(get.Kvs) == 0 {
			// Nothing in the window: jump to the lowest pending key, if any.
			next, err := c.cli.Get(ctx, pendingKey(c.q, *c.front), clientv3.WithRange(clientv3.GetPrefixRangeEnd(pending)),
				clientv3.WithLimit(1), clientv3.WithKeysOnly(), clientv3.WithSerializable())
			if err != nil {
				return "", 0, err
			}
			if len(next.Kvs) == 0 {
				return "", 0, loadgen.ErrDrained
			}
			*c.front, _ = strconv.Atoi(string(next.Kvs[0].Key[len(pending):]))
			continue
		}
		*c.front, _ = strconv.Atoi(string(get.Kvs[0].Key[len(pending):]))
		kv := get.Kvs[w.Rand.IntN(len(get.Kvs))]
		id := string(kv.Key[len(pending):])
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key)),
				clientv3.OpPut(c.q+"claimed/"+id, `{"status":"running","owner":"`+c.owner+`"}`, clientv3.WithLease(c.lease))).
			Commit()
		if err != nil {
			return "", 0, err
		}
		if resp.Succeeded {
			return id, resp.Header.Revision, nil
		}
		c.conflicts.Add(1)
	}
}

// preloadQueue puts n pending tasks, maxTxnOps per transaction, from 8
// loaders.
func preloadQueue(ctx context.Context, c *Cluster, q string, n int) (time.Duration, error) {
	start := time.Now()
	cs, err := clients(c, 8)
	if err != nil {
		return 0, err
	}
	defer closeAll(cs)
	var next atomic.Int64
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, cli := range cs {
		wg.Go(func() {
			for {
				from := int(next.Add(maxTxnOps)) - maxTxnOps
				if from >= n {
					return
				}
				var ops []clientv3.Op
				for k := from; k < min(from+maxTxnOps, n); k++ {
					ops = append(ops, clientv3.OpPut(pendingKey(q, k), `{"status":"pending"}`))
				}
				tctx, cancel := context.WithTimeout(ctx, opTimeout)
				_, err := cli.Txn(tctx).Then(ops...).Commit()
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
