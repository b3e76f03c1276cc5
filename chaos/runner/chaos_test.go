package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// shortSeed is the first seed of TestChaosShort. Its three consecutive
// seeds plan three faults each and rotate through all eight kinds.
const shortSeed = 1

// TestChaosShort is the short schedule `make test` runs: three seeded runs
// of 9 seconds of traffic with three faults each, covering every fault
// kind. A failure prints the replay command and keeps the run's artifacts
// (history, porcupine HTML, node logs) in a directory it names.
func TestChaosShort(t *testing.T) {
	bin := needBatond(t)
	out := t.TempDir()
	if d := os.Getenv("CHAOS_OUT"); d != "" {
		out = d
	}
	cfg := Config{Binary: bin, Seed: shortSeed, Traffic: 9 * time.Second, FaultsPerRun: 3, OutDir: out, Logf: t.Logf, TLS: true}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := Series(ctx, cfg, 3, func(r *Result) {
		t.Logf("seed %d: %d faults, %d ops (ok %d, failed %d, unknown %d), %d anomalies, %v",
			r.Seed, len(r.Faults), r.Ops.Total, r.Ops.OK, r.Ops.Fail, r.Ops.Unknown, len(r.Anomalies), r.Duration.Round(time.Millisecond))
	})
	var b strings.Builder
	s.Table(&b)
	t.Log("\n" + b.String())
	if s.TotalAnomalies() > 0 {
		logReports(t, s)
		where := "set CHAOS_OUT=DIR to keep the artifacts"
		if os.Getenv("CHAOS_OUT") != "" {
			where = "artifacts kept in " + out
		}
		t.Fatalf("got %d anomalies, want 0 (%s)", s.TotalAnomalies(), where)
	}
	// The three seeds plan every kind; on a loaded machine healing may take
	// long enough that a run's last fault no longer fits, so this is only
	// reported.
	if n := len(s.Faults); n != 8 {
		t.Logf("note: %d fault kinds were injected (%v), 8 were planned", n, s.Faults)
	}
	if s.Ops.Total < 300 {
		t.Errorf("got %d operations, want at least 300: the workload barely ran", s.Ops.Total)
	}
}

// logReports logs the report of every failing run, whose directory may be
// a t.TempDir that is removed after the test.
func logReports(t *testing.T, s *Summary) {
	t.Helper()
	for _, r := range s.FailedRuns {
		if r.Dir == "" {
			continue
		}
		if b, err := os.ReadFile(r.Dir + "/report.txt"); err == nil {
			t.Logf("report of seed %d:\n%s", r.Seed, b)
		}
	}
}
