package baton

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
)

// SoakParams size the soak workload.
type SoakParams struct {
	Clients int // cas clients (64)
	// SampleEvery is the interval between memory samples (10 s).
	SampleEvery time.Duration
}

// SoakBucket is the resolution of a soak's throughput series: one second,
// so that 30 minutes stay a small series.
const SoakBucket = time.Second

// Soak is the soak workload: the cas load (Clients clients, fenced
// updates of their own tasks through the Go SDK with its defaults) for the
// whole of p, while every node's RSS (/proc/PID/status) and Go heap (its
// /metrics) are sampled every SampleEvery. loadgen.AnalyzeSoak turns the
// samples into per-node slopes and maxima.
func Soak(ctx context.Context, env *Env, p Params, sp SoakParams) (*result.Run, error) {
	tasks, err := setupCAS(ctx, env, "soak-", sp.Clients)
	if err != nil {
		return nil, err
	}
	c := env.Cluster
	targets := make([]loadgen.MemTarget, c.Size())
	for i := range targets {
		targets[i] = loadgen.MemTarget{Name: c.ID(i), PID: func() int { return c.PID(i) }, MetricsURL: c.URL(i) + "/metrics"}
	}
	cfg := p.loadConfig(sp.Clients)
	cfg.Start, cfg.Bucket = time.Now(), SoakBucket
	sampler := loadgen.SampleMemory(ctx, cfg.Start, sp.SampleEvery, targets)
	out := runLoad(ctx, p, cfg, casOp(tasks))
	r := out.Run
	r.Memory = sampler.Stop()
	r.System, r.Workload, r.Variant = result.SystemBaton, result.WorkloadSoak, fmt.Sprintf("C=%d", sp.Clients)
	r.SetMetric("sample_every_ms", float64(sp.SampleEvery.Milliseconds()))
	loadgen.AnalyzeSoak(r)
	return r, nil
}
