package report

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// TestPythonRows: the sdk runs (Go, Python, TypeScript) are told apart by their client, the
// langgraph runs by their saver, and both rows' goals are judged.
func TestPythonRows(t *testing.T) {
	s := &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Minute), Command: "make bench",
		Machine: result.Machine{Cores: 2, CPUModel: "test"}}
	sdk := func(client, variant string, ops float64, lat time.Duration) *result.Run {
		r := fakeRun(result.SystemBaton, result.WorkloadSDK, variant, ops, lat)
		r.Client, r.Procs = client, result.ProcsDefault
		return r
	}
	lg := func(system, variant string, ops float64, lat time.Duration) *result.Run {
		r := fakeRun(system, result.WorkloadLangGraph, variant, ops, lat)
		r.Procs = result.ProcsDefault
		return r
	}
	s.Runs = []*result.Run{
		sdk(result.ClientGo, "C=64", 8000, 7*time.Millisecond),
		sdk(result.ClientPython, "C=64", 5000, 12*time.Millisecond),
		sdk(result.ClientPythonPerWorker, "C=64", 6000, 10*time.Millisecond),
		sdk(result.ClientTypeScript, "C=64", 4000, 14*time.Millisecond),
		sdk(result.ClientGo, "C=1", 800, time.Millisecond),
		sdk(result.ClientPython, "C=1", 600, 1500*time.Microsecond),
		lg(result.SystemBaton, "T=32", 400, 80*time.Millisecond),
		lg(result.SystemPostgres, "T=32", 300, 100*time.Millisecond),
		lg(result.SystemSQLite, "T=32", 500, 60*time.Millisecond),
		lg(result.SystemBaton, "T=1", 150, 6*time.Millisecond),
		lg(result.SystemPostgres, "T=1", 400, 2*time.Millisecond),
	}
	text := render(t, s)
	contains(t, text,
		"| sdk C=64: Python SDK ops/s ≥ 60% of the Go SDK's | 5,000 vs 8,000 ops/s: 62% | **met** |",
		"| sdk C=64: TypeScript SDK ops/s ≥ 60% of the Go SDK's | 4,000 vs 8,000 ops/s: 50% | **missed** |",
		"| langgraph T=32: Baton steps/s ≥ the PostgreSQL saver's | 400 vs 300 steps/s: 1.33× | **met** |",
		"| langgraph T=1: Baton p50 step ≤ 2× the PostgreSQL saver's",
		"## sdk: the Python SDK beside the Go SDK",
		"| clients | figure | Python SDK | Go SDK | Python SDK, a client per worker | TypeScript SDK | Python SDK/Go SDK |",
		"| 64 | ops/s | 5,000 | 8,000 | 6,000 | 4,000 | 0.62× |",
		"## langgraph: a LangGraph step through three checkpoint savers",
		"| 32 | steps/s | 400 | 300 | 500 | 1.33× | 0.80× |",
	)
	// p50s of about 2.25 and 1.5 ms: 0.75 ms apart, more than 0.3.
	if !regexp.MustCompile(`\| sdk C=1: Python SDK p50 within 0\.30 ms of the Go SDK's \| 2\.2\d vs 1\.[45]\d ms: \+0\.7\d ms \| \*\*missed\*\* \|`).MatchString(text) {
		t.Error("the sdk C=1 goal is not judged missed")
	}
}

// TestInclude: hand-written fragments end the report verbatim.
func TestInclude(t *testing.T) {
	dir := t.TempDir()
	frag := filepath.Join(dir, "chunking.md")
	if err := os.WriteFile(frag, []byte("## Chunking\n\nby hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &result.Suite{Started: time.Now(), Finished: time.Now(), Machine: result.Machine{Cores: 2}}
	md := filepath.Join(dir, "benchmarks.md")
	if err := WriteWith(s, md, filepath.Join(dir, "bench"), Options{Include: []string{frag}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(md)
	contains(t, string(b), "\n\n## Chunking\n\nby hand\n")
	if err := WriteWith(s, md, filepath.Join(dir, "bench"), Options{Include: []string{filepath.Join(dir, "missing.md")}}); err == nil {
		t.Error("a missing fragment: no error")
	}
}
