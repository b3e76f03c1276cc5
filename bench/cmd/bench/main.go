// Command bench runs Baton's benchmark suite (issue 7): the cas, queue,
// handoff, recovery, scale, artifacts and soak workloads (and the SDKs' sdk
// and langgraph ones) against a three-node Baton
// cluster, and the cas, queue, recovery and soak workloads against etcd and
// PostgreSQL through the peers' program (bench/peers, a module of its
// own), side by side in one run; then it writes the Markdown report, its
// SVG charts and the raw results.
//
// Every workload runs with the batond and etcd members' GOMAXPROCS left
// to the Go runtime, as users run them: those are the report's headline
// figures and the goals' verdicts. cas and queue also run with every
// member at GOMAXPROCS = cores / members ("pinned", cmd/batond/cluster's
// MemberProcs), interleaved with the default runs, for the report's second
// table; --pinned=false leaves those out, --pinned-workloads chooses them.
//
// `make bench` runs it through bench/run.sh, which installs the peers when
// they are absent. Directly, from the module root:
//
//	go run ./bench/cmd/bench --quick
//	go run ./bench/cmd/bench --workloads cas --systems baton,etcd
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/machine"
	"github.com/baton-dev/baton/bench/report"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

type options struct {
	quick     bool
	seed      uint64
	out       string
	charts    string
	work      string
	keep      bool
	batond    string
	peerbench string
	etcdBin   string
	workloads []string
	systems   []string
	pprofDir  string
	// pprofWorkload is the workload the profiled run drives: cas (C=64)
	// or queue (W=64).
	pprofWorkload string
	// pprofRole is the node the profiled run profiles: the leader or a
	// follower.
	pprofRole string
	// pprofClients is the profiled run's client or worker count.
	pprofClients int
	command      string
	verbose      bool
	onlyReport   string
	// Overrides of the plan; zero keeps the plan's.
	casClients string
	batondArgs []string
	warmup     time.Duration
	duration   time.Duration
	rounds     int
	// soakDuration is the soak's whole run, warm-up included.
	soakDuration time.Duration
	// pinned adds, for pinnedWorkloads, runs with every batond and etcd
	// member at GOMAXPROCS = cores / members (the report's second table)
	// to the default runs, which leave it to the Go runtime.
	pinned          bool
	pinnedWorkloads []string
	// The Python rows (sdk, langgraph): the interpreters of the two venvs
	// and whether bench/python/venv.sh makes or updates them first.
	pythonSDK, pythonLG string
	pythonVenv          bool
	// lgMessageBytes is the text of each LangGraph message (0: the
	// driver's default), for a payload-heavy langgraph run.
	lgMessageBytes int
	// The TypeScript row (sdk): node, and whether the driver is built
	// first (npm ci, tsc in client/typescript).
	node    string
	tsBuild bool
	// include are hand-written Markdown fragments the report ends with.
	include []string
}

var allWorkloads = []string{"cas", "queue", "handoff", "recovery", "scale", "artifacts", "soak", "sdk", "langgraph"}

// pythonWorkloads are the workloads with a Python load driver
// (bench/python).
var pythonWorkloads = []string{result.WorkloadSDK, result.WorkloadLangGraph}

// defaultPinned are the workloads that also run pinned unless
// --pinned=false: the two whose figures compare the systems' throughput
// and latency under load, where how many processors each member's runtime
// spins up on a shared machine moves the result. handoff and scale are
// Baton's alone (no peer to be fair to), recovery's figures are set by
// the Raft timeouts rather than the cores, and the soak's by memory (and
// a second one would add an hour).
var defaultPinned = []string{"cas", "queue"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "a short version of every workload (minutes, not the goals' conditions)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every worker's random choices")
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "the Markdown report")
	fs.StringVar(&o.charts, "charts", "docs/bench", "directory for the SVG charts and results.json")
	fs.StringVar(&o.work, "work", "", "directory for the clusters' data and logs (default: a new temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (it is printed)")
	fs.StringVar(&o.batond, "batond", "", "batond binary (default: built from ./cmd/batond)")
	fs.StringVar(&o.peerbench, "peerbench", "", "peerbench binary (default: built from bench/peers)")
	fs.StringVar(&o.etcdBin, "etcd-bin", "etcd", "etcd binary")
	workloads := fs.String("workloads", strings.Join(allWorkloads, ","), "workloads to run")
	systems := fs.String("systems", "baton,etcd,postgres,sqlite", "systems to run (sqlite: LangGraph's SQLite saver, langgraph only)")
	fs.StringVar(&o.pprofDir, "pprof", "", "also profile the CPU of the Baton leader (or a follower: --pprof-role) under --pprof-workload in an extra run, into this directory")
	fs.StringVar(&o.pprofWorkload, "pprof-workload", "cas", "the profiled run's load: cas or queue, with --pprof-clients clients or workers")
	fs.IntVar(&o.pprofClients, "pprof-clients", 64, "the profiled run's cas clients or queue workers")
	fs.StringVar(&o.pprofRole, "pprof-role", "leader", "the profiled node: leader or follower")
	fs.StringVar(&o.command, "command", "", "the command to show in the report (default: this command line)")
	fs.BoolVar(&o.verbose, "v", false, "copy the nodes' logs to stderr")
	fs.StringVar(&o.onlyReport, "report-from", "", "only render the report from this results.json")
	fs.StringVar(&o.casClients, "cas-clients", "", "override the cas client counts, e.g. 64,256")
	batondArgs := fs.String("batond-args", "", "extra batond flags for every Baton cluster, space-separated (the report shows them)")
	fs.DurationVar(&o.warmup, "warmup", 0, "override the warm-up of each run")
	fs.DurationVar(&o.duration, "duration", 0, "override the measured window of each run")
	fs.DurationVar(&o.soakDuration, "soak-duration", 0, "override the soak's whole length, warm-up included (full: 30m, quick: 3m)")
	fs.IntVar(&o.rounds, "rounds", 0, "override how many interleaved rounds cas and queue run (full: 3, quick: 1)")
	fs.BoolVar(&o.pinned, "pinned", true, "also run --pinned-workloads with every batond and etcd member at GOMAXPROCS = cores / members (the report's second table); the headline runs leave GOMAXPROCS to the Go runtime")
	pinned := fs.String("pinned-workloads", strings.Join(defaultPinned, ","), "workloads that also run pinned, when they run (with --pinned)")
	fs.StringVar(&o.pythonSDK, "python", "bin/py/bin/python", "sdk: the Python of the venv make test-python builds (relative to the module root)")
	fs.StringVar(&o.pythonLG, "python-bench", "bin/py-bench/bin/python", "langgraph: the Python of the bench venv, bench/python/requirements.txt (relative to the module root)")
	fs.IntVar(&o.lgMessageBytes, "lg-message-bytes", 0, "langgraph: the text of each message of the state, in bytes (0: the driver's 200)")
	fs.BoolVar(&o.pythonVenv, "python-venv", true, "before sdk or langgraph, make or update the venvs with bench/python/venv.sh (the client installed from the tree)")
	fs.StringVar(&o.node, "node", "node", "sdk: the Node.js (20+) that runs the TypeScript SDK's driver (client/typescript/bench/sdkbench.ts)")
	fs.BoolVar(&o.tsBuild, "ts-build", true, "before sdk, build the TypeScript SDK and its driver in client/typescript (npm ci, tsc)")
	include := fs.String("include", "docs/bench/run-2026-12-07.md,docs/bench/run-2026-12-06.md,docs/bench/chunking.md,docs/bench/sdk-transport.md,docs/bench/python-sdk.md,docs/bench/typescript-sdk.md,docs/bench/sdk-run.md,docs/bench/leadership.md,docs/bench/artifacts.md,docs/bench/queue.md,docs/bench/langgraph.md", "hand-written Markdown fragments the report ends with, comma-separated (relative to the module root)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.rounds < 0 {
		return nil, fmt.Errorf("--rounds %d: want 1 or more", o.rounds)
	}
	if o.pprofWorkload != "cas" && o.pprofWorkload != "queue" {
		return nil, fmt.Errorf("--pprof-workload %q: want cas or queue", o.pprofWorkload)
	}
	if o.pprofClients < 1 {
		return nil, fmt.Errorf("--pprof-clients %d: want at least 1", o.pprofClients)
	}
	if o.pprofRole != "leader" && o.pprofRole != "follower" {
		return nil, fmt.Errorf("--pprof-role %q: want leader or follower", o.pprofRole)
	}
	o.batondArgs = strings.Fields(*batondArgs)
	o.workloads = splitList(*workloads)
	o.systems = splitList(*systems)
	o.pinnedWorkloads = splitList(*pinned)
	o.include = splitList(*include)
	for _, w := range o.workloads {
		if !slices.Contains(allWorkloads, w) {
			return nil, fmt.Errorf("--workloads: unknown %q (want %s)", w, strings.Join(allWorkloads, ","))
		}
	}
	for _, w := range o.pinnedWorkloads {
		if !slices.Contains(allWorkloads, w) {
			return nil, fmt.Errorf("--pinned-workloads: unknown %q (want %s)", w, strings.Join(allWorkloads, ","))
		}
	}
	for _, s := range o.systems {
		if s != result.SystemBaton && s != result.SystemEtcd && s != result.SystemPostgres && s != result.SystemSQLite {
			return nil, fmt.Errorf("--systems: unknown %q (want baton, etcd, postgres, sqlite)", s)
		}
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.onlyReport != "" {
		return rerender(o)
	}
	s := &suite{o: o, plan: fullPlan(), res: &result.Suite{Started: time.Now(), Quick: o.quick, Seed: o.seed}}
	if o.quick {
		s.plan = quickPlan()
	}
	if err := s.plan.override(o); err != nil {
		return err
	}
	s.res.Driver = "bench " + shellJoin(args)
	s.res.Command = o.command
	if s.res.Command == "" {
		s.res.Command = s.res.Driver
	}
	if err := s.prepare(ctx); err != nil {
		return err
	}
	defer s.cleanup()
	for _, st := range schedule(o, s.plan) {
		if err := s.step(ctx, st); err != nil {
			return err
		}
	}
	if o.pprofDir != "" && slices.Contains(o.systems, result.SystemBaton) {
		s.phase("profile "+o.pprofWorkload+" at 64 ("+o.pprofRole+")", func() error { return s.profile(ctx) })
	}
	s.phase("single-core probe", func() error { s.res.Machine.CPUEndMS = machine.CPUMillis(); return nil })
	s.res.Finished = time.Now()
	return s.write()
}

// rerender rewrites the report from a saved results.json.
func rerender(o *options) error {
	data, err := os.ReadFile(o.onlyReport)
	if err != nil {
		return err
	}
	var res result.Suite
	if err := jsonUnmarshal(data, &res); err != nil {
		return err
	}
	return report.WriteWith(&res, o.out, o.charts, report.Options{Include: includePaths(o.include)})
}

// includePaths resolves the --include fragments against the module root.
func includePaths(paths []string) []string {
	root, err := cluster.ModuleRoot()
	out := make([]string, len(paths))
	for i, p := range paths {
		if err == nil && !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		out[i] = p
	}
	return out
}

// suite is one run of the suite in progress.
type suite struct {
	o    *options
	plan plan
	res  *result.Suite
	work string
	temp bool
	// round is the round of the step running (1, 2, ...).
	round int
}

// phase runs f and records its wall-clock time; an error is logged and
// kept in the report as a failed run, not fatal to the suite.
func (s *suite) phase(name string, f func() error) {
	logf("%s ...", name)
	const idleBusy = 0.10
	settled, busy := loadgen.Settle(time.Minute, idleBusy)
	if busy > idleBusy {
		logf("  the machine was still %.0f%% busy after %.0f s; going on", 100*busy, settled.Seconds())
	} else {
		logf("  machine idle after %.1f s (%.0f%% busy)", settled.Seconds(), 100*busy)
	}
	t0 := time.Now()
	err := f()
	d := time.Since(t0)
	s.res.Phases = append(s.res.Phases, result.Phase{Name: name, Seconds: d.Seconds(), LoadAvg: machine.LoadAvg(),
		SettleSeconds: settled.Seconds()})
	if err != nil {
		logf("%s failed after %.1f s: %v", name, d.Seconds(), err)
		return
	}
	logf("%s done in %.1f s", name, d.Seconds())
}

func (s *suite) prepare(ctx context.Context) error {
	o := s.o
	if o.work == "" {
		dir, err := os.MkdirTemp("", "baton-bench-")
		if err != nil {
			return err
		}
		s.work, s.temp = dir, true
	} else {
		s.work = o.work
	}
	// PostgreSQL runs as its own user, which must reach its data dir.
	if err := os.MkdirAll(s.work, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(s.work, 0o755); err != nil {
		return err
	}
	logf("work directory %s", s.work)
	var err error
	s.phase("machine", func() error {
		s.res.Machine, err = machine.Describe(s.work)
		return err
	})
	if err != nil {
		return fmt.Errorf("describe the machine: %w", err)
	}
	s.res.Machine.Versions = map[string]string{}
	if o.batond == "" {
		s.phase("build batond", func() error {
			o.batond, err = cluster.BuildBatond(ctx, s.work)
			return err
		})
		if err != nil {
			return err
		}
	}
	if s.needPython() {
		if err := s.preparePython(ctx); err != nil {
			return err
		}
	}
	if slices.Contains(o.workloads, result.WorkloadSDK) {
		if err := s.prepareTypeScript(ctx); err != nil {
			return err
		}
	}
	if s.needPeers() {
		if o.peerbench == "" {
			s.phase("build peerbench", func() error {
				o.peerbench, err = buildPeerbench(ctx, s.work)
				return err
			})
			if err != nil {
				return err
			}
		}
		if slices.Contains(o.systems, result.SystemEtcd) {
			s.res.Machine.Versions["etcd"] = machine.Version(o.etcdBin, "--version")
		}
		if slices.Contains(o.systems, result.SystemPostgres) {
			s.res.Machine.Versions["PostgreSQL"] = postgresVersion()
		}
	}
	return nil
}

func (s *suite) needPeers() bool {
	return slices.Contains(s.o.systems, result.SystemEtcd) || slices.Contains(s.o.systems, result.SystemPostgres)
}

func (s *suite) cleanup() {
	if s.temp && !s.o.keep {
		os.RemoveAll(s.work)
		return
	}
	logf("kept %s", s.work)
}

// buildPeerbench builds bench/peers/cmd/peerbench in its own module.
func buildPeerbench(ctx context.Context, outDir string) (string, error) {
	root, err := cluster.ModuleRoot()
	if err != nil {
		return "", err
	}
	out, err := filepath.Abs(filepath.Join(outDir, "peerbench"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/peerbench")
	cmd.Dir = filepath.Join(root, "bench", "peers")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/peerbench in %s: %w\n%s", cmd.Dir, err, msg)
	}
	return out, nil
}

func postgresVersion() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	slices.Sort(dirs)
	if len(dirs) == 0 {
		return ""
	}
	return machine.Version(dirs[len(dirs)-1], "--version")
}

// step runs one step of the schedule and keeps its runs.
func (s *suite) step(ctx context.Context, st step) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.phase(st.name(), func() error {
		s.round = st.round
		runs, err := s.runOne(ctx, st.system, st.workload, st.procs)
		for _, r := range runs {
			r.Procs = st.procs
			if st.rounds > 1 {
				r.Round = st.round
			}
			if r.Failed != "" {
				logf("  %s %s %s failed: %s", r.System, r.Workload, r.Variant, r.Failed)
			} else {
				logf("  %s", summary(r))
			}
		}
		s.res.Runs = append(s.res.Runs, runs...)
		return err
	})
	// Keep the results of what has run, should a later phase hang.
	return s.writeJSON()
}

// runOne runs workload w on one system at one GOMAXPROCS setting; a
// failure is also a failed run.
func (s *suite) runOne(ctx context.Context, sys, w, procs string) ([]*result.Run, error) {
	var runs []*result.Run
	var err error
	switch sys {
	case result.SystemBaton:
		runs, err = s.baton(ctx, w, procs)
	case result.SystemSQLite:
		runs, err = s.sqlite(ctx, w)
	default:
		runs, err = s.peer(ctx, sys, w, procs)
	}
	if err != nil {
		runs = append(runs, &result.Run{System: sys, Workload: w, Failed: err.Error()})
	}
	return runs, err
}

func hasWorkload(system, workload string) bool {
	switch system {
	case result.SystemBaton:
		return true
	case result.SystemEtcd:
		return workload == "cas" || workload == "queue" || workload == "recovery" || workload == "soak"
	case result.SystemPostgres:
		return workload == "queue" || workload == "langgraph"
	case result.SystemSQLite:
		return workload == "langgraph"
	}
	return false
}

func summary(r *result.Run) string {
	line := fmt.Sprintf("%s %s %s: %.0f ops/s", r.System, r.Workload, r.Variant, r.OpsPerSec)
	if r.Client != "" {
		line = fmt.Sprintf("%s %s %s (%s SDK): %.0f ops/s", r.System, r.Workload, r.Variant, r.Client, r.OpsPerSec)
	}
	if r.Procs == result.ProcsPinned {
		line = fmt.Sprintf("%s %s %s (pinned): %.0f ops/s", r.System, r.Workload, r.Variant, r.OpsPerSec)
	}
	if r.Latency != nil && r.Latency.Count > 0 {
		line += fmt.Sprintf(", p50 %.2f ms, p99 %.2f ms", ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)))
	}
	if r.Errors > 0 {
		line += fmt.Sprintf(", %d errors", r.Errors)
	}
	for _, k := range r.Kills {
		line += fmt.Sprintf("\n    kill %s at %.1f s: unavailable %.0f ms, back to 90%% after %.0f ms", k.Node, k.AtMS/1000, k.FirstWriteMS, k.Recover90MS)
	}
	if r.Workload == "soak" {
		line += soakSummary(r)
	}
	if r.Workload == result.WorkloadArtifacts {
		for _, m := range []string{"upload_mb_per_s", "download_mb_per_s", "reupload_mb_per_s", "reupload_bytes_sent", "patched_chunks_sent"} {
			if v, ok := r.Metric(m); ok {
				line += fmt.Sprintf(", %s=%.0f", m, v)
			}
		}
	}
	if r.Workload == "scale" {
		for _, m := range []string{"load_tasks_s", "restart_ready_ms", "rss_bytes_n1", "heap_live_bytes_per_task_n1", "snapshot_bytes_n1", "snapshot_ms_n1"} {
			if v, ok := r.Metric(m); ok {
				line += fmt.Sprintf(", %s=%.0f", m, v)
			}
		}
	}
	return line
}

// soakSummary is a soak run's memory figures per node.
func soakSummary(r *result.Run) string {
	var b strings.Builder
	if a, ok := r.Metric("ops_per_sec_first_third"); ok {
		z, _ := r.Metric("ops_per_sec_last_third")
		fmt.Fprintf(&b, ", first third %.0f ops/s, last third %.0f ops/s", a, z)
	}
	for _, m := range r.Memory {
		id := m.Node
		slope, ok := r.Metric("heap_slope_mib_per_min_" + id)
		se, _ := r.Metric("heap_slope_se_mib_per_min_" + id)
		rssSlope, _ := r.Metric("rss_slope_mib_per_min_" + id)
		rss, _ := r.Metric("rss_max_bytes_" + id)
		heap, _ := r.Metric("heap_last_bytes_" + id)
		if !ok {
			fmt.Fprintf(&b, "\n    %s: %d samples, no heap slope; max RSS %.1f MiB", id, len(m.Samples), rss/(1<<20))
			continue
		}
		fmt.Fprintf(&b, "\n    %s: heap slope %+.2f ± %.2f MiB/min (RSS %+.2f), heap at the end %.1f MiB, max RSS %.1f MiB (%d samples)",
			id, slope, se, rssSlope, heap/(1<<20), rss/(1<<20), len(m.Samples))
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// peer runs one workload of etcd or PostgreSQL through peerbench, the
// etcd members at GOMAXPROCS setting procs (PostgreSQL ignores it).
func (s *suite) peer(ctx context.Context, system, w, procs string) ([]*result.Run, error) {
	p := s.plan
	out := filepath.Join(s.work, fmt.Sprintf("%s-%s-%s.json", system, procs, w))
	warmup, duration := p.warmup, p.duration
	if w == "soak" {
		warmup, duration = p.soakWarmup, p.soakDuration
	}
	args := []string{"--system", system, "--workloads", w, "--work", s.work, "--out", out,
		"--warmup", warmup.String(), "--duration", duration.String(), "--seed", fmt.Sprint(s.o.seed),
		"--soak-clients", fmt.Sprint(p.soak.Clients), "--soak-sample", p.soak.SampleEvery.String(),
		"--cas-clients", joinInts(p.casClients), "--queue-workers", joinInts(p.queueWorkers),
		"--queue-preload", fmt.Sprint(p.queuePreload), "--recovery-clients", fmt.Sprint(p.recoveryClients),
		"--kill-first", p.kills.First.String(), "--kill-period", p.kills.Period.String(),
		"--kill-down", p.kills.Down.String(), "--kills", fmt.Sprint(p.kills.Count), "--etcd-bin", s.o.etcdBin,
		"--procs", procs}
	if w == result.WorkloadLangGraph {
		args = append(args, s.lgPeerArgs()...)
	}
	cmd := exec.CommandContext(ctx, s.o.peerbench, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runErr := cmd.Run()
	runs, err := result.ReadRuns(out)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	if runErr != nil {
		return runs, fmt.Errorf("peerbench: %w", runErr)
	}
	return runs, nil
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

func (s *suite) writeJSON() error {
	if err := os.MkdirAll(s.o.charts, 0o755); err != nil {
		return err
	}
	return result.WriteJSON(filepath.Join(s.o.charts, "results.json"), s.res)
}

func (s *suite) write() error {
	if err := s.writeJSON(); err != nil {
		return err
	}
	if err := report.WriteWith(s.res, s.o.out, s.o.charts, report.Options{Include: includePaths(s.o.include)}); err != nil {
		return err
	}
	logf("wrote %s and charts in %s (%.1f s in all)", s.o.out, s.o.charts, s.res.Finished.Sub(s.res.Started).Seconds())
	return nil
}

// shellJoin quotes the arguments that need it, to show a command line.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
