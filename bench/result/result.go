package result

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

// Systems under test, as Run.System spells them.
const (
	SystemBaton    = "baton"
	SystemEtcd     = "etcd"
	SystemPostgres = "postgres"
	// SystemSQLite is LangGraph's SQLite saver (langgraph-checkpoint-sqlite),
	// a peer in the langgraph workload only.
	SystemSQLite = "sqlite"
)

// Workloads, as Run.Workload spells them.
const (
	WorkloadCAS      = "cas"
	WorkloadQueue    = "queue"
	WorkloadHandoff  = "handoff"
	WorkloadRecovery = "recovery"
	WorkloadScale    = "scale"
	WorkloadSoak     = "soak"
	// WorkloadSDK is the cas operation through the Python SDK and the Go
	// SDK on one cluster (issue 28); Run.Client tells them apart.
	WorkloadSDK = "sdk"
	// WorkloadLangGraph is a LangGraph step (put, put_writes, get_tuple)
	// through a checkpoint saver (issue 29): Baton's, PostgreSQL's, SQLite's.
	WorkloadLangGraph = "langgraph"
	// WorkloadArtifacts is one large artifact's upload, download and
	// re-upload through the Go SDK (issue 34), Baton's alone.
	WorkloadArtifacts = "artifacts"
)

// SDKs of the sdk workload, as Run.Client spells them.
const (
	ClientGo = "go"
	// ClientPython is the Python SDK, one AsyncClient shared by the
	// workers (the goals' configuration).
	ClientPython = "python"
	// ClientPythonPerWorker is the Python SDK with an AsyncClient per
	// worker, as the Go SDK's workers each have their own client.
	ClientPythonPerWorker = "python-per-worker"
	// ClientTypeScript is the TypeScript SDK, one BatonClient shared by
	// the workers of one Node process.
	ClientTypeScript = "typescript"
)

// The members' GOMAXPROCS settings, as Run.Procs spells them.
const (
	// ProcsDefault leaves GOMAXPROCS to each member's Go runtime, as users
	// run it: the variable is absent from the members' environment. The
	// report's headline figures and the goals' verdicts are at this setting.
	ProcsDefault = "default"
	// ProcsPinned gives each member its share of the cores,
	// cmd/batond/cluster.MemberProcs (cores / members, at least 1), or the
	// driver's GOMAXPROCS when its environment sets one.
	ProcsPinned = "pinned"
)

// Run is one workload run against one system.
type Run struct {
	System   string `json:"system"`
	Workload string `json:"workload"`
	// Procs is the members' GOMAXPROCS setting, ProcsDefault or
	// ProcsPinned; empty in suites from before it was recorded, whose
	// members all ran pinned. PostgreSQL's runs (not a Go program, its
	// environment left alone) say ProcsDefault.
	Procs string `json:"procs,omitempty"`
	// Variant distinguishes runs of one workload, e.g. "C=64" or "W=64".
	Variant string `json:"variant,omitempty"`
	// Client is the SDK that drove the run in the sdk workload (ClientGo,
	// ClientPython); empty elsewhere (the Go SDK).
	Client string `json:"client,omitempty"`
	// Round numbers the repetitions of a workload that runs several
	// times in one suite (1, 2, ...); 0 when it runs once.
	Round    int     `json:"round,omitempty"`
	Workers  int     `json:"workers"`
	Seed     uint64  `json:"seed"`
	WarmupMS int64   `json:"warmup_ms"`
	WindowMS float64 `json:"window_ms"` // the measured window's actual length
	// Ops and Errors count the operations that started inside the window.
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Latency is the latency of one whole operation of the workload.
	Latency *Histogram `json:"latency,omitempty"`
	// Stages are the latencies of named parts of an operation ("claim",
	// "update", ...).
	Stages map[string]*Histogram `json:"stages,omitempty"`
	// Metrics are named single figures (units in the name: "_bytes",
	// "_ms", "_per_s").
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Series  *Series            `json:"series,omitempty"`
	Kills   []Kill             `json:"kills,omitempty"`
	// Memory is each server process's memory sampled over the run (the
	// soak workload), one series per node.
	Memory []*MemSeries `json:"memory,omitempty"`
	// ErrorSamples are a few distinct error messages seen.
	ErrorSamples []string `json:"error_samples,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	// Failed is set when the run could not be completed; the figures
	// gathered so far may still be present.
	Failed string `json:"failed,omitempty"`
}

// Key names a run within a suite: "cas/C=64/etcd", "sdk/C=64/baton/python".
func (r *Run) Key() string {
	if r.Client != "" {
		return r.Workload + "/" + r.Variant + "/" + r.System + "/" + r.Client
	}
	return r.Workload + "/" + r.Variant + "/" + r.System
}

// Metric returns a named metric and whether it is present.
func (r *Run) Metric(name string) (float64, bool) {
	if r == nil || r.Metrics == nil {
		return 0, false
	}
	v, ok := r.Metrics[name]
	return v, ok
}

// The metrics loadgen.Run records from the machine's CPU counters over
// the measured window: every process counts (the system's members, its
// load generator and anything else running), so they describe a whole
// setup, and on a saturated machine throughput is about the cores over
// the CPU per operation.
const (
	MetricCPUBusyCores = "machine_cpu_busy_cores"
	MetricCPUMsPerOp   = "machine_cpu_ms_per_op"
	MetricCPUCores     = "machine_cpu_cores"
)

// SetMetric records a named metric.
func (r *Run) SetMetric(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = v
}

// Notef appends a note.
func (r *Run) Notef(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Compact prepares every histogram for encoding.
func (r *Run) Compact() {
	if r.Latency != nil {
		r.Latency.Compact()
	}
	for _, h := range r.Stages {
		h.Compact()
	}
}

// Series counts completed operations over time.
type Series struct {
	BucketMS int64   `json:"bucket_ms"`
	OK       []int64 `json:"ok"`  // successful completions per bucket
	Err      []int64 `json:"err"` // failed completions per bucket
}

// Rate returns (seconds since start, successful ops per second) points,
// averaged over a sliding window of smooth buckets (1 for none).
func (s *Series) Rate(smooth int) []Point {
	if s == nil || len(s.OK) == 0 {
		return nil
	}
	smooth = max(smooth, 1)
	pts := make([]Point, 0, len(s.OK))
	var sum int64
	for i, n := range s.OK {
		sum += n
		if i >= smooth {
			sum -= s.OK[i-smooth]
		}
		k := min(i+1, smooth)
		secs := float64(k*int(s.BucketMS)) / 1000
		pts = append(pts, Point{X: float64((i+1)*int(s.BucketMS)) / 1000, Y: float64(sum) / secs})
	}
	return pts
}

// Kill is one leader crash of the recovery workload. Times are in
// milliseconds; AtMS is since the run's start.
type Kill struct {
	Node string  `json:"node"`
	AtMS float64 `json:"at_ms"`
	// BaselineOpsPerSec is the successful ops per second over the few
	// seconds before the kill.
	BaselineOpsPerSec float64 `json:"baseline_ops_per_sec"`
	// FirstWriteMS is from the kill to the completion of the first write
	// that started after the kill and succeeded, among the prober's writes
	// (one started every 20 ms, each on its own): the unavailability.
	// Negative when no write succeeded before the run ended.
	FirstWriteMS float64 `json:"first_write_ms"`
	// LoadFirstWriteMS is the same among the load's closed-loop clients,
	// which start a write only once their previous one has returned.
	LoadFirstWriteMS float64 `json:"load_first_write_ms"`
	// Recover90MS is from the kill to the start of the first one-second
	// window (starting at or after the kill, ending by the next kill) that
	// completed at least 90% of the baseline rate. Negative when
	// throughput did not come back before the next kill or the end.
	Recover90MS float64 `json:"recover90_ms"`
}

// Machine describes where the suite ran.
type Machine struct {
	Cores     int     `json:"cores"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version"`
	// Filesystem is the type of the filesystem that holds the data dirs.
	Filesystem string `json:"filesystem"`
	// Fsync is 4 KiB O_DSYNC appends in the data dirs' filesystem.
	FsyncTool  string  `json:"fsync_tool"`
	FsyncP50US float64 `json:"fsync_p50_us"`
	FsyncP99US float64 `json:"fsync_p99_us"`
	// CPU is the single-core probe (bench/machine.CPU), in ms, when the
	// suite started and when it ended: a slower machine takes longer. 0 in
	// suites from before it was recorded.
	CPUTool    string  `json:"cpu_tool,omitempty"`
	CPUStartMS float64 `json:"cpu_start_ms,omitempty"`
	CPUEndMS   float64 `json:"cpu_end_ms,omitempty"`
	// LoadAvgAtStart is the one-minute load average before the suite
	// started: other work on the machine shows here.
	LoadAvgAtStart float64 `json:"load_avg_at_start"`
	// Versions of the peers, as their binaries report them.
	Versions map[string]string `json:"versions,omitempty"`
	// MemberProcs is the GOMAXPROCS of each batond and etcd member in
	// the pinned runs (cmd/batond/cluster.MemberProcs of three members, or the
	// environment's GOMAXPROCS when set); 0 in suites from before it was
	// recorded.
	MemberProcs int `json:"member_procs,omitempty"`
	// DefaultProcs is the GOMAXPROCS a member's Go runtime picks by itself
	// (the default runs): the driver's own when its environment does not
	// set GOMAXPROCS, else the usable cores (runtime.NumCPU). 0 in suites
	// from before the default runs.
	DefaultProcs int `json:"default_procs,omitempty"`
	// DriverProcs is the GOMAXPROCS the driver's environment set (it
	// also sets the load generator's, and the pinned members'); 0 when
	// unset.
	DriverProcs int `json:"driver_procs,omitempty"`
}

// Suite is one run of the whole benchmark suite.
type Suite struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Quick    bool      `json:"quick"`
	Seed     uint64    `json:"seed"`
	// Command is the command that produced the suite, as a person types it.
	Command string `json:"command"`
	// Driver is the driver's own command line.
	Driver  string  `json:"driver"`
	Machine Machine `json:"machine"`
	Runs    []*Run  `json:"runs"`
	// Phases are wall-clock seconds per phase ("cas/baton", "build", ...).
	Phases []Phase `json:"phases"`
}

// Phase is the wall-clock time of one part of the suite.
type Phase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// LoadAvg is the machine's one-minute load average when the phase
	// ended. It counts the suite's own processes (PostgreSQL runs one per
	// connection), so only Machine.LoadAvgAtStart speaks of other work.
	LoadAvg float64 `json:"load_avg"`
	// SettleSeconds is how long the suite waited, before the phase, for
	// the machine to be idle (loadgen.Settle); not part of Seconds.
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
}

// Find returns the run of system for workload and variant, or nil. When
// the workload ran in several rounds it is the median round by ops/s among
// those that completed (the lower of the two middle ones for an even
// count), so that every figure the report shows for it comes from one run.
func (s *Suite) Find(workload, variant, system string) *Run {
	runs := s.Rounds(workload, variant, system)
	var done []*Run
	for _, r := range runs {
		if r.Failed == "" {
			done = append(done, r)
		}
	}
	switch {
	case len(done) > 0:
		sort.SliceStable(done, func(i, j int) bool { return done[i].OpsPerSec < done[j].OpsPerSec })
		return done[(len(done)-1)/2]
	case len(runs) > 0:
		return runs[0]
	}
	return nil
}

// Rounds returns every run of system for workload and variant, in the
// order they ran.
func (s *Suite) Rounds(workload, variant, system string) []*Run {
	var out []*Run
	for _, r := range s.Runs {
		if r.Workload == workload && r.Variant == variant && r.System == system {
			out = append(out, r)
		}
	}
	return out
}

// WriteJSON writes v as compact JSON to path (histograms make indented
// JSON several times larger).
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadRuns reads a JSON array of runs, as the peers' program writes it.
func ReadRuns(path string) ([]*Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	if err := json.Unmarshal(data, &runs); err != nil {
		return nil, fmt.Errorf("result: decode %s: %w", path, err)
	}
	return runs, nil
}
