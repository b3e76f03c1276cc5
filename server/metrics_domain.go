package server

import (
	"sync"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/prometheus/client_golang/prometheus"
)

// Domain metrics: what the state holds and what the applied commands did,
// from the FSM's figures kept as it applies (fsm.OpStats), read at scrape
// time at the cost of the number of queues, not of tasks.
var (
	descTasks = prometheus.NewDesc("baton_tasks", "Tasks by tenant, queue and status, as of the last applied entry.",
		[]string{"tenant", "queue", "status"}, nil)
	descCommands = prometheus.NewDesc("baton_fsm_commands_total",
		"Commands this node applied since it started or last restored a snapshot, by kind and result code (\"ok\" for success).",
		[]string{"kind", "code"}, nil)
	descClaims = prometheus.NewDesc("baton_task_claims_total",
		"Successful task claims (by id and from a queue) this node applied.", nil, nil)
	descRefusals = prometheus.NewDesc("baton_task_refusals_total",
		"Task commands refused with fenced (stale fencing token) or lease_held (someone else's live lease).", []string{"code"}, nil)
	descExpiries = prometheus.NewDesc("baton_task_lease_expiries_total",
		"Claims that took a task over from an expired lease.", nil, nil)
)

type domainCollector struct{ f *fsm.FSM }

func (c *domainCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descCommands, descClaims, descRefusals, descExpiries} {
		ch <- d
	}
}

func (c *domainCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.f.OpStats()
	for g, n := range st.Tasks {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(n), g.Tenant, g.Queue, g.Status)
	}
	var claims float64
	refusals := map[string]float64{fsm.CodeFenced: 0, fsm.CodeLeaseHeld: 0}
	for o, n := range st.Outcomes {
		code := o.Code
		if code == "" {
			code = "ok"
			if o.Kind == fsm.KindTaskClaim || o.Kind == fsm.KindTaskQueueClaim {
				claims += float64(n)
			}
		}
		if _, ok := refusals[o.Code]; ok {
			refusals[o.Code] += float64(n)
		}
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(n), string(o.Kind), code)
	}
	ch <- prometheus.MustNewConstMetric(descClaims, prometheus.CounterValue, claims)
	for code, n := range refusals {
		ch <- prometheus.MustNewConstMetric(descRefusals, prometheus.CounterValue, n, code)
	}
	ch <- prometheus.MustNewConstMetric(descExpiries, prometheus.CounterValue, float64(st.LeaseExpiries))
}

// chunkUsageEvery bounds how often a scrape walks the chunk directory.
const chunkUsageEvery = 15 * time.Second

// registerNodeMetrics adds the metrics of this node's storage: chunk
// bodies, snapshots, the repair backlog.
func (s *Server) registerNodeMetrics() {
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	var usage struct {
		at           time.Time
		count, bytes int64
	}
	chunkUsage := func() (int64, int64) {
		if s.cfg.Chunks == nil {
			return 0, 0
		}
		if time.Since(usage.at) > chunkUsageEvery {
			if c, b, err := s.cfg.Chunks.Usage(); err == nil {
				usage.count, usage.bytes, usage.at = c, b, time.Now()
			}
		}
		return usage.count, usage.bytes
	}
	// A scrape may run the functions concurrently: the cache is guarded.
	var mu sync.Mutex
	locked := func(fn func() float64) func() float64 {
		return func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return fn()
		}
	}
	snaps := func() node.SnapshotStats {
		if sn, ok := s.cluster.(interface{ SnapshotStats() node.SnapshotStats }); ok {
			return sn.SnapshotStats()
		}
		return node.SnapshotStats{}
	}
	s.metrics.reg.MustRegister(
		gauge("baton_chunk_store_bodies", "Chunk bodies stored on this node (refreshed at most every 15 s).",
			locked(func() float64 { c, _ := chunkUsage(); return float64(c) })),
		gauge("baton_chunk_store_bytes", "Bytes the chunk bodies take on this node's disk, as stored: compressed with --chunk-compression zstd (refreshed at most every 15 s).",
			locked(func() float64 { _, b := chunkUsage(); return float64(b) })),
		gauge("baton_chunk_repair_backlog", "Chunk bodies the replicated index names that this node lacked after its last repair pass.",
			func() float64 { return float64(s.chunks.RepairBacklog()) }),
		gauge("baton_chunk_copy_backlog_bytes", "Bytes of chunk bodies held by copies to peers still in flight after their upload was answered (bounded by --chunk-copy-backlog-bytes).",
			func() float64 { return float64(s.chunks.CopyBacklog()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "baton_chunk_copies_stopped_total", Help: "Copies of chunk bodies to peers stopped because the copy backlog was full (--chunk-copy-backlog-bytes); repair brings those peers the bodies later."},
			func() float64 { return float64(s.chunks.CopiesStopped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "baton_snapshots_total", Help: "Raft snapshots this node persisted since it started."},
			func() float64 { return float64(snaps().Count) }),
		gauge("baton_snapshot_last_bytes", "Size of the last snapshot this node persisted.",
			func() float64 { return float64(snaps().LastBytes) }),
		gauge("baton_snapshot_last_duration_seconds", "Time the last snapshot this node persisted took to write.",
			func() float64 { return snaps().LastSeconds }),
	)
}
