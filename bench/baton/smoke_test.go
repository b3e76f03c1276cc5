package baton

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/report"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"go.uber.org/goleak"
)

var batondBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bench-baton-")
	if err != nil {
		panic(err)
	}
	bin, err := cluster.BuildBatond(context.Background(), dir)
	if err != nil {
		panic(err)
	}
	batondBinary = bin
	// Fail when a goroutine the tests started outlives them.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// checkRun fails t unless r has the figures every run must have.
func checkRun(t *testing.T, r *result.Run, stages ...string) {
	t.Helper()
	if r.Ops == 0 || r.OpsPerSec <= 0 || r.Latency == nil || r.Latency.Count != r.Ops {
		t.Fatalf("%s: got ops=%d ops/s=%.1f latency=%v, want ops > 0 with one latency each", r.Key(), r.Ops, r.OpsPerSec, r.Latency)
	}
	if p50, p99 := r.Latency.Quantile(0.5), r.Latency.Quantile(0.99); p50 <= 0 || p99 < p50 {
		t.Fatalf("%s: got p50=%v p99=%v, want 0 < p50 <= p99", r.Key(), p50, p99)
	}
	if r.Series == nil || len(r.Series.OK) == 0 {
		t.Fatalf("%s: got no series", r.Key())
	}
	for _, s := range stages {
		if h := r.Stages[s]; h == nil || h.Count == 0 {
			t.Fatalf("%s: got no %q stage latencies", r.Key(), s)
		}
	}
	if r.Errors > 0 {
		t.Logf("%s: %d errors: %v", r.Key(), r.Errors, r.ErrorSamples)
	}
	t.Logf("%s: %.0f ops/s p50 %v p99 %v", r.Key(), r.OpsPerSec, r.Latency.Quantile(0.5), r.Latency.Quantile(0.99))
}

// TestBenchSmoke runs every Baton workload of the suite briefly (the soak
// for a few seconds) on one
// small cluster, and renders the report from what they measured, so the
// suite cannot rot.
func TestBenchSmoke(t *testing.T) {
	suite := &result.Suite{Started: time.Now(), Quick: true, Command: "go test ./bench/baton"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The driver's headline runs leave GOMAXPROCS to the nodes' runtime,
	// even when the driver's environment sets it.
	t.Setenv("GOMAXPROCS", "1")
	env, err := StartEnv(ctx, EnvConfig{Binary: batondBinary, BaseDir: t.TempDir(), Fast: true,
		Procs:     cluster.ProcsRuntime,
		ExtraArgs: append([]string{"--snapshot-threshold=64"}, ScaleArgs...)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	for i := range env.Cluster.Size() {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", env.Cluster.PID(i)))
		if err != nil {
			t.Logf("cannot check %s's environment: %v", env.Cluster.ID(i), err)
			continue
		}
		for _, kv := range strings.Split(string(environ), "\x00") {
			if strings.HasPrefix(kv, "GOMAXPROCS=") {
				t.Errorf("%s runs with %s, want none (ProcsRuntime)", env.Cluster.ID(i), kv)
			}
		}
	}
	p := Params{Warmup: 200 * time.Millisecond, Duration: time.Second, Seed: 1}

	r, err := CAS(ctx, env, p, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r)
	suite.Runs = append(suite.Runs, r)

	r, err = Soak(ctx, env, Params{Warmup: 200 * time.Millisecond, Duration: 2 * time.Second, Seed: 1},
		SoakParams{Clients: 4, SampleEvery: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r)
	if len(r.Memory) != env.Cluster.Size() {
		t.Fatalf("soak: got memory of %d nodes, want %d", len(r.Memory), env.Cluster.Size())
	}
	for _, m := range r.Memory {
		// Samples at the start, every 250 ms and at the end: 2.2 s.
		if len(m.Samples) < 4 {
			t.Fatalf("soak: %s has %d samples, want at least 4", m.Node, len(m.Samples))
		}
		heaps := 0
		for _, sm := range m.Samples {
			if sm.RSSBytes <= 0 {
				t.Fatalf("soak: %s sample %+v, want its RSS", m.Node, sm)
			}
			if sm.HeapBytes > 0 {
				heaps++
			}
		}
		// A scrape of /metrics may time out on a busy machine; most must
		// not (the node exports loadgen.HeapMetric).
		if heaps < 3 {
			t.Fatalf("soak: %s: heap read in %d of %d samples, want 3 at least (%+v)", m.Node, heaps, len(m.Samples), m.Samples)
		}
		for _, name := range []string{"heap_slope_mib_per_min_", "rss_max_bytes_", "heap_last_bytes_"} {
			if _, ok := r.Metric(name + m.Node); !ok {
				t.Fatalf("soak: no %s%s (metrics %v)", name, m.Node, r.Metrics)
			}
		}
	}
	t.Logf("soak: %v", r.Metrics)
	suite.Runs = append(suite.Runs, r)

	// Enough tasks for the warm-up and the window: the run ends when the
	// queue drains, and 300 could drain in the warm-up (no op measured).
	r, err = Queue(ctx, env, p, QueueParams{Workers: 4, Preload: 5000})
	if err != nil {
		t.Fatal(err)
	}
	// The update claims the next task (claim_next): a claim on its own
	// is only a worker's first, in the warm-up.
	checkRun(t, r, "update")
	suite.Runs = append(suite.Runs, r)

	r, err = Handoff(ctx, env, p, HandoffParams{AgentsPerStage: 2, Pipelines: 200, ArtifactSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, "claim", "publish", "txn")
	if v, _ := r.Metric("pipelines_per_min"); v <= 0 {
		t.Fatalf("handoff: got %v pipelines/min, want > 0", v)
	}
	suite.Runs = append(suite.Runs, r)

	r, err = Recovery(ctx, env, p, RecoveryParams{Clients: 4, Schedule: loadgen.KillSchedule{
		First: time.Second, Period: 2 * time.Second, Down: 300 * time.Millisecond, Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r)
	if len(r.Kills) != 1 || r.Kills[0].FirstWriteMS < 0 {
		t.Fatalf("recovery: got kills %+v (failed %q), want one with a write after it", r.Kills, r.Failed)
	}
	t.Logf("recovery: %+v", r.Kills)
	suite.Runs = append(suite.Runs, r)

	r, err = Scale(ctx, env, p, ScaleParams{Tasks: 3000, KVEntries: 300, Threads: 20, CheckpointsPerThread: 5, SmallTasks: 100,
		Workers: 4, SnapshotWait: 20 * time.Second, SnapshotThreshold: 64})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, "claim")
	if v, _ := r.Metric("checkpoints_loaded"); v != 100 {
		t.Fatalf("scale: got %v checkpoints loaded, want 100", v)
	}
	for _, m := range []string{"rss_bytes_n1", "heap_live_bytes_n1", "heap_live_bytes_per_task_n1", "restart_ready_ms", "snapshot_bytes_n1",
		"claim_p50_ms_100", "claim_p50_ms_3000", "load_checkpoints_s"} {
		if v, ok := r.Metric(m); !ok || v <= 0 {
			t.Fatalf("scale: got %s = %v, want > 0 (metrics %v, notes %v)", m, v, r.Metrics, r.Notes)
		}
	}
	t.Logf("scale: %v %v", r.Metrics, r.Notes)
	suite.Runs = append(suite.Runs, r)

	r, err = Artifacts(ctx, env, ArtifactParams{Size: 8 << 20, Seed: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"upload_mb_per_s", "download_mb_per_s", "reupload_mb_per_s", "patched_chunks_sent"} {
		if v, ok := r.Metric(m); !ok || v <= 0 {
			t.Fatalf("artifacts: got %s = %v, want > 0 (metrics %v)", m, v, r.Metrics)
		}
	}
	// The same content again sends no chunk; 1 MiB changed sends a few.
	if v, _ := r.Metric("reupload_chunks_sent"); v != 0 {
		t.Fatalf("artifacts: re-upload sent %v chunks, want 0", v)
	}
	if up, _ := r.Metric("upload_chunks"); r.Metrics["patched_chunks_sent"] >= up {
		t.Fatalf("artifacts: 1 MiB changed sent %v of %v chunks, want fewer", r.Metrics["patched_chunks_sent"], up)
	}
	suite.Runs = append(suite.Runs, r)

	suite.Finished = time.Now()
	dir := t.TempDir()
	if err := report.Write(suite, filepath.Join(dir, "benchmarks.md"), filepath.Join(dir, "bench")); err != nil {
		t.Fatal(err)
	}
	charts, _ := filepath.Glob(filepath.Join(dir, "bench", "*.svg"))
	if len(charts) < 6 {
		t.Fatalf("got charts %v, want one per workload at least", charts)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench", "soak-memory-baton.svg")); err != nil {
		t.Fatalf("soak memory chart: %v", err)
	}
}
