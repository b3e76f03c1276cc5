package baton

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/machine"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/client"
)

// ScaleParams size the scale workload.
type ScaleParams struct {
	Tasks     int // pending tasks loaded into one queue
	KVEntries int
	// Threads checkpoint threads of CheckpointsPerThread checkpoints each
	// (a chain in the default namespace), loaded after the KV entries.
	Threads, CheckpointsPerThread int
	// SmallTasks is the queue size the claim latency among Tasks is
	// compared with: measured first, on the fresh cluster (0: skipped).
	SmallTasks int
	Workers    int // queue workers for the claim latency
	// SnapshotWait bounds the wait for every node to snapshot the loaded
	// state.
	SnapshotWait time.Duration
	// SnapshotThreshold is the cluster's --snapshot-threshold; 0 means
	// batond's default, DefaultSnapshotThreshold.
	SnapshotThreshold int
}

// ScaleArgs are the batond flags the scale workload's cluster needs: raft
// checks whether to snapshot every --snapshot-interval (120 s by default,
// jittered up to twice that), too rarely for a run of a few minutes. The
// snapshot threshold stays batond's default.
var ScaleArgs = []string{"--snapshot-interval=5s"}

// DefaultSnapshotThreshold is batond's default --snapshot-threshold: raft
// snapshots only once that many entries follow the last snapshot. Group
// commit packs the load into few entries (about 9,000 for a million
// tasks), so after the load the workload writes more entries than that,
// one at a time, and the next snapshot covers the whole load.
const DefaultSnapshotThreshold = 8192

// Scale is the scale workload: it loads Tasks tasks and KVEntries KV
// entries, waits for every node to snapshot them, and reports the resident
// memory of each node, the snapshot's size and the time to write it, the
// time a follower killed with SIGKILL takes from restart to ready, and the
// queue claim latency among the loaded tasks. The cluster should run with
// ScaleArgs.
func Scale(ctx context.Context, env *Env, p Params, sp ScaleParams) (*result.Run, error) {
	r := &result.Run{System: result.SystemBaton, Workload: result.WorkloadScale,
		Variant: fmt.Sprintf("tasks=%d", sp.Tasks), Seed: p.Seed}
	c := env.Cluster
	payload := json.RawMessage(`{"prompt":"summarise the sources","sources":3}`)
	if sp.SmallTasks > 0 {
		if err := claimAmong(ctx, env, p, sp, "small", sp.SmallTasks, r); err != nil {
			return nil, err
		}
	}
	took, err := env.Load(ctx, sp.Tasks, 8, func(i int) client.TxnOp {
		return client.TxnCreateTask(client.CreateTaskRequest{TaskID: "s" + strconv.Itoa(i), Queue: "scale", Payload: payload})
	})
	if err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	r.Notef("batond flags: %s", strings.Join(ScaleArgs, " "))
	r.SetMetric("tasks_loaded", float64(sp.Tasks))
	r.SetMetric("load_tasks_s", took.Seconds())
	r.SetMetric("load_tasks_per_s", float64(sp.Tasks)/took.Seconds())
	value := json.RawMessage(`{"fact":"the sky is blue","confidence":0.9,"source":"https://example.org/a"}`)
	took, err = env.Load(ctx, sp.KVEntries, 8, func(i int) client.TxnOp {
		return client.TxnPutKV("facts", "k/"+strconv.Itoa(i), client.PutKVRequest{Value: value})
	})
	if err != nil {
		return nil, fmt.Errorf("load kv: %w", err)
	}
	r.SetMetric("kv_loaded", float64(sp.KVEntries))
	r.SetMetric("load_kv_s", took.Seconds())
	if sp.Threads > 0 {
		took, err := loadThreads(ctx, env, sp.Threads, sp.CheckpointsPerThread)
		if err != nil {
			return nil, fmt.Errorf("load checkpoints: %w", err)
		}
		r.SetMetric("threads_loaded", float64(sp.Threads))
		r.SetMetric("checkpoints_loaded", float64(sp.Threads*sp.CheckpointsPerThread))
		r.SetMetric("load_checkpoints_s", took.Seconds())
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	index, err := c.WaitConverged(wctx)
	cancel()
	if err != nil {
		return nil, err
	}
	r.SetMetric("applied_index", float64(index))
	threshold := sp.SnapshotThreshold
	if threshold == 0 {
		threshold = DefaultSnapshotThreshold
	}
	if err := fillLog(ctx, env, threshold+64); err != nil {
		return nil, err
	}
	if err := waitSnapshots(ctx, env, index, sp.SnapshotWait); err != nil {
		r.Notef("%v", err)
	}
	for i := range c.Size() {
		id := c.ID(i)
		if rss, err := loadgen.RSS(c.PID(i)); err == nil {
			r.SetMetric("rss_bytes_"+id, float64(rss))
		}
		r.SetMetric("data_dir_bytes_"+id, float64(machine.DirSize(c.DataDir(i))))
		if fi, err := os.Stat(filepath.Join(c.DataDir(i), "raft.db")); err == nil {
			r.SetMetric("raft_log_bytes_"+id, float64(fi.Size()))
		} else if fi, err := os.Stat(filepath.Join(c.DataDir(i), "wal")); err == nil && fi.IsDir() {
			r.SetMetric("raft_log_bytes_"+id, float64(machine.DirSize(filepath.Join(c.DataDir(i), "wal"))))
		}
		if sz, err := newestSnapshotSize(c.DataDir(i)); err == nil {
			r.SetMetric("snapshot_bytes_"+id, float64(sz))
		}
		if d, ok := snapshotDuration(c.LogPath(i)); ok {
			r.SetMetric("snapshot_ms_"+id, float64(d)/float64(time.Millisecond))
		}
		if live, err := scrapeGauge(ctx, c.URL(i), "baton_go_heap_live_bytes"); err == nil {
			r.SetMetric("heap_live_bytes_"+id, live)
			if sp.Tasks > 0 {
				r.SetMetric("heap_live_bytes_per_task_"+id, live/float64(sp.Tasks))
			}
		} else {
			r.Notef("%s: live heap: %v", id, err)
		}
	}
	r.Notef("live heap = the Go runtime's live heap at its last garbage collection (baton_go_heap_live_bytes on /metrics), " +
		"read with the resident memory; per task = that heap / tasks loaded (KV entries and everything else included)")
	if err := measureBackup(ctx, env, r); err != nil {
		r.Notef("backup: %v", err)
	}
	if err := measureRestart(ctx, env, r); err != nil {
		return r, err
	}
	if sp.SmallTasks > 0 {
		if err := claimAmong(ctx, env, p, sp, "scale", sp.Tasks, r); err != nil {
			return r, err
		}
	}
	q, err := queueRun(ctx, env, p, "scale", sp.Workers, false)
	if err != nil {
		return r, err
	}
	r.Workers, r.WarmupMS, r.WindowMS = q.Workers, q.WarmupMS, q.WindowMS
	r.Ops, r.Errors, r.OpsPerSec, r.Latency, r.Stages = q.Ops, q.Errors, q.OpsPerSec, q.Latency, q.Stages
	r.Series, r.ErrorSamples = q.Series, q.ErrorSamples
	r.SetMetric("tasks_per_s", q.OpsPerSec)
	return r, nil
}

// scrapeGauge reads the value of an unlabelled gauge from a node's
// /metrics (Prometheus text format).
func scrapeGauge(ctx context.Context, baseURL, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s on /metrics", name)
}

// fillLog writes n small KV entries one after the other: n log entries.
func fillLog(ctx context.Context, env *Env, n int) error {
	c, err := env.Client(0)
	if err != nil {
		return err
	}
	for i := range n {
		op := client.TxnPutKV("filler", "k"+strconv.Itoa(i), client.PutKVRequest{Value: json.RawMessage(`1`)})
		if _, err := c.Txn(ctx, Tenant, []client.TxnOp{op}); err != nil {
			return fmt.Errorf("fill the log: %w", err)
		}
	}
	return nil
}

// waitSnapshots waits until every node's newest snapshot covers index.
func waitSnapshots(ctx context.Context, env *Env, index uint64, limit time.Duration) error {
	c := env.Cluster
	deadline := time.Now().Add(limit)
	for {
		behind := ""
		for i := range c.Size() {
			st, err := c.Status(ctx, i)
			if err != nil || st.LastSnapshotIndex < index {
				behind = c.ID(i)
				break
			}
		}
		if behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s had not snapshotted index %d after %v", behind, index, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// newestSnapshotSize is the size of the newest snapshot's state file in a
// node's file snapshot store (DATA/snapshots/<id>/state.bin).
func newestSnapshotSize(dataDir string) (int64, error) {
	dirs, err := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
	if err != nil || len(dirs) == 0 {
		return 0, fmt.Errorf("no snapshot in %s", dataDir)
	}
	var newest os.FileInfo
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err == nil && (newest == nil || fi.ModTime().After(newest.ModTime())) {
			newest = fi
		}
	}
	if newest == nil {
		return 0, fmt.Errorf("no snapshot in %s", dataDir)
	}
	return newest.Size(), nil
}

var (
	logTime       = regexp.MustCompile(`^time=(\S+)`)
	snapStarted   = regexp.MustCompile(`starting snapshot up to.*index=(\d+)`)
	snapCompleted = regexp.MustCompile(`snapshot complete up to.*index=(\d+)`)
)

// snapshotDuration reads a node's log for the last snapshot raft
// completed and returns the time from its "starting snapshot" line to its
// "snapshot complete" line.
func snapshotDuration(logPath string) (time.Duration, bool) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	started := map[string]time.Time{}
	var last time.Duration
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if s := snapStarted.FindStringSubmatch(line); s != nil {
			started[s[1]] = t
		} else if s := snapCompleted.FindStringSubmatch(line); s != nil {
			if t0, ok := started[s[1]]; ok {
				last, found = t.Sub(t0), true
			}
		}
	}
	return last, found
}

// measureBackup streams GET /v1/cluster/backup from the leader and records
// its size and time: a consistent snapshot as an operator takes it.
func measureBackup(ctx context.Context, env *Env, r *result.Run) error {
	var body []byte
	t0 := time.Now()
	if _, err := env.Admin.Do(ctx, http.MethodGet, "/v1/cluster/backup", nil, &body); err != nil {
		return err
	}
	r.SetMetric("backup_ms", float64(time.Since(t0))/float64(time.Millisecond))
	r.SetMetric("backup_bytes", float64(len(body)))
	return nil
}

// measureRestart kills a follower with SIGKILL, restarts it and records
// the time from the restart to its first 200 on /readyz.
func measureRestart(ctx context.Context, env *Env, r *result.Run) error {
	c := env.Cluster
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(lctx)
	if err != nil {
		return err
	}
	follower := (leader + 1) % c.Size()
	if err := c.Kill(follower); err != nil {
		return err
	}
	t0 := time.Now()
	rctx, cancel2 := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel2()
	if err := c.Restart(rctx, follower); err != nil {
		return fmt.Errorf("restart %s: %w", c.ID(follower), err)
	}
	healthy := time.Since(t0)
	if err := c.WaitReady(rctx, follower); err != nil {
		return fmt.Errorf("%s ready after restart: %w", c.ID(follower), err)
	}
	ready := time.Since(t0)
	r.SetMetric("restart_healthy_ms", float64(healthy)/float64(time.Millisecond))
	r.SetMetric("restart_ready_ms", float64(ready)/float64(time.Millisecond))
	if st, err := c.Status(ctx, follower); err == nil {
		r.SetMetric("restart_restored_snapshot_index", float64(st.RestoredSnapshotIndex))
	}
	if rss, err := loadgen.RSS(c.PID(follower)); err == nil {
		r.SetMetric("rss_bytes_after_restart_"+c.ID(follower), float64(rss))
	}
	r.Notef("restart-to-ready: %s (a follower) killed with SIGKILL, then started; ready = first 200 on /readyz", c.ID(follower))
	return nil
}

// claimAmong measures the queue claim latency among n pending tasks of
// queue (loading them first when the queue is not "scale", which Scale
// loads): workers claim a task and put it back, so the queue keeps its
// size. It records claim_p50_ms_<n> and claim_p99_ms_<n>.
func claimAmong(ctx context.Context, env *Env, p Params, sp ScaleParams, queue string, n int, r *result.Run) error {
	if queue != "scale" {
		if _, err := env.Load(ctx, n, 8, func(i int) client.TxnOp {
			return createTask(queue+"-"+strconv.Itoa(i), queue, nil)
		}); err != nil {
			return fmt.Errorf("load %d tasks: %w", n, err)
		}
	}
	q, err := queueRun(ctx, env, p, queue, sp.Workers, true)
	if err != nil {
		return err
	}
	h := q.Stages["claim"]
	if h == nil || h.Count == 0 {
		return fmt.Errorf("claim among %d tasks: no claim measured (%d errors: %v)", n, q.Errors, q.ErrorSamples)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.SetMetric("claim_p50_ms_"+strconv.Itoa(n), ms(h.Quantile(0.5)))
	r.SetMetric("claim_p99_ms_"+strconv.Itoa(n), ms(h.Quantile(0.99)))
	return nil
}

// loadThreads puts perThread checkpoints on each of threads threads, each
// checkpoint the child of the one before (LangGraph's steps), from 32
// loaders.
func loadThreads(ctx context.Context, env *Env, threads, perThread int) (time.Duration, error) {
	const loaders = 32
	cs, err := env.Clients(loaders)
	if err != nil {
		return 0, err
	}
	data := json.RawMessage(`{"channel_values":{"messages":["summarise the sources","here is the summary"]},"step":1}`)
	meta := json.RawMessage(`{"source":"loop","step":1}`)
	start := time.Now()
	next := make(chan int)
	errs := make(chan error, loaders)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for l := range loaders {
		go func() {
			var err error
			for t := range next {
				if err != nil {
					continue // drain: the feeder stops once ctx is cancelled
				}
				thread, parent := "t"+strconv.Itoa(t), ""
				for i := range perThread {
					id := fmt.Sprintf("c%04d", i)
					if _, err = cs[l].PutCheckpoint(ctx, Tenant, thread, id,
						client.PutCheckpointRequest{ParentID: parent, Data: data, Metadata: meta}); err != nil {
						cancel()
						break
					}
					parent = id
				}
			}
			errs <- err
		}()
	}
feed:
	for t := range threads {
		select {
		case next <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	var first error
	for range loaders {
		// The first loader's own error, not the cancellation it caused.
		if err := <-errs; err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return time.Since(start), first
}
