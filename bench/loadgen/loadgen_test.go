package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsOnlyTheWindow(t *testing.T) {
	var calls atomic.Int64
	op := func(ctx context.Context, w *Worker) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		w.Observe("part", time.Millisecond)
		if w.Rand.IntN(10) == 0 {
			return errors.New("boom")
		}
		return nil
	}
	out := Run(context.Background(), Config{Workers: 4, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Seed: 7}, op)
	r := out.Run
	if r.Ops == 0 || r.Errors == 0 || r.Ops+r.Errors >= calls.Load() {
		t.Fatalf("got ops %d errors %d of %d calls, want both > 0 and fewer than all calls (warm-up excluded)", r.Ops, r.Errors, calls.Load())
	}
	if r.Latency.Count != r.Ops || r.Stages["part"].Count != r.Ops+r.Errors {
		t.Fatalf("got %d latencies and %d stage samples, want %d and %d", r.Latency.Count, r.Stages["part"].Count, r.Ops, r.Ops+r.Errors)
	}
	if r.WindowMS < 299 || r.OpsPerSec <= 0 {
		t.Fatalf("got window %.0f ms, %.0f ops/s", r.WindowMS, r.OpsPerSec)
	}
}

func TestRunEndsWhenDrained(t *testing.T) {
	var left atomic.Int64
	left.Store(200)
	op := func(ctx context.Context, w *Worker) error {
		if left.Add(-1) < 0 {
			return ErrDrained
		}
		time.Sleep(time.Millisecond)
		return nil
	}
	t0 := time.Now()
	out := Run(context.Background(), Config{Workers: 4, Duration: 10 * time.Second}, op)
	if time.Since(t0) > 5*time.Second || out.Run.Ops != 200 || len(out.Run.Notes) == 0 {
		t.Fatalf("got %d ops in %v, notes %v; want 200 ops, an early end and a note", out.Run.Ops, time.Since(t0), out.Run.Notes)
	}
}

func TestAnalyzeKill(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	var trace []OpRecord
	// 1000 ops/s until the kill at 5 s, nothing until 5.8 s, then 1000 ops/s.
	for t := 0; t < 10000; t++ {
		if t >= 5000 && t < 5800 {
			continue
		}
		trace = append(trace, OpRecord{StartNS: ms(t) - ms(1)/2, EndNS: ms(t), OK: true})
	}
	// An operation that started before the kill and finished after it
	// does not count as the first write.
	trace = append(trace, OpRecord{StartNS: ms(4999), EndNS: ms(5100), OK: true})
	k := AnalyzeKill(trace, 5*time.Second, 0)
	if k.FirstWriteMS < 799 || k.FirstWriteMS > 801 {
		t.Errorf("first write: got %.1f ms, want 800", k.FirstWriteMS)
	}
	if k.BaselineOpsPerSec < 990 || k.BaselineOpsPerSec > 1010 {
		t.Errorf("baseline: got %.0f, want 1000", k.BaselineOpsPerSec)
	}
	// The first 1 s window with >= 900 ops starts at 5.7 s.
	if k.Recover90MS < 690 || k.Recover90MS > 710 {
		t.Errorf("recovered: got %.0f ms, want about 700", k.Recover90MS)
	}
}

// fakeSystem fails every write for down after each kill.
type fakeSystem struct {
	mu       sync.Mutex
	downTill time.Time
	down     time.Duration
	restarts int
}

func (f *fakeSystem) write(ctx context.Context) error {
	f.mu.Lock()
	until := f.downTill
	f.mu.Unlock()
	if time.Now().Before(until) {
		time.Sleep(time.Millisecond)
		return errors.New("unavailable")
	}
	time.Sleep(time.Millisecond)
	return nil
}

func (f *fakeSystem) KillLeader(ctx context.Context) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := time.Now()
	f.downTill = at.Add(f.down)
	return "n1", at, nil
}

func (f *fakeSystem) Restart(ctx context.Context, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarts++
	return nil
}

func TestRecovery(t *testing.T) {
	f := &fakeSystem{down: 300 * time.Millisecond}
	s := KillSchedule{First: 500 * time.Millisecond, Period: 3500 * time.Millisecond, Down: 100 * time.Millisecond, Count: 2}
	op := func(ctx context.Context, w *Worker) error { return f.write(ctx) }
	r, err := Recovery(context.Background(), Config{Workers: 4, Warmup: 100 * time.Millisecond}, s, f, op, f.write)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kills) != 2 || f.restarts != 2 || r.Failed != "" {
		t.Fatalf("got kills %+v, %d restarts, failed %q; want 2 each", r.Kills, f.restarts, r.Failed)
	}
	for _, k := range r.Kills {
		// Writes fail for 300 ms after each kill; a busy machine adds delay.
		if k.FirstWriteMS < 290 || k.FirstWriteMS > 800 || k.LoadFirstWriteMS < 290 || k.LoadFirstWriteMS > 800 {
			t.Errorf("got %+v, want the first writes 300 ms (up to 800 ms) after the kill", k)
		}
		if k.Recover90MS < 0 || k.Recover90MS > 2000 {
			t.Errorf("got %+v, want throughput back within the period", k)
		}
	}
	if v, _ := r.Metric("unavailable_median_ms"); v < 290 {
		t.Errorf("got median unavailability %v ms, want about 300", v)
	}
}
