// Package loadgen drives a closed-loop load: a number of workers, each
// looping one operation for a warm-up and a measured window, and turns what
// it saw into a result.Run. The Baton driver and the peers' program both
// use it, so every system is measured by the same code.
//
// Contracts:
//   - Every worker has its own random source, seeded from Config.Seed and
//     the worker's index, so a run's choices are reproducible.
//   - An operation counts in the window when it starts at or after the end
//     of the warm-up and before the window's end; latencies, Ops and
//     Errors cover exactly those operations. Completions of every
//     operation, warm-up included, go into the Series.
//   - An operation that returns ErrDrained stops its worker; once a worker
//     has drained, the window ends at the last worker's stop, so
//     throughput is the work done over the time it took.
//   - After a failed operation the worker pauses Config.ErrorPause before
//     the next one, so a system that fails fast is not spun hot.
//   - Run returns once every worker has stopped; an operation still
//     running Grace after the window's end sees its context cancelled.
//   - A soak's memory samples (SampleMemory) come from /proc/PID/status
//     and the server's own /metrics, the same for every system.
//   - The machine's CPU counters (/proc/stat) are read at the window's
//     start and end: Run.Metrics get the cores busy and the CPU time per
//     operation of every process on the machine (MetricCPUMsPerOp).
//   - The package imports only the standard library and bench/result.
package loadgen

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// Sentinels an operation may return.
var (
	// ErrDrained says there is no more work (an empty queue): the worker
	// stops.
	ErrDrained = errors.New("loadgen: no more work")
	// ErrIdle says the operation found nothing to do this time (a long
	// poll that came back empty): it counts neither as an operation nor
	// as an error, and the worker goes on at once.
	ErrIdle = errors.New("loadgen: nothing to do yet")
)

// Defaults of Config fields left zero.
const (
	DefaultBucket     = 100 * time.Millisecond
	DefaultErrorPause = 5 * time.Millisecond
	DefaultGrace      = 30 * time.Second
)

// Config describes one load.
type Config struct {
	Workers  int
	Warmup   time.Duration
	Duration time.Duration // the measured window, after Warmup
	Seed     uint64
	// Start is the run's time origin; zero means when Run is called. A
	// caller that schedules events during the run (leader kills) sets it.
	Start time.Time
	// Bucket is the Series resolution (DefaultBucket when zero).
	Bucket time.Duration
	// Trace keeps every operation's start, end and outcome, for
	// AnalyzeKill.
	Trace bool
	// ErrorPause is the pause after a failed operation (DefaultErrorPause
	// when zero).
	ErrorPause time.Duration
	// Grace bounds operations still running after the window's end
	// (DefaultGrace when zero).
	Grace time.Duration
}

func (c Config) withDefaults() Config {
	if c.Bucket <= 0 {
		c.Bucket = DefaultBucket
	}
	if c.ErrorPause <= 0 {
		c.ErrorPause = DefaultErrorPause
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	c.Workers = max(c.Workers, 1)
	return c
}

// Op is one operation of the workload, run by worker w.
type Op func(ctx context.Context, w *Worker) error

// Worker is one load goroutine's state, handed to every operation it runs.
type Worker struct {
	ID   int
	Rand *rand.Rand
	// State is free for the operation's own per-worker data.
	State any

	measuring bool
	stages    map[string]*result.Histogram
}

// Observe records the latency of a named part of the current operation,
// when that operation counts in the window.
func (w *Worker) Observe(stage string, d time.Duration) {
	if !w.measuring {
		return
	}
	h := w.stages[stage]
	if h == nil {
		h = &result.Histogram{}
		w.stages[stage] = h
	}
	h.Record(d)
}

// OpRecord is one traced operation, in nanoseconds since the run's start.
type OpRecord struct {
	StartNS int64
	EndNS   int64
	OK      bool
}

// Outcome is what a load measured.
type Outcome struct {
	Start time.Time
	Run   *result.Run // the figures; the caller sets System, Workload, Variant
	Trace []OpRecord  // when Config.Trace, in no particular order
}

// workerLog is what one worker recorded.
type workerLog struct {
	ok, errs  int64
	lat       result.Histogram
	stages    map[string]*result.Histogram
	okSeries  []int64
	errSeries []int64
	trace     []OpRecord
	errSeen   []string
	drainedAt time.Time
}

func (l *workerLog) count(series *[]int64, bucket int) {
	for len(*series) <= bucket {
		*series = append(*series, 0)
	}
	(*series)[bucket]++
}

func (l *workerLog) sampleError(err error) {
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	for _, s := range l.errSeen {
		if s == msg {
			return
		}
	}
	if len(l.errSeen) < 3 {
		l.errSeen = append(l.errSeen, msg)
	}
}

// Run drives op with cfg.Workers workers and returns what it measured.
func Run(ctx context.Context, cfg Config, op Op) *Outcome {
	cfg = cfg.withDefaults()
	start := cfg.Start
	windowStart := start.Add(cfg.Warmup)
	end := windowStart.Add(cfg.Duration)
	ctx, cancel := context.WithDeadline(ctx, end.Add(cfg.Grace))
	defer cancel()
	logs := make([]*workerLog, cfg.Workers)
	stopped := make(chan struct{})
	cpu := watchCPU(ctx, windowStart, end, stopped)
	var wg sync.WaitGroup
	for i := range logs {
		logs[i] = &workerLog{stages: map[string]*result.Histogram{}}
		w := &Worker{ID: i, Rand: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)), stages: logs[i].stages}
		wg.Go(func() { runWorker(ctx, cfg, start, windowStart, end, w, logs[i], op) })
	}
	wg.Wait()
	close(stopped)
	out := merge(cfg, start, windowStart, end, logs)
	cpu.record(out.Run)
	return out
}

func runWorker(ctx context.Context, cfg Config, start, windowStart, end time.Time, w *Worker, l *workerLog, op Op) {
	for ctx.Err() == nil {
		t0 := time.Now()
		if !t0.Before(end) {
			return
		}
		w.measuring = !t0.Before(windowStart)
		err := op(ctx, w)
		t1 := time.Now()
		if errors.Is(err, ErrDrained) {
			l.drainedAt = t0
			return
		}
		if errors.Is(err, ErrIdle) {
			continue
		}
		bucket := int(t1.Sub(start) / cfg.Bucket)
		if cfg.Trace {
			l.trace = append(l.trace, OpRecord{StartNS: int64(t0.Sub(start)), EndNS: int64(t1.Sub(start)), OK: err == nil})
		}
		if err != nil {
			l.count(&l.errSeries, bucket)
			if w.measuring {
				l.errs++
				l.sampleError(err)
			}
			pause(ctx, cfg.ErrorPause)
			continue
		}
		l.count(&l.okSeries, bucket)
		if w.measuring {
			l.ok++
			l.lat.Record(t1.Sub(t0))
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// merge combines the workers' logs into one Outcome. When workers
// drained, the window ends at the last drain (or the planned end, if
// earlier): every counted operation started before it.
func merge(cfg Config, start, windowStart, end time.Time, logs []*workerLog) *Outcome {
	out := &Outcome{Start: start, Run: &result.Run{
		Workers: cfg.Workers, Seed: cfg.Seed, WarmupMS: cfg.Warmup.Milliseconds(),
		Latency: &result.Histogram{}, Stages: map[string]*result.Histogram{},
		Series: &result.Series{BucketMS: cfg.Bucket.Milliseconds()},
	}}
	r := out.Run
	var lastDrain time.Time
	for _, l := range logs {
		if l.drainedAt.After(lastDrain) {
			lastDrain = l.drainedAt
		}
	}
	windowEnd := end
	if !lastDrain.IsZero() && lastDrain.Before(end) {
		windowEnd = lastDrain
	}
	if windowEnd.Before(end) {
		r.Notef("the work ran out %.1f s into the %.1f s window; throughput is over that part",
			windowEnd.Sub(windowStart).Seconds(), cfg.Duration.Seconds())
	}
	for _, l := range logs {
		r.Ops += l.ok
		r.Errors += l.errs
		r.Latency.Merge(&l.lat)
		for name, h := range l.stages {
			if r.Stages[name] == nil {
				r.Stages[name] = &result.Histogram{}
			}
			r.Stages[name].Merge(h)
		}
		addSeries(&r.Series.OK, l.okSeries)
		addSeries(&r.Series.Err, l.errSeries)
		out.Trace = append(out.Trace, l.trace...)
		for _, e := range l.errSeen {
			if len(r.ErrorSamples) < 8 && !contains(r.ErrorSamples, e) {
				r.ErrorSamples = append(r.ErrorSamples, e)
			}
		}
	}
	window := windowEnd.Sub(windowStart)
	r.WindowMS = float64(window) / float64(time.Millisecond)
	if window > 0 {
		r.OpsPerSec = float64(r.Ops) / window.Seconds()
	}
	if len(r.Stages) == 0 {
		r.Stages = nil
	}
	r.Compact()
	return out
}

func addSeries(dst *[]int64, src []int64) {
	for len(*dst) < len(src) {
		*dst = append(*dst, 0)
	}
	for i, n := range src {
		(*dst)[i] += n
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The windows AnalyzeKill compares: the baseline before the kill and each
// candidate window after it, tried every recoveryStep.
const (
	BaselineWindow = 3 * time.Second
	RecoveryWindow = time.Second
	recoveryStep   = 10 * time.Millisecond
)

// AnalyzeKill measures one crash from a trace: the baseline rate over
// BaselineWindow before killAt, the unavailability (kill to the completion
// of the first successful operation that started after it) and the time
// to the start of the first RecoveryWindow, at or after the kill and
// ending by until (the next kill; 0 for no bound), that completed at least
// 90% of the baseline rate. Times are since the run's start; the trace
// must come from a run with Config.Trace.
func AnalyzeKill(trace []OpRecord, killAt, until time.Duration) result.Kill {
	k := result.Kill{AtMS: ms(killAt), FirstWriteMS: firstWrite(trace, killAt), Recover90MS: -1}
	var ends []int64
	for _, op := range trace {
		if op.OK {
			ends = append(ends, op.EndNS)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	countIn := func(from, to int64) int {
		return sort.Search(len(ends), func(i int) bool { return ends[i] >= to }) -
			sort.Search(len(ends), func(i int) bool { return ends[i] >= from })
	}
	base := max(int64(killAt-BaselineWindow), 0)
	if span := time.Duration(int64(killAt) - base); span > 0 {
		k.BaselineOpsPerSec = float64(countIn(base, int64(killAt))) / span.Seconds()
	}
	want := 0.9 * k.BaselineOpsPerSec * RecoveryWindow.Seconds()
	if len(ends) == 0 || want <= 0 {
		return k
	}
	last := ends[len(ends)-1]
	if until > 0 {
		last = min(last, int64(until))
	}
	for s := int64(killAt); s+int64(RecoveryWindow) <= last; s += int64(recoveryStep) {
		if float64(countIn(s, s+int64(RecoveryWindow))) >= want {
			k.Recover90MS = ms(time.Duration(s) - killAt)
			break
		}
	}
	return k
}

// firstWrite is the time from killAt to the completion of the first
// successful operation that started at or after it; -1 when none did.
func firstWrite(trace []OpRecord, killAt time.Duration) float64 {
	first := -1.0
	for _, op := range trace {
		if op.OK && op.StartNS >= int64(killAt) {
			if d := ms(time.Duration(op.EndNS) - killAt); first < 0 || d < first {
				first = d
			}
		}
	}
	return first
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
