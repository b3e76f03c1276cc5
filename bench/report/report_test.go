package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// fakeRun is a run with n latencies of about lat.
func fakeRun(system, workload, variant string, opsPerSec float64, lat time.Duration) *result.Run {
	r := &result.Run{System: system, Workload: workload, Variant: variant, Ops: 1000, OpsPerSec: opsPerSec,
		Latency: &result.Histogram{}, Stages: map[string]*result.Histogram{"claim": {}, "update": {}},
		Series: &result.Series{BucketMS: 100}}
	for i := range 1000 {
		d := lat + time.Duration(i)*lat/1000
		r.Latency.Record(d)
		r.Stages["claim"].Record(d / 2)
		r.Stages["update"].Record(d / 2)
	}
	for i := range 100 {
		r.Series.OK = append(r.Series.OK, int64(100+i%7))
	}
	r.Compact()
	return r
}

// contains reports each of wants that text lacks.
func contains(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// render writes s's report into a temporary directory and returns it.
func render(t *testing.T, s *result.Suite) string {
	t.Helper()
	dir := t.TempDir()
	md := filepath.Join(dir, "benchmarks.md")
	if err := Write(s, md, filepath.Join(dir, "bench")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWrite(t *testing.T) {
	s := &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Minute), Command: "make bench",
		Machine: result.Machine{Cores: 2, CPUModel: "test", FsyncP50US: 300, FsyncP99US: 900,
			CPUTool: "probe", CPUStartMS: 210.4, CPUEndMS: 260.6}}
	bc, ec := fakeRun("baton", "cas", "C=64", 6000, 10*time.Millisecond), fakeRun("etcd", "cas", "C=64", 2000, 20*time.Millisecond)
	bc.SetMetric(result.MetricCPUBusyCores, 1.8)
	bc.SetMetric(result.MetricCPUMsPerOp, 0.3)
	ec.SetMetric(result.MetricCPUBusyCores, 1.6)
	ec.SetMetric(result.MetricCPUMsPerOp, 0.75)
	s.Runs = []*result.Run{
		bc, ec,
		fakeRun("baton", "cas", "C=1", 800, time.Millisecond),
		fakeRun("etcd", "cas", "C=1", 700, 2*time.Millisecond),
		fakeRun("baton", "queue", "W=64", 3000, 20*time.Millisecond),
		fakeRun("postgres", "queue", "W=64", 4000, 15*time.Millisecond),
		{System: "etcd", Workload: "queue", Failed: "etcd: boom"},
	}
	rec := fakeRun("baton", "recovery", "C=64", 5000, 10*time.Millisecond)
	rec.Kills = []result.Kill{{Node: "n1", AtMS: 3000, FirstWriteMS: 800, Recover90MS: 900}}
	rec.SetMetric("unavailable_median_ms", 800)
	s.Runs = append(s.Runs, rec)
	dir := t.TempDir()
	md := filepath.Join(dir, "docs", "benchmarks.md")
	if err := Write(s, md, filepath.Join(dir, "docs", "bench")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	contains(t, text,
		"| cas C=64: Baton ops/s ≥ 2× etcd's | 6,000 vs 2,000 ops/s: 3.00× | **met** |",
		"| queue W=64: Baton tasks/s ≥ 1.5× PostgreSQL SKIP LOCKED's (issue 34; moonshot 2×) | 3,000 vs 4,000 tasks/s: 0.75× | **missed** |",
		"| recovery: Baton median unavailability < etcd's | — | not measured |",
		"| single-core probe (lower is faster) | 210 ms at the start, 261 ms at the end |",
		"| 64 | ops/s | 6,000 | 2,000 | 3.00× |",
		"| 64 | machine CPU, cores busy | 1.80 | 1.60 | — |",
		"| 64 | machine CPU ms per op | 0.300 | 0.750 | 0.40× |",
		"| 1 | machine CPU ms per op | — | — | — |",
		"etcd queue **failed**: etcd: boom",
		"](bench/cas-C64-cdf.svg)",
		"](bench/recovery-baton.svg)",
	)
	svgs, _ := filepath.Glob(filepath.Join(dir, "docs", "bench", "*.svg"))
	if len(svgs) < 4 {
		t.Fatalf("got %d charts, want at least 4", len(svgs))
	}
	for _, p := range svgs {
		data, _ := os.ReadFile(p)
		var doc struct{ XMLName xml.Name }
		if err := xml.Unmarshal(data, &doc); err != nil || doc.XMLName.Local != "svg" {
			t.Errorf("%s: got %v (root %q), want a well-formed SVG document", p, err, doc.XMLName.Local)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestBusyMachineWarning: the report warns of other work only when the
// machine was busy before the run; a high load during a phase is the
// suite's own (PostgreSQL runs a process per connection).
func TestBusyMachineWarning(t *testing.T) {
	for _, tc := range []struct {
		start, phase float64
		warn         bool
	}{{0.4, 14.3, false}, {6.5, 11.4, true}} {
		s := &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Minute),
			Machine: result.Machine{Cores: 2, LoadAvgAtStart: tc.start},
			Phases:  []result.Phase{{Name: "queue / postgres", Seconds: 27, LoadAvg: tc.phase}},
			Runs:    []*result.Run{fakeRun("baton", "cas", "C=64", 6000, 10*time.Millisecond)}}
		if got := strings.Contains(render(t, s), "was not idle when the run began"); got != tc.warn {
			t.Errorf("load %.1f before, %.1f during: warning %v, want %v", tc.start, tc.phase, got, tc.warn)
		}
	}
}

// TestRounds: with several rounds, every figure and ratio comes from each
// system's median round by throughput, and every round is listed.
func TestRounds(t *testing.T) {
	s := &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Minute),
		Machine: result.Machine{Cores: 2}}
	add := func(system string, round int, ops float64, lat time.Duration) {
		r := fakeRun(system, "cas", "C=64", ops, lat)
		r.Round = round
		r.Notes = []string{"a note every round makes"}
		s.Runs = append(s.Runs, r)
	}
	add("baton", 1, 5000, 12*time.Millisecond)
	add("etcd", 1, 2600, 24*time.Millisecond)
	add("etcd", 2, 1000, 60*time.Millisecond) // a slow minute of the machine
	s.Runs[len(s.Runs)-1].SetMetric(result.MetricCPUBusyCores, 0.7)
	s.Runs[0].SetMetric(result.MetricCPUBusyCores, 1.85)
	add("baton", 2, 6000, 10*time.Millisecond)
	add("baton", 3, 3000, 20*time.Millisecond)
	add("etcd", 3, 2500, 25*time.Millisecond)
	s.Runs = append(s.Runs, &result.Run{System: "etcd", Workload: "cas", Variant: "C=64", Round: 4, Failed: "boom"})
	if got := s.Find("cas", "C=64", "baton"); got.OpsPerSec != 5000 {
		t.Fatalf("Find picked the round with %v ops/s, want the median 5000", got.OpsPerSec)
	}
	if got := s.Find("cas", "C=64", "etcd"); got.OpsPerSec != 2500 {
		t.Fatalf("Find picked the etcd round with %v ops/s, want the median of the completed rounds, 2500", got.OpsPerSec)
	}
	text := render(t, s)
	contains(t, text,
		"| cas C=64: Baton ops/s ≥ 2× etcd's | 5,000 vs 2,500 ops/s: 2.00× | **met** |",
		"| 64 | ops/s | 5,000 | 2,500 | 2.00× |",
		"| clients | system | round 1 | round 2 | round 3 | round 4 |",
		"| 64 | Baton | *5,000* (1.85) | 6,000 | 3,000 | — |",
		"| 64 | etcd | 2,600 | 1,000 (0.70) | *2,500* | failed |",
		"- etcd cas C=64 (round 4) **failed**: boom",
	)
	for _, once := range []string{"- Baton cas C=64: a note every round makes", "- etcd cas C=64: a note every round makes"} {
		if n := strings.Count(text, once); n != 1 {
			t.Errorf("report says %q %d times, want once", once, n)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// at sets a run's GOMAXPROCS setting.
func at(procs string, r *result.Run) *result.Run {
	r.Procs = procs
	return r
}

// TestPinned: the headline tables and the goals are the default runs; the
// pinned runs get their own section after them, tabled against the
// default ones, and the machine table states both settings.
func TestPinned(t *testing.T) {
	def, pin := result.ProcsDefault, result.ProcsPinned
	s := &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Minute), Command: "make bench",
		Machine: result.Machine{Cores: 2, MemberProcs: 1, DefaultProcs: 2}}
	s.Runs = []*result.Run{
		at(def, fakeRun("baton", "cas", "C=64", 6000, 10*time.Millisecond)),
		at(def, fakeRun("etcd", "cas", "C=64", 2000, 20*time.Millisecond)),
		at(pin, fakeRun("baton", "cas", "C=64", 5000, 12*time.Millisecond)),
		at(pin, fakeRun("etcd", "cas", "C=64", 2500, 16*time.Millisecond)),
		at(def, fakeRun("baton", "queue", "W=64", 3000, 20*time.Millisecond)),
		at(def, fakeRun("etcd", "queue", "W=64", 700, 40*time.Millisecond)),
		at(def, fakeRun("postgres", "queue", "W=64", 4000, 15*time.Millisecond)),
		at(pin, fakeRun("baton", "queue", "W=64", 3300, 18*time.Millisecond)),
		{System: "etcd", Workload: "queue", Procs: pin, Failed: "etcd: boom"},
	}
	text := render(t, s)
	contains(t, text,
		"| GOMAXPROCS of each batond and etcd member | default: 2 (the Go runtime's choice), for every workload and the goals; pinned: 1 (cores / members), for the second table (cas, queue) |",
		"The headline figures and every goal's verdict are at **default GOMAXPROCS**",
		"Every verdict is at default GOMAXPROCS",
		"| cas C=64: Baton ops/s ≥ 2× etcd's | 6,000 vs 2,000 ops/s: 3.00× | **met** |",
		"| queue W=64: Baton tasks/s ≥ 1.5× PostgreSQL SKIP LOCKED's (issue 34; moonshot 2×) | 3,000 vs 4,000 tasks/s: 0.75× | **missed** |",
		"| 64 | ops/s | 6,000 | 2,000 | 3.00× |",
		"| 64 | tasks/s | 3,000 | 700 | 4,000 | 4.29× | 0.75× |",
		"## pinned: every member at GOMAXPROCS = cores / members",
		"GOMAXPROCS 1 (its share of the cores",
		"can keep waking idle processors",
		"### cas: fenced updates of one's own task",
		"| 64 | ops/s | 5,000 | 2,500 | 2.00× |",
		"| workers | figure | Baton | etcd | Baton/etcd |",
		"| 64 | tasks/s | 3,300 | — | — |",
		"### default against pinned",
		"| cas C=64 | Baton | 6,000 | 5,000 | 0.83× |",
		"| cas C=64 | etcd | 2,000 | 2,500 | 1.25× |",
		"| queue W=64 | Baton | 3,000 | 3,300 | 1.10× |",
		"| queue W=64 | etcd | 700 | failed | — |",
		"- etcd queue (pinned) **failed**: etcd: boom",
	)
	headline, pinned := strings.Index(text, "## cas: "), strings.Index(text, "## pinned: ")
	if headline < 0 || pinned < headline || strings.Index(text, "## queue: ") > pinned {
		t.Errorf("the pinned section (at %d) does not follow the headline tables (cas at %d)", pinned, headline)
	}
	if strings.Contains(text, "pinned-cas") || strings.Count(text, "](bench/cas-C64-cdf.svg)") != 1 {
		t.Error("the pinned section repeats the cas charts; want them once, at default")
	}
	if t.Failed() || os.Getenv("BENCH_REPORT_SHOW") != "" {
		t.Log(text)
	}

	// --pinned=false: only the default runs.
	s.Runs = []*result.Run{at(def, fakeRun("baton", "cas", "C=64", 6000, 10*time.Millisecond))}
	text = render(t, s)
	contains(t, text, "pinned: not run (`--pinned=false`)", "Every verdict is at default GOMAXPROCS")

	// The driver's environment sets GOMAXPROCS: the pinned members inherit it.
	s.Runs = append(s.Runs, at(pin, fakeRun("baton", "cas", "C=64", 5000, 12*time.Millisecond)))
	s.Machine.DriverProcs, s.Machine.MemberProcs = 2, 2
	contains(t, render(t, s), "pinned: 2 (the driver's), for the second table (cas)",
		"| GOMAXPROCS of the driver and load generator | 2 (set in its environment) |",
		"GOMAXPROCS 2 (the driver's GOMAXPROCS, which the pinned members inherit)")
	s.Machine.DriverProcs, s.Machine.MemberProcs = 0, 1
	s.Runs = s.Runs[:1]
	if strings.Contains(text, "## pinned") {
		t.Error("a suite without pinned runs has a pinned section")
	}

	// A suite from before the settings: every run pinned, all headline.
	s.Runs = []*result.Run{fakeRun("baton", "cas", "C=64", 6000, 10*time.Millisecond)}
	s.Machine.DefaultProcs = 0
	text = render(t, s)
	contains(t, text, "| GOMAXPROCS of each batond and etcd member | 1 |", "| 64 | ops/s | 6,000 |")
	if strings.Contains(text, "## pinned") || strings.Contains(text, "Every verdict is at default") {
		t.Error("an old suite renders as default-and-pinned")
	}
}
