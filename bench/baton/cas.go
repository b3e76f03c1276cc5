package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// Params are the timings and seed of one workload run.
type Params struct {
	Warmup   time.Duration
	Duration time.Duration
	Seed     uint64
	// During, when set, runs in its own goroutine from the start of the
	// measured window (a profiler, say); the run waits for it.
	During func(ctx context.Context)
}

func (p Params) loadConfig(workers int) loadgen.Config {
	return loadgen.Config{Workers: workers, Warmup: p.Warmup, Duration: p.Duration, Seed: p.Seed}
}

// runLoad runs op under p, with p.During alongside.
func runLoad(ctx context.Context, p Params, cfg loadgen.Config, op loadgen.Op) *loadgen.Outcome {
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	var wg sync.WaitGroup
	if p.During != nil {
		wg.Go(func() {
			t := time.NewTimer(time.Until(cfg.Start.Add(cfg.Warmup)))
			defer t.Stop()
			select {
			case <-t.C:
				p.During(ctx)
			case <-ctx.Done():
			}
		})
	}
	out := loadgen.Run(ctx, cfg, op)
	wg.Wait()
	return out
}

// casTask is one cas client's task and the fencing token of its claim.
type casTask struct {
	c     *client.Client
	id    string
	token uint64
	n     int
}

// setupCAS creates one task per client and has each client claim its own.
func setupCAS(ctx context.Context, env *Env, prefix string, clients int) ([]*casTask, error) {
	if _, err := env.Load(ctx, clients, 4, func(i int) client.TxnOp {
		return createTask(prefix+strconv.Itoa(i), "cas", nil)
	}); err != nil {
		return nil, err
	}
	cs, err := env.Clients(clients)
	if err != nil {
		return nil, err
	}
	tasks := make([]*casTask, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range tasks {
		tasks[i] = &casTask{c: cs[i], id: prefix + strconv.Itoa(i)}
		wg.Go(func() {
			t, err := cs[i].ClaimTask(ctx, Tenant, tasks[i].id, client.ClaimRequest{
				Owner: "client-" + strconv.Itoa(i), Lease: leaseFor})
			if err != nil {
				errs[i] = fmt.Errorf("claim %s: %w", tasks[i].id, err)
				return
			}
			tasks[i].token = t.FencingToken
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return tasks, nil
}

// casOp is one fenced update of the worker's own task.
func casOp(tasks []*casTask) loadgen.Op {
	return func(ctx context.Context, w *loadgen.Worker) error {
		t := tasks[w.ID]
		t.n++
		res, _ := json.Marshal(map[string]int{"n": t.n})
		_, err := t.c.UpdateTask(ctx, Tenant, t.id, client.UpdateTaskRequest{
			FencingToken: &t.token, Result: res})
		return err
	}
}

// CAS is the cas workload: clients clients, each owning one task it
// claimed, loop fenced updates of it.
func CAS(ctx context.Context, env *Env, p Params, clients int) (*result.Run, error) {
	tasks, err := setupCAS(ctx, env, fmt.Sprintf("cas%d-", clients), clients)
	if err != nil {
		return nil, err
	}
	out := runLoad(ctx, p, p.loadConfig(clients), casOp(tasks))
	r := out.Run
	r.System, r.Workload, r.Variant = result.SystemBaton, result.WorkloadCAS, fmt.Sprintf("C=%d", clients)
	return r, nil
}
