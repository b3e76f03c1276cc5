package loadgen

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

func TestReadCPUStat(t *testing.T) {
	text := []byte("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\ncpu1 50 3 25 400 10 2 1 5 4 0\nintr 1 2 3\n")
	s, ok := readCPUStat(text)
	// busy: user 100 + nice 5 + system 50 + irq 3 + softirq 2; guest (7)
	// is part of user already; idle 800, iowait 20 and steal 10 are not busy.
	if !ok || s.busy != 160 || s.iowait != 20 || s.total != 990 || s.cpus != 2 {
		t.Fatalf("got %+v ok=%v, want busy 160, iowait 20, total 990, 2 CPUs", s, ok)
	}
	later := cpuStat{busy: 190, iowait: 40, total: 1090, cpus: 2} // 30 busy, 20 iowait of 100
	if got := busyShare(s, later); got != 0.5 {
		t.Fatalf("busyShare: got %v, want 0.5 (iowait counts as busy)", got)
	}
	if got := busyShare(s, s); got != 0 {
		t.Fatalf("busyShare of no time: got %v, want 0", got)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\ncpu0 1 2 3\n", "cpu a b c d e f g h\ncpu0 1\n"} {
		if _, ok := readCPUStat([]byte(bad)); ok {
			t.Fatalf("readCPUStat(%q) accepted", bad)
		}
	}
}

// TestRunMeasuresTheMachinesCPU spins every worker on the CPU and wants
// the window's busy cores and CPU per operation in the run's metrics.
func TestRunMeasuresTheMachinesCPU(t *testing.T) {
	if _, ok := sampleCPU(); !ok {
		t.Skip("no /proc/stat on this machine")
	}
	op := func(ctx context.Context, w *Worker) error {
		for t0 := time.Now(); time.Since(t0) < 2*time.Millisecond; {
		}
		return nil
	}
	workers := runtime.NumCPU()
	out := Run(context.Background(), Config{Workers: workers, Warmup: 50 * time.Millisecond, Duration: 500 * time.Millisecond}, op)
	r := out.Run
	cores, ok := r.Metric(result.MetricCPUBusyCores)
	if !ok {
		t.Fatalf("no %s in %v", result.MetricCPUBusyCores, r.Metrics)
	}
	// The workers alone keep about min(workers, CPUs) cores busy, less
	// what the hypervisor steals (not busy time).
	if n, _ := r.Metric(result.MetricCPUCores); cores < 0.25 || cores > n+0.01 || n != float64(runtime.NumCPU()) {
		t.Fatalf("got %.2f busy of %.0f cores with %d spinning workers", cores, n, workers)
	}
	perOp, ok := r.Metric(result.MetricCPUMsPerOp)
	if want := cores / r.OpsPerSec * 1000; !ok || math.Abs(perOp-want) > 1e-9 {
		t.Fatalf("got %.3f ms per op, want %.3f", perOp, want)
	}
	// Each op spins 2 ms of wall time on one core; other processes only
	// add to the machine's busy time, so there is no upper bound.
	if perOp < 0.5 {
		t.Fatalf("got %.3f CPU ms per op for 2 ms spins", perOp)
	}
}
