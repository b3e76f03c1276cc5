package baton

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// QueueParams size the queue workload.
type QueueParams struct {
	Workers int
	Preload int // tasks created before the run
}

// Queue is the queue workload: one queue preloaded with tasks, worked by
// W slots as an SDK user works a queue: concurrency.Worker.RunPool with
// its default settings (batch claims), in queuePools Workers (each its
// own client) of W/queuePools slots. Each slot's task is set running by
// its claim and completed (done, released) with Lease.Complete; the
// Worker claims up to its free slots in one request and sends the
// completions of several slots in one request with the claims of their
// next tasks (client.QueueBatch), each task with its own fencing token
// and lease. One op is one task: "claim"
// is the wait for a started task, "update" its Complete. The run stops
// when the queue has nothing claimable.
func Queue(ctx context.Context, env *Env, p Params, q QueueParams) (*result.Run, error) {
	queue := fmt.Sprintf("q%d", q.Workers)
	loadTime, err := env.Load(ctx, q.Preload, 8, func(i int) client.TxnOp {
		return createTask(queue+"-"+strconv.Itoa(i), queue, nil)
	})
	if err != nil {
		return nil, err
	}
	r, err := queueWorkerRun(ctx, env, p, queue, q.Workers)
	if err != nil {
		return nil, err
	}
	r.Workload, r.Variant = result.WorkloadQueue, fmt.Sprintf("W=%d", q.Workers)
	r.SetMetric("preload_tasks", float64(q.Preload))
	r.SetMetric("preload_s", loadTime.Seconds())
	return r, nil
}

// queueRun drives claim-then-done workers on queue. With back, each
// worker puts the task back instead (status pending, lease released), so
// the queue keeps its size: the claim latency among that many tasks.
func queueRun(ctx context.Context, env *Env, p Params, queue string, workers int, back bool) (*result.Run, error) {
	cs, err := env.Clients(workers)
	if err != nil {
		return nil, err
	}
	running, done := "running", "done"
	if back {
		done = "pending"
	}
	release := true
	op := func(ctx context.Context, w *loadgen.Worker) error {
		c := cs[w.ID]
		t0 := time.Now()
		t, err := c.ClaimQueue(ctx, Tenant, queue, client.QueueClaimRequest{
			Owner: "worker-" + strconv.Itoa(w.ID), Lease: leaseFor, SetStatus: &running})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if t == nil {
			return loadgen.ErrDrained
		}
		t1 := time.Now()
		w.Observe("claim", t1.Sub(t0))
		_, err = c.UpdateTask(ctx, Tenant, t.TaskID, client.UpdateTaskRequest{
			FencingToken: &t.FencingToken, Status: &done, Release: &release})
		if err != nil {
			return fmt.Errorf("update %s: %w", t.TaskID, err)
		}
		w.Observe("update", time.Since(t1))
		return nil
	}
	out := runLoad(ctx, p, p.loadConfig(workers), op)
	r := out.Run
	r.System = result.SystemBaton
	r.SetMetric("tasks_per_s", r.OpsPerSec)
	return r, nil
}

// queuePools is how many Workers (clients) share the queue workload's
// slots.
const queuePools = 4

// queueWorkerRun drives workers slots of concurrency.Worker pools (the
// default settings, batch claims): each loadgen worker takes the next
// task a pool started and completes it.
func queueWorkerRun(ctx context.Context, env *Env, p Params, queue string, workers int) (*result.Run, error) {
	pools := min(queuePools, workers)
	cs, err := env.Clients(pools)
	if err != nil {
		return nil, err
	}
	type started struct {
		l    *concurrency.Lease
		done chan error
	}
	handoff := make(chan started)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, pools)
	for i, c := range cs {
		slots := workers / pools
		if i < workers%pools {
			slots++
		}
		w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: Tenant, Queue: queue, Owner: "worker-" + strconv.Itoa(i),
			Lease: leaseFor, SetStatus: "running", Wait: time.Second})
		if err != nil {
			return nil, err
		}
		go func() {
			errs <- w.RunPool(pctx, slots, func(ctx context.Context, l *concurrency.Lease) error {
				s := started{l: l, done: make(chan error, 1)}
				select {
				case handoff <- s:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case err := <-s.done:
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	op := func(ctx context.Context, w *loadgen.Worker) error {
		t0 := time.Now()
		var s started
		select {
		case s = <-handoff:
		case <-time.After(5 * time.Second): // the pools' claims waited a second and found nothing
			return loadgen.ErrDrained
		case <-ctx.Done():
			return ctx.Err()
		}
		t1 := time.Now()
		w.Observe("claim", t1.Sub(t0))
		_, err := s.l.Complete(ctx, "done", nil)
		s.done <- err
		if err != nil {
			return fmt.Errorf("complete %s: %w", s.l.Task().TaskID, err)
		}
		w.Observe("update", time.Since(t1))
		return nil
	}
	out := runLoad(ctx, p, p.loadConfig(workers), op)
	stop()
	for range cs {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("worker pool: %w", err)
		}
	}
	r := out.Run
	r.System = result.SystemBaton
	r.SetMetric("tasks_per_s", r.OpsPerSec)
	r.SetMetric("worker_pools", float64(pools))
	return r, nil
}
