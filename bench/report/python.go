package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// The Python rows: sdk (issue 28), the cas operation through the Python
// SDK beside the Go SDK on one cluster, and langgraph (issue 29), a
// LangGraph step through Baton's, PostgreSQL's and SQLite's savers.

// The goals' thresholds.
const (
	// SDKThroughputGoal: the Python SDK's ops/s at C=64 at least this
	// fraction of the Go SDK's.
	SDKThroughputGoal = 0.6
	// SDKLatencyGoal: the Python SDK's p50 at C=1 at most this much above
	// the Go SDK's.
	SDKLatencyGoal = 300 * time.Microsecond
	// LangGraphLatencyGoal: Baton's p50 step at T=1 at most this multiple
	// of the PostgreSQL saver's.
	LangGraphLatencyGoal = 2.0
)

// The sdk section shows the two SDKs as two systems of a suite of its
// own, the Python SDK first (the ratio column is Python/Go).
const (
	sysPythonSDK       = "python-sdk"
	sysGoSDK           = "go-sdk"
	sysPythonPerWorker = "python-sdk-per-worker"
	sysTypeScriptSDK   = "typescript-sdk"
)

func init() {
	names[sysPythonSDK] = "Python SDK"
	names[sysGoSDK] = "Go SDK"
	systemColors[sysPythonSDK] = "#d98a1c"
	names[sysPythonPerWorker] = "Python SDK, a client per worker"
	systemColors[sysGoSDK] = systemColors[result.SystemBaton]
	systemColors[sysPythonPerWorker] = "#8a4fbf"
	names[sysTypeScriptSDK] = "TypeScript SDK"
	systemColors[sysTypeScriptSDK] = "#2f74c0"
}

// sdkSuite is the suite's sdk runs, their System the SDK's pseudo-system.
func (w *writer) sdkSuite() *result.Suite {
	s := *w.s
	s.Runs = nil
	for _, r := range w.s.Runs {
		if r.Workload != result.WorkloadSDK {
			continue
		}
		c := *r
		switch r.Client {
		case result.ClientPython:
			c.System = sysPythonSDK
		case result.ClientGo:
			c.System = sysGoSDK
		case result.ClientPythonPerWorker:
			c.System = sysPythonPerWorker
		case result.ClientTypeScript:
			c.System = sysTypeScriptSDK
		default:
			continue
		}
		s.Runs = append(s.Runs, &c)
	}
	return &s
}

func (w *writer) sdkGoals() []goal {
	tputText := fmt.Sprintf("sdk C=64: Python SDK ops/s ≥ %.0f%% of the Go SDK's", SDKThroughputGoal*100)
	latText := fmt.Sprintf("sdk C=1: Python SDK p50 within %s ms of the Go SDK's", msec(SDKLatencyGoal))
	s := w.sdkSuite()
	var gs []goal
	if py, gr := s.Find(result.WorkloadSDK, "C=64", sysPythonSDK), s.Find(result.WorkloadSDK, "C=64", sysGoSDK); ok(py) && ok(gr) {
		r := py.OpsPerSec / gr.OpsPerSec
		gs = append(gs, goal{tputText, fmt.Sprintf("%s vs %s ops/s: %.0f%%", rate(py.OpsPerSec), rate(gr.OpsPerSec), r*100),
			metIf(r >= SDKThroughputGoal)})
	} else {
		gs = append(gs, goal{tputText, "—", "not measured"})
	}
	if py, gr := s.Find(result.WorkloadSDK, "C=1", sysPythonSDK), s.Find(result.WorkloadSDK, "C=1", sysGoSDK); ok(py) && ok(gr) {
		pp, gp := py.Latency.Quantile(0.5), gr.Latency.Quantile(0.5)
		gs = append(gs, goal{latText, fmt.Sprintf("%s vs %s ms: %+.2f ms", msec(pp), msec(gp), float64(pp-gp)/float64(time.Millisecond)),
			metIf(pp-gp <= SDKLatencyGoal)})
	} else {
		gs = append(gs, goal{latText, "—", "not measured"})
	}
	tsText := fmt.Sprintf("sdk C=64: TypeScript SDK ops/s ≥ %.0f%% of the Go SDK's", SDKThroughputGoal*100)
	if ts, gr := s.Find(result.WorkloadSDK, "C=64", sysTypeScriptSDK), s.Find(result.WorkloadSDK, "C=64", sysGoSDK); ok(ts) && ok(gr) {
		r := ts.OpsPerSec / gr.OpsPerSec
		gs = append(gs, goal{tsText, fmt.Sprintf("%s vs %s ops/s: %.0f%%", rate(ts.OpsPerSec), rate(gr.OpsPerSec), r*100),
			metIf(r >= SDKThroughputGoal)})
	} else {
		gs = append(gs, goal{tsText, "—", "not measured"})
	}
	return gs
}

func (w *writer) langgraphGoals() []goal {
	tputText := "langgraph T=32: Baton steps/s ≥ the PostgreSQL saver's"
	latText := fmt.Sprintf("langgraph T=1: Baton p50 step ≤ %.0f× the PostgreSQL saver's", LangGraphLatencyGoal)
	var gs []goal
	if b, p := w.s.Find(result.WorkloadLangGraph, "T=32", result.SystemBaton), w.s.Find(result.WorkloadLangGraph, "T=32", result.SystemPostgres); ok(b) && ok(p) {
		gs = append(gs, goal{tputText, fmt.Sprintf("%s vs %s steps/s: %.2f×", rate(b.OpsPerSec), rate(p.OpsPerSec), b.OpsPerSec/p.OpsPerSec),
			metIf(b.OpsPerSec >= p.OpsPerSec)})
	} else {
		gs = append(gs, goal{tputText, "—", "not measured"})
	}
	if b, p := w.s.Find(result.WorkloadLangGraph, "T=1", result.SystemBaton), w.s.Find(result.WorkloadLangGraph, "T=1", result.SystemPostgres); ok(b) && ok(p) {
		bp, pp := b.Latency.Quantile(0.5), p.Latency.Quantile(0.5)
		gs = append(gs, goal{latText, fmt.Sprintf("%s vs %s ms: %.2f×", msec(bp), msec(pp), float64(bp)/float64(pp)),
			metIf(float64(bp) <= LangGraphLatencyGoal*float64(pp))})
	} else {
		gs = append(gs, goal{latText, "—", "not measured"})
	}
	return gs
}

// sdk is the section of the sdk workload.
func (w *writer) sdk() {
	s := w.sdkSuite()
	if len(s.Runs) == 0 {
		return
	}
	w.p("## sdk: the Python SDK beside the Go SDK\n")
	w.p("The cas operation (a fenced `update_task` of one's own claimed task, result `{\"n\": <count>}`) from C concurrent workers: through the Go SDK (the cas workload's code, a `client.Client` per worker, goroutines in the driver); through the Python SDK (`bench/python/sdkbench.py`: one process, one asyncio event loop, C tasks sharing one `baton.AsyncClient`, the goals' configuration); through the Python SDK with an `AsyncClient` per worker (`--workers-per-client 1`, as the Go workers each have their own client); and through the TypeScript SDK (`client/typescript/bench/sdkbench.ts`: one Node process, C workers sharing one `BatonClient`). The four run one after the other on the same fresh cluster for each C, each round starting with the next of them. Goals (issue 28), on the shared `AsyncClient`: the Python SDK reaches at least %.0f%% of the Go SDK's ops/s at C=64, and its p50 at C=1 is within %s ms of the Go SDK's; (issue 30) the TypeScript SDK reaches at least %.0f%% of the Go SDK's ops/s at C=64.\n",
		SDKThroughputGoal*100, msec(SDKLatencyGoal), SDKThroughputGoal*100)
	sub := &writer{s: s, all: s.Runs, atDefault: w.atDefault, chartDir: w.chartDir, chartRel: w.chartRel}
	systems := []string{sysPythonSDK, sysGoSDK, sysPythonPerWorker, sysTypeScriptSDK}
	sub.compare(result.WorkloadSDK, "clients", systems, []row{opsRow, latRow("p50 ms", "", 0.5), latRow("p99 ms", "", 0.99),
		latRow("p99.9 ms", "", 0.999), errRow})
	sub.rounds(result.WorkloadSDK, "clients", "ops/s", systems)
	for _, v := range sub.variants(result.WorkloadSDK) {
		sub.cdfChart("sdk-"+strings.ReplaceAll(v, "=", "")+"-cdf", "sdk "+v+": latency CDF", result.WorkloadSDK, v, "", systems)
	}
	if sub.err != nil && w.err == nil {
		w.err = sub.err
	}
	w.b.WriteString(sub.b.String())
}

// langgraph is the section of the langgraph workload.
func (w *writer) langgraph() {
	if len(w.variants(result.WorkloadLangGraph)) == 0 {
		return
	}
	steps := "20"
	for _, r := range w.s.Runs {
		if v, found := r.Metric("steps_per_thread"); found && r.Workload == result.WorkloadLangGraph {
			steps = fmt.Sprint(int(v))
			break
		}
	}
	w.p("## langgraph: a LangGraph step through three checkpoint savers\n")
	w.p("One step as LangGraph's Pregel loop calls its saver in a superstep, written out in `bench/python/lgbench.py` (no graph around it, so that the same Python work of a graph does not dilute the savers' difference): `aput` of the thread's next checkpoint with `new_versions`, `aput_writes` of one task's writes against it, `aget_tuple` of the thread's latest (checked: the checkpoint just put, with its two writes). The state is a `messages` channel growing by one small message a step and a counter; each of the T concurrent workers runs a thread of %s steps, then starts a new one. Baton: `AsyncBatonSaver` on one `baton.AsyncClient` against a fresh three-node cluster; PostgreSQL: `AsyncPostgresSaver` (langgraph-checkpoint-postgres) on a pool of T connections to a fresh server (the queue workload's setup, `synchronous_commit = on`); SQLite: `AsyncSqliteSaver` (langgraph-checkpoint-sqlite, its one aiosqlite connection) on a fresh file. Each from one Python process (the bench venv, `bench/python/requirements.txt`). Goals (issue 29): Baton's steps/s at T=32 ≥ PostgreSQL's; Baton's p50 step at T=1 ≤ %.0f× PostgreSQL's.\n",
		steps, LangGraphLatencyGoal)
	systems := []string{result.SystemBaton, result.SystemPostgres, result.SystemSQLite}
	w.compare(result.WorkloadLangGraph, "threads", systems, []row{
		{"steps/s", func(r *result.Run) (float64, bool) { return r.OpsPerSec, r.Ops > 0 }, rate, false},
		latRow("step p50 ms", "", 0.5), latRow("step p99 ms", "", 0.99), latRow("step p99.9 ms", "", 0.999),
		latRow("put p50 ms", "put", 0.5), latRow("put_writes p50 ms", "put_writes", 0.5), latRow("get_tuple p50 ms", "get_tuple", 0.5),
		errRow,
	})
	w.rounds(result.WorkloadLangGraph, "threads", "steps/s", systems)
	for _, v := range w.variants(result.WorkloadLangGraph) {
		w.cdfChart("langgraph-"+strings.ReplaceAll(v, "=", "")+"-cdf", "langgraph "+v+": step latency CDF", result.WorkloadLangGraph, v, "", systems)
	}
}
