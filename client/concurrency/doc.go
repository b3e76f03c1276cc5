// Package concurrency builds Baton's coordination primitives for agents
// on the Go SDK's public API (package client), as etcd's
// client/v3/concurrency builds its locks and elections on clientv3:
//
//   - Worker claims tasks from a queue and runs a WorkFunc on each under a
//     Lease, renewed in the background; the Lease's Fence guards the
//     agent's other writes, so that a worker whose lease was lost (paused,
//     cut off) can never overwrite its successor's work.
//   - Mutex is a fenced distributed lock and Election a fenced leader
//     election, both a task claimed with a lease.
//   - Once runs an external action at most once per op id, across retries,
//     processes and crashes, through the operations ledger.
//
// Each is made from a *client.Client, which does the failover, the
// retries and the exactly-once writes:
//
//	c, err := client.FromEnv()
//	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{
//		Tenant: "acme", Queue: "research", Owner: "worker-1",
//	})
//	err = w.Run(ctx, func(ctx context.Context, l *concurrency.Lease) error {
//		_, err := l.Complete(ctx, "done", json.RawMessage(`{"ok":true}`))
//		return err
//	})
//
// Errors of the cluster are client's (client.ErrFenced, ...); those of the
// primitives themselves are this package's (ErrLeaseLost, ErrLocked,
// ErrOpInDoubt, ...), matched with errors.Is.
package concurrency
