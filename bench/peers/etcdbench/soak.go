package etcdbench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
)

// SoakArgs are the etcd flags of the soak's cluster: periodic compaction
// of the revisions older than a minute. Without compaction etcd keeps
// every revision of every key, by design, and its memory grows with the
// writes; an operator runs it compacted (as Kubernetes' API server does).
var SoakArgs = []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1m"}

// SoakBucket is the resolution of a soak's throughput series, as Baton's.
const SoakBucket = time.Second

// Soak is the soak workload: the cas load with n clients for the whole of
// p, while every member's RSS (/proc/PID/status) and Go heap (its
// /metrics on the client URL) are sampled every every. The cluster should
// run with SoakArgs.
func Soak(ctx context.Context, c *Cluster, p Params, n int, every time.Duration) (*result.Run, error) {
	tasks, err := setupCAS(ctx, c, "soak/", n)
	if err != nil {
		return nil, err
	}
	defer closeTasks(tasks)
	eps := c.Endpoints()
	targets := make([]loadgen.MemTarget, c.Size())
	for i := range targets {
		targets[i] = loadgen.MemTarget{Name: c.Name(i), PID: func() int { return c.PID(i) }, MetricsURL: eps[i] + "/metrics"}
	}
	cfg := p.loadConfig(n)
	cfg.Start, cfg.Bucket = time.Now(), SoakBucket
	sampler := loadgen.SampleMemory(ctx, cfg.Start, every, targets)
	out := loadgen.Run(ctx, cfg, casOp(tasks))
	r := out.Run
	r.Memory = sampler.Stop()
	r.System, r.Workload, r.Variant = result.SystemEtcd, result.WorkloadSoak, fmt.Sprintf("C=%d", n)
	r.SetMetric("sample_every_ms", float64(every.Milliseconds()))
	r.Notef("etcd flags: %s (without compaction etcd keeps every revision, by design)", strings.Join(SoakArgs, " "))
	loadgen.AnalyzeSoak(r)
	return r, nil
}
