package baton

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// QueueParams size the queue workload.
type QueueParams struct {
	Workers int
	Preload int // tasks created before the run
}

// Queue is the queue workload: one queue preloaded with tasks; each worker
// claims a task (pending to running), then loops: a fenced update of its
// task to done that releases the lease and, in the same request and
// command, claims its next task (claim_next). One task costs one round
// trip and one replicated command; the "claim" stage is a claim on its
// own (a worker's first), "update" the update with the next claim.
// A worker that finds the queue empty stops.
func Queue(ctx context.Context, env *Env, p Params, q QueueParams) (*result.Run, error) {
	queue := fmt.Sprintf("q%d", q.Workers)
	loadTime, err := env.Load(ctx, q.Preload, 8, func(i int) client.TxnOp {
		return createTask(queue+"-"+strconv.Itoa(i), queue, nil)
	})
	if err != nil {
		return nil, err
	}
	r, err := queueNextRun(ctx, env, p, queue, q.Workers)
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

// queueNextRun drives workers that finish their task and claim the next
// in one request (client.UpdateTaskClaimNext); each op finishes one task.
func queueNextRun(ctx context.Context, env *Env, p Params, queue string, workers int) (*result.Run, error) {
	cs, err := env.Clients(workers)
	if err != nil {
		return nil, err
	}
	running, done, release := "running", "done", true
	op := func(ctx context.Context, w *loadgen.Worker) error {
		c := cs[w.ID]
		owner := "worker-" + strconv.Itoa(w.ID)
		t, _ := w.State.(*client.Task)
		if t == nil {
			t0 := time.Now()
			claimed, err := c.ClaimQueue(ctx, Tenant, queue, client.QueueClaimRequest{Owner: owner, Lease: leaseFor, SetStatus: &running})
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			if claimed == nil {
				return loadgen.ErrDrained
			}
			w.Observe("claim", time.Since(t0))
			t = claimed
		}
		t0 := time.Now()
		_, next, err := c.UpdateTaskClaimNext(ctx, Tenant, t.TaskID,
			client.UpdateTaskRequest{FencingToken: &t.FencingToken, Status: &done, Release: &release},
			client.ClaimNextRequest{Queue: queue, Owner: owner, Lease: leaseFor, SetStatus: &running})
		if err != nil {
			return fmt.Errorf("complete %s: %w", t.TaskID, err)
		}
		w.Observe("update", time.Since(t0))
		w.State = next // nil: the queue was empty; the next op looks once more
		return nil
	}
	out := runLoad(ctx, p, p.loadConfig(workers), op)
	r := out.Run
	r.System = result.SystemBaton
	r.SetMetric("tasks_per_s", r.OpsPerSec)
	return r, nil
}
