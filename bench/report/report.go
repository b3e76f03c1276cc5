// Package report turns a result.Suite into the Markdown report
// (docs/benchmarks.md) and its SVG charts: one table per workload with
// each system's figures and the ratio Baton/peer, the goals of issue 7
// (and the soak's) marked met or missed, latency CDFs per system,
// throughput over time across each leader kill, and each node's memory
// over a soak. The headline tables, the charts and the goals' verdicts are
// the runs at default GOMAXPROCS (result.ProcsDefault); the pinned runs
// (result.ProcsPinned) get a section of their own after them, with their
// ratio to the default runs. A suite from before the two settings (every
// run pinned, Run.Procs empty) renders as it did, all in the headline.
// Every figure in the report comes from the suite;
// a figure that was not measured is shown as "—" and a goal that depends
// on it as not measured.
package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// names are the systems as the report spells them.
var names = map[string]string{
	result.SystemBaton:    "Baton",
	result.SystemEtcd:     "etcd",
	result.SystemPostgres: "PostgreSQL",
	result.SystemSQLite:   "SQLite",
}

// Options are what the report takes besides the suite.
type Options struct {
	// Include are hand-written Markdown files (docs/bench/chunking.md)
	// appended verbatim at the end, each after a blank line, so that a
	// section measured by hand survives the page's rewrite.
	Include []string
}

// Write renders s as Markdown to mdPath and writes its charts into
// chartDir, which the Markdown links relative to mdPath's directory.
func Write(s *result.Suite, mdPath, chartDir string) error {
	return WriteWith(s, mdPath, chartDir, Options{})
}

// WriteWith is Write with options.
func WriteWith(s *result.Suite, mdPath, chartDir string, opt Options) error {
	if err := os.MkdirAll(chartDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(mdPath), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(mdPath), chartDir)
	if err != nil {
		rel = chartDir
	}
	head, pinned, atDefault := split(s)
	w := &writer{s: head, all: s.Runs, pinned: pinned, atDefault: atDefault, chartDir: chartDir, chartRel: filepath.ToSlash(rel)}
	w.render()
	if w.err != nil {
		return w.err
	}
	for _, path := range opt.Include {
		frag, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("report: include: %w", err)
		}
		w.b.WriteString("\n" + strings.TrimSpace(string(frag)) + "\n")
	}
	return os.WriteFile(mdPath, []byte(w.b.String()), 0o644)
}

type writer struct {
	// s is the suite the headline tables show: its runs at default
	// GOMAXPROCS (every run, in a suite from before the two settings).
	s *result.Suite
	// all are every run of the suite, both settings.
	all []*result.Run
	// pinned is the suite with its pinned runs only; nil when there are
	// none or the suite has no default runs.
	pinned *result.Suite
	// atDefault: the headline runs are at default GOMAXPROCS (false in
	// suites from before the setting was recorded).
	atDefault bool
	// brief (the pinned section's writer) leaves out the descriptions
	// and charts the headline sections already give.
	brief    bool
	b        strings.Builder
	chartDir string
	chartRel string
	err      error
}

// procsOf is a run's GOMAXPROCS setting; runs from before it was
// recorded were pinned.
func procsOf(r *result.Run) string {
	if r.Procs == "" {
		return result.ProcsPinned
	}
	return r.Procs
}

// split returns the suite of the headline runs (at default GOMAXPROCS
// when any run is, else every run) and the suite of the pinned runs (nil
// when none or when the headline already holds them).
func split(s *result.Suite) (head, pinned *result.Suite, atDefault bool) {
	var def, pin []*result.Run
	for _, r := range s.Runs {
		if procsOf(r) == result.ProcsDefault {
			def = append(def, r)
		} else {
			pin = append(pin, r)
		}
	}
	if len(def) == 0 {
		return s, nil, false
	}
	h := *s
	h.Runs = def
	if len(pin) == 0 {
		return &h, nil, true
	}
	p := *s
	p.Runs = pin
	return &h, &p, true
}

func (w *writer) p(format string, args ...any) { fmt.Fprintf(&w.b, format+"\n", args...) }

// chart writes c as name.svg and links it.
func (w *writer) chart(name, alt string, c Chart) {
	if len(c.Lines) == 0 {
		return
	}
	if w.brief {
		name, alt = "pinned-"+name, "pinned: "+alt
	}
	if err := os.WriteFile(filepath.Join(w.chartDir, name+".svg"), c.SVG(), 0o644); err != nil && w.err == nil {
		w.err = err
	}
	w.p("![%s](%s/%s.svg)\n", alt, w.chartRel, name)
}

func (w *writer) render() {
	s := w.s
	mode := "full"
	if s.Quick {
		mode = "quick (QUICK=1: shorter runs and a smaller scale load; not the goals' conditions)"
	}
	w.p("# Benchmarks\n")
	w.p("Baton against its peers, measured side by side in one run on one machine by the suite in `bench/` (issue 7).")
	w.p("This page is rewritten by every `make bench`; it holds the latest report.\n")
	w.p("- Run: %s, %s mode, %s in all.", s.Started.UTC().Format("2006-01-02 15:04 UTC"), mode, dur(s.Finished.Sub(s.Started)))
	w.p("- Command: `%s`", s.Command)
	w.p("- Driver: `%s`", s.Driver)
	w.p("- Seed: %d. Raw results: `%s/results.json`.\n", s.Seed, w.chartRel)
	w.machine()
	w.goals()
	w.cas()
	w.queue()
	w.handoff()
	w.recovery()
	w.scale()
	w.artifacts()
	w.soak()
	w.sdk()
	w.langgraph()
	w.pinnedSection()
	w.notes()
	w.phases()
	w.method()
}

func (w *writer) machine() {
	m := w.s.Machine
	w.p("## Machine\n")
	w.p("| | |\n|---|---|")
	w.p("| CPU | %s, %d cores |", m.CPUModel, m.Cores)
	w.p("| memory | %.1f GiB |", m.MemoryGiB)
	w.p("| kernel | %s |", m.Kernel)
	w.p("| Go | %s |", m.GoVersion)
	w.p("| data filesystem | %s |", m.Filesystem)
	w.p("| fsync latency (4 KiB, O_DSYNC) | p50 %.0f µs, p99 %.0f µs |", m.FsyncP50US, m.FsyncP99US)
	w.p("| fsync tool | %s |", m.FsyncTool)
	if m.CPUStartMS > 0 {
		end := "not measured (the run did not finish)"
		if m.CPUEndMS > 0 {
			end = fmt.Sprintf("%.0f ms at the end", m.CPUEndMS)
		}
		w.p("| single-core probe (lower is faster) | %.0f ms at the start, %s |", m.CPUStartMS, end)
		w.p("| single-core probe tool | %s |", m.CPUTool)
	}
	keys := make([]string, 0, len(m.Versions))
	for k := range m.Versions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.p("| %s | %s |", k, m.Versions[k])
	}
	w.p("| load average before the run (1 min) | %.1f |", m.LoadAvgAtStart)
	switch {
	case w.atDefault:
		pinned := "not run (`--pinned=false`)"
		if w.pinned != nil {
			rule := "cores / members"
			if m.DriverProcs > 0 {
				rule = "the driver's"
			}
			pinned = fmt.Sprintf("%s, for the second table (%s)", procsText(m.MemberProcs, rule), strings.Join(w.pinnedWorkloads(), ", "))
		}
		w.p("| GOMAXPROCS of each batond and etcd member | default: %s, for every workload and the goals; pinned: %s |",
			procsText(m.DefaultProcs, "the Go runtime's choice"), pinned)
	case m.MemberProcs > 0:
		w.p("| GOMAXPROCS of each batond and etcd member | %d |", m.MemberProcs)
	}
	if m.DriverProcs > 0 {
		w.p("| GOMAXPROCS of the driver and load generator | %d (set in its environment) |", m.DriverProcs)
	}
	w.p("\nEvery process (three batond or etcd members, PostgreSQL, and the load generator) shares these cores; the systems run one after the other, never at once.")
	switch {
	case w.atDefault:
		w.p("The headline figures and every goal's verdict are at **default GOMAXPROCS**, as users run the servers: each batond and etcd member starts with no GOMAXPROCS in its environment (none inherited from the driver), so its Go runtime uses the cores it may use. The *pinned* runs give each member GOMAXPROCS at its share of the cores instead (cores / members, at least 1: cmd/batond/cluster.MemberProcs, also what `batond local` gives its nodes), the same rule for both systems; they are in their own section below. The load generator and PostgreSQL are left as they are.")
	case m.MemberProcs > 0:
		w.p("Each batond and etcd member runs with GOMAXPROCS at its share of the cores (cores / members, at least 1: cmd/batond/cluster.MemberProcs, also what `batond local` gives its nodes), the same rule for both systems; the load generator and PostgreSQL are left as they are.")
	}
	// Only the load before the run says anything about other work: during
	// it, the suite's own processes set the load (PostgreSQL alone runs one
	// server process per connection, 64 in the queue workload).
	if m.LoadAvgAtStart > float64(m.Cores)/2 {
		w.p("**The machine was not idle when the run began** (load average %.1f on %d cores): other work may have competed with the suite, so the figures may be lower and noisier than on a quiet machine, and the systems, measured one after the other, did not necessarily meet the same interference.", m.LoadAvgAtStart, m.Cores)
	}
	w.p("")
}

// goal is one goal of issue 7 and how the suite fared.
type goal struct {
	text, measured string
	state          string // met, missed, not measured
}

func (w *writer) goalList() []goal {
	s := w.s
	var gs []goal
	b64, e64 := s.Find("cas", "C=64", "baton"), s.Find("cas", "C=64", "etcd")
	if ok(b64) && ok(e64) {
		r := b64.OpsPerSec / e64.OpsPerSec
		gs = append(gs, goal{"cas C=64: Baton ops/s ≥ 2× etcd's",
			fmt.Sprintf("%s vs %s ops/s: %.2f×", rate(b64.OpsPerSec), rate(e64.OpsPerSec), r), metIf(r >= 2)})
		bp, ep := b64.Latency.Quantile(0.99), e64.Latency.Quantile(0.99)
		gs = append(gs, goal{"cas C=64: Baton p99 ≤ etcd's",
			fmt.Sprintf("%s vs %s ms", msec(bp), msec(ep)), metIf(bp <= ep)})
	} else {
		gs = append(gs, goal{"cas C=64: Baton ops/s ≥ 2× etcd's", "—", "not measured"},
			goal{"cas C=64: Baton p99 ≤ etcd's", "—", "not measured"})
	}
	const c256 = "cas C=256: Baton ops/s ≥ 2.5× etcd's (issue 34)"
	if b, e := s.Find("cas", "C=256", "baton"), s.Find("cas", "C=256", "etcd"); ok(b) && ok(e) {
		r := b.OpsPerSec / e.OpsPerSec
		gs = append(gs, goal{c256, fmt.Sprintf("%s vs %s ops/s: %.2f×", rate(b.OpsPerSec), rate(e.OpsPerSec), r), metIf(r >= 2.5)})
	} else {
		gs = append(gs, goal{c256, "—", "not measured"})
	}
	if b1, e1 := s.Find("cas", "C=1", "baton"), s.Find("cas", "C=1", "etcd"); ok(b1) && ok(e1) {
		bp, ep := b1.Latency.Quantile(0.5), e1.Latency.Quantile(0.5)
		gs = append(gs, goal{"cas C=1: Baton p50 ≤ etcd's", fmt.Sprintf("%s vs %s ms", msec(bp), msec(ep)), metIf(bp <= ep)})
	} else {
		gs = append(gs, goal{"cas C=1: Baton p50 ≤ etcd's", "—", "not measured"})
	}
	const queueText = "queue W=64: Baton tasks/s ≥ 1.5× PostgreSQL SKIP LOCKED's (issue 34; moonshot 2×)"
	if bq, pq := s.Find("queue", "W=64", "baton"), s.Find("queue", "W=64", "postgres"); ok(bq) && ok(pq) {
		gs = append(gs, goal{queueText,
			fmt.Sprintf("%s vs %s tasks/s: %.2f×", rate(bq.OpsPerSec), rate(pq.OpsPerSec), bq.OpsPerSec/pq.OpsPerSec),
			metIf(bq.OpsPerSec >= 1.5*pq.OpsPerSec)})
	} else {
		gs = append(gs, goal{queueText, "—", "not measured"})
	}
	// Issue 34 moved this goal from 1 s to 1.5 s, to choose Raft timeouts
	// that keep leadership stable on a loaded host (docs/operations.md).
	const recoveryText = "recovery: Baton median unavailability after a leader SIGKILL < 1.5 s"
	br, er := w.recoveryRun("baton"), w.recoveryRun("etcd")
	bm, bok := br.Metric("unavailable_median_ms")
	if br != nil && bok && len(br.Kills) > 0 {
		gs = append(gs, goal{recoveryText,
			fmt.Sprintf("%s ms over %d kills", msf(bm), len(br.Kills)), metIf(bm >= 0 && bm < 1500)})
	} else {
		gs = append(gs, goal{recoveryText, "—", "not measured"})
	}
	em, eok := er.Metric("unavailable_median_ms")
	if bok && eok && len(br.Kills) > 0 && len(er.Kills) > 0 {
		gs = append(gs, goal{"recovery: Baton median unavailability < etcd's",
			fmt.Sprintf("%s vs %s ms", msf(bm), msf(em)), metIf(bm >= 0 && (em < 0 || bm < em))})
	} else {
		gs = append(gs, goal{"recovery: Baton median unavailability < etcd's", "—", "not measured"})
	}
	gs = append(gs, w.scaleGoals()...)
	sc := w.scaleRun()
	var rss []string
	for _, id := range []string{"n1", "n2", "n3"} {
		if v, ok := sc.Metric("rss_bytes_" + id); ok {
			rss = append(rss, fmt.Sprintf("%s %s", id, mib(v)))
		}
	}
	if len(rss) > 0 {
		gs = append(gs, goal{"scale: resident memory per node reported", strings.Join(rss, ", "), "met"})
	} else {
		gs = append(gs, goal{"scale: resident memory per node reported", "—", "not measured"})
	}
	gs = append(gs, w.artifactGoals()...)
	gs = append(gs, w.leadershipGoal())
	gs = append(gs, w.soakGoals()...)
	gs = append(gs, w.sdkGoals()...)
	return append(gs, w.langgraphGoals()...)
}

func (w *writer) goals() {
	w.p("## Goals\n")
	if w.atDefault {
		w.p("Every verdict is at default GOMAXPROCS (each member's Go runtime chooses); the pinned runs measure no goal.")
	}
	w.p("Ratios are from this one run (for cas and queue, of each system's median round when they ran in several).\n")
	w.p("| goal | measured | |\n|---|---|---|")
	for _, g := range w.goalList() {
		mark := map[string]string{"met": "**met**", "missed": "**missed**"}[g.state]
		if mark == "" {
			mark = g.state
		}
		w.p("| %s | %s | %s |", g.text, g.measured, mark)
	}
	w.p("")
}

func metIf(b bool) string {
	if b {
		return "met"
	}
	return "missed"
}

func ok(r *result.Run) bool { return r != nil && r.Failed == "" && r.Ops > 0 && r.Latency != nil }

// variants returns the variants of a workload present in the suite, in
// numeric order of their value ("C=1" < "C=64").
func (w *writer) variants(workload string) []string {
	seen := map[string]bool{}
	var vs []string
	for _, r := range w.s.Runs {
		if r.Workload == workload && r.Variant != "" && !seen[r.Variant] {
			seen[r.Variant] = true
			vs = append(vs, r.Variant)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return variantNum(vs[i]) < variantNum(vs[j]) })
	return vs
}

func variantNum(v string) int {
	_, n, _ := strings.Cut(v, "=")
	i, _ := strconv.Atoi(n)
	return i
}

// row is one figure of a comparison table: how to read it from a run.
type row struct {
	name    string
	get     func(r *result.Run) (float64, bool)
	fmt     func(float64) string
	noRatio bool // a count whose ratio means nothing
}

func latRow(name string, stage string, q float64) row {
	return row{name, func(r *result.Run) (float64, bool) {
		h := r.Latency
		if stage != "" {
			h = r.Stages[stage]
		}
		if h == nil || h.Count == 0 {
			return 0, false
		}
		return float64(h.Quantile(q)) / float64(time.Millisecond), true
	}, msf, false}
}

var (
	opsRow = row{"ops/s", func(r *result.Run) (float64, bool) { return r.OpsPerSec, r.Ops > 0 }, rate, false}
	errRow = row{"errors", func(r *result.Run) (float64, bool) { return float64(r.Errors), true }, rate, true}
	// The machine's CPU over the window, every process counted (the
	// members and the load generator): on a saturated machine a system's
	// throughput is about the cores over its CPU per operation.
	cpuRows = []row{
		{"machine CPU, cores busy", func(r *result.Run) (float64, bool) { return r.Metric(result.MetricCPUBusyCores) }, coresf, true},
		{"machine CPU ms per op", func(r *result.Run) (float64, bool) { return r.Metric(result.MetricCPUMsPerOp) }, cpuMsf, false},
	}
)

func coresf(v float64) string { return fmt.Sprintf("%.2f", v) }
func cpuMsf(v float64) string { return fmt.Sprintf("%.3f", v) }

// compare writes a table of rows for each variant: one column per system
// and one ratio column Baton/peer per peer.
func (w *writer) compare(workload, label string, systems []string, rows []row) {
	if w.brief {
		systems = w.present(workload, systems)
	}
	var head, sep []string
	head = append(head, label, "figure")
	for _, s := range systems {
		head = append(head, names[s])
	}
	for _, s := range systems[1:] {
		head = append(head, names[systems[0]]+"/"+names[s])
	}
	for range head {
		sep = append(sep, "---")
	}
	w.p("| %s |\n| %s |", strings.Join(head, " | "), strings.Join(sep, " | "))
	for _, v := range w.variants(workload) {
		_, num, _ := strings.Cut(v, "=")
		for _, rw := range rows {
			cells := []string{num, rw.name}
			vals := make([]float64, len(systems))
			have := make([]bool, len(systems))
			for i, s := range systems {
				r := w.s.Find(workload, v, s)
				if r != nil && r.Failed == "" {
					vals[i], have[i] = rw.get(r)
				}
				if have[i] {
					cells = append(cells, rw.fmt(vals[i]))
				} else {
					cells = append(cells, "—")
				}
			}
			for i := 1; i < len(systems); i++ {
				if have[0] && have[i] && vals[i] != 0 && !rw.noRatio {
					cells = append(cells, fmt.Sprintf("%.2f×", vals[0]/vals[i]))
				} else {
					cells = append(cells, "—")
				}
			}
			w.p("| %s |", strings.Join(cells, " | "))
		}
	}
	w.p("")
}

// present is systems[0] (Baton) and those of the other systems that ran
// workload.
func (w *writer) present(workload string, systems []string) []string {
	out := systems[:1:1]
	for _, sys := range systems[1:] {
		for _, r := range w.s.Runs {
			if r.Workload == workload && r.System == sys {
				out = append(out, sys)
				break
			}
		}
	}
	return out
}

// cdfChart plots the latency CDF of one variant for each system.
func (w *writer) cdfChart(name, title, workload, variant, stage string, systems []string) {
	c := Chart{Title: title, XLabel: "latency (ms, log scale)", YLabel: "fraction of operations at or below", LogX: true, YMax: 1}
	for _, s := range systems {
		r := w.s.Find(workload, variant, s)
		if !ok(r) {
			continue
		}
		h := r.Latency
		if stage != "" {
			h = r.Stages[stage]
		}
		if h == nil || h.Count == 0 {
			continue
		}
		c.Lines = append(c.Lines, Line{Name: names[s], Color: systemColors[s], Points: h.CDF()})
	}
	w.chart(name, title, c)
}

func (w *writer) cas() {
	if len(w.variants("cas")) == 0 {
		return
	}
	w.p("## cas: fenced updates of one's own task\n")
	if !w.brief {
		w.p("C clients, each owning one task it claimed, loop fenced updates of it (Baton: `UpdateTask` with the claim's fencing token; etcd: a transaction that puts the task only if the owner key still has the claim's revision).\n")
	}
	systems := []string{"baton", "etcd"}
	w.compare("cas", "clients", systems, append([]row{opsRow, latRow("p50 ms", "", 0.5), latRow("p99 ms", "", 0.99),
		latRow("p99.9 ms", "", 0.999), errRow}, cpuRows...))
	w.rounds("cas", "clients", "ops/s", systems)
	if w.brief {
		return
	}
	for _, v := range w.variants("cas") {
		w.cdfChart("cas-"+strings.ReplaceAll(v, "=", "")+"-cdf", "cas "+v+": latency CDF", "cas", v, "", systems)
	}
}

func (w *writer) queue() {
	if len(w.variants("queue")) == 0 {
		return
	}
	w.p("## queue: claim, then done under the fence\n")
	if w.brief {
		w.p("PostgreSQL, not a Go program, runs at one setting only: its figures are in the queue table above.\n")
	} else {
		w.p("One queue preloaded with tasks; W workers each take a claimed task, then complete it (done) under its fencing token. Baton: W slots of `concurrency.Worker.RunPool` at its default settings, in 4 Workers (each its own client) of W/4 slots, each task set running by its claim and completed with `Lease.Complete`; the default pool claims up to its free slots in one request and sends the completions of several slots with the claims of their next tasks (`QueueBatch`), each task with its own fencing token and lease (the claim row is a slot's wait for its next task, the done row its completion's round trip); etcd: read the pending keys among the next 32 × W task numbers (a bounded, serializable, keys-only range), move a random one to claimed under the worker's lease in a transaction guarded by its revision (retry on a lost race), then a transaction guarded by the claim's revision; PostgreSQL: `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)` with a fencing-token sequence, then `UPDATE ... WHERE fencing_token = $2`.\n")
	}
	systems := []string{"baton", "etcd", "postgres"}
	w.compare("queue", "workers", systems, []row{
		{"tasks/s", func(r *result.Run) (float64, bool) { return r.OpsPerSec, r.Ops > 0 }, rate, false},
		latRow("claim p50 ms", "claim", 0.5), latRow("claim p99 ms", "claim", 0.99), latRow("claim p99.9 ms", "claim", 0.999),
		latRow("done p50 ms", "update", 0.5), latRow("done p99 ms", "update", 0.99),
		{"preloaded tasks", func(r *result.Run) (float64, bool) { return r.Metric("preload_tasks") }, rate, true},
		{"lost claim races (etcd: retried)", func(r *result.Run) (float64, bool) { return r.Metric("claim_conflicts") }, rate, true},
		errRow, cpuRows[0], cpuRows[1],
	})
	w.rounds("queue", "workers", "tasks/s", systems)
	if w.brief {
		return
	}
	for _, v := range w.variants("queue") {
		w.cdfChart("queue-"+strings.ReplaceAll(v, "=", "")+"-claim-cdf", "queue "+v+": claim latency CDF", "queue", v, "claim", systems)
	}
}

// rounds lists the throughput of every round of a workload that ran in
// several, marking the median round the table above shows.
func (w *writer) rounds(workload, label, unit string, systems []string) {
	n := 0
	for _, r := range w.s.Runs {
		if r.Workload == workload && r.Round > n {
			n = r.Round
		}
	}
	if n < 2 {
		return
	}
	w.p("Each system ran this workload in %d rounds, interleaved with the other systems (each round started with the next system); the table shows each system's median round by %s, every figure of a column from that one run. %s of every round (*italic*: the median round; in brackets the machine's cores busy, where measured: a round far below the others' was short of CPU, not of work):\n", n, unit, strings.ToUpper(unit[:1])+unit[1:])
	head, sep := []string{label, "system"}, []string{"---", "---"}
	for i := 1; i <= n; i++ {
		head, sep = append(head, fmt.Sprintf("round %d", i)), append(sep, "---")
	}
	w.p("| %s |\n| %s |", strings.Join(head, " | "), strings.Join(sep, " | "))
	for _, v := range w.variants(workload) {
		_, num, _ := strings.Cut(v, "=")
		for _, sys := range systems {
			runs := w.s.Rounds(workload, v, sys)
			if len(runs) == 0 {
				continue
			}
			median := w.s.Find(workload, v, sys)
			cells := []string{num, names[sys]}
			for i := 1; i <= n; i++ {
				cell := "—"
				for _, r := range runs {
					if r.Round != i {
						continue
					}
					switch {
					case r.Failed != "":
						cell = "failed"
					case r == median:
						cell = "*" + rate(r.OpsPerSec) + "*"
					default:
						cell = rate(r.OpsPerSec)
					}
					if c, ok := r.Metric(result.MetricCPUBusyCores); ok && r.Failed == "" {
						cell += fmt.Sprintf(" (%.2f)", c)
					}
				}
				cells = append(cells, cell)
			}
			w.p("| %s |", strings.Join(cells, " | "))
		}
	}
	w.p("")
}

func (w *writer) handoff() {
	vs := w.variants("handoff")
	if len(vs) == 0 {
		return
	}
	w.p("## handoff: researcher → reviewer → publisher\n")
	w.p("Agents per stage claim a task of their stage's queue, publish a 4 KiB artifact fenced by the claim, and commit one transaction that finishes their task and opens the next stage's (the publisher's moves the pipeline's ref instead). Baton only: the peers have no artifact store.\n")
	w.p("| agents per stage | figure | Baton |\n|---|---|---|")
	for _, v := range vs {
		r := w.s.Find("handoff", v, "baton")
		if r == nil {
			continue
		}
		_, num, _ := strings.Cut(v, "=")
		v := num
		if r.Failed != "" {
			w.p("| %s | failed | %s |", v, oneLine(r.Failed))
			continue
		}
		pm, _ := r.Metric("pipelines_per_min")
		w.p("| %s | pipelines/min | %s |", v, rate(pm))
		w.p("| %s | stage steps/s | %s |", v, rate(r.OpsPerSec))
		for _, st := range []struct{ key, name string }{{"pipeline", "pipeline end to end"}, {"claim", "claim"}, {"publish", "publish 4 KiB artifact"}, {"txn", "finish-and-open txn"}} {
			if h := r.Stages[st.key]; h != nil && h.Count > 0 {
				w.p("| %s | %s p50 / p99 ms | %s / %s |", v, st.name, msec(h.Quantile(0.5)), msec(h.Quantile(0.99)))
			}
		}
		w.p("| %s | errors | %d |", v, r.Errors)
	}
	w.p("")
	for _, v := range vs {
		r := w.s.Find("handoff", v, "baton")
		if !ok(r) {
			continue
		}
		c := Chart{Title: "handoff " + v + ": latency CDFs (Baton)", XLabel: "latency (ms, log scale)", YLabel: "fraction at or below", LogX: true, YMax: 1}
		for i, st := range []string{"claim", "publish", "txn", "pipeline"} {
			if h := r.Stages[st]; h != nil && h.Count > 0 {
				c.Lines = append(c.Lines, Line{Name: st, Color: spareColors[i%len(spareColors)], Points: h.CDF()})
			}
		}
		w.chart("handoff-"+strings.ReplaceAll(v, "=", "")+"-cdf", c.Title, c)
	}
}

func (w *writer) recoveryRun(system string) *result.Run {
	for _, r := range w.s.Runs {
		if r.Workload == "recovery" && r.System == system {
			return r
		}
	}
	return nil
}

func (w *writer) recovery() {
	b, e := w.recoveryRun("baton"), w.recoveryRun("etcd")
	if b == nil && e == nil {
		return
	}
	w.p("## recovery: leader SIGKILL under the cas load\n")
	v := ""
	if b != nil {
		v = b.Variant
	} else {
		v = e.Variant
	}
	w.p("The cas load (%s) runs while the leader is killed with SIGKILL and restarted %s later. *Unavailable*: from the kill to the completion of the first write that started after it and succeeded, among a prober's writes (one started every 20 ms, each on its own, so a hung request delays no other). *Clients' first write*: the same among the cas clients, which start a write only once their previous one has returned, so a request left hanging by the crash holds its client back. *Back ≥ 90%%*: from the kill to the start of the first one-second window that completed at least 90%% of the rate of the 3 s before the kill (*never*: not before the next kill or the end).\n",
		v, w.killDown())
	w.p("| kill | Baton node | Baton unavailable ms | Baton clients' first write ms | Baton back ≥ 90%% ms | etcd node | etcd unavailable ms | etcd clients' first write ms | etcd back ≥ 90%% ms |\n|---|---|---|---|---|---|---|---|---|")
	n := 0
	if b != nil {
		n = len(b.Kills)
	}
	if e != nil {
		n = max(n, len(e.Kills))
	}
	cell := func(r *result.Run, i int) string {
		if r == nil || i >= len(r.Kills) {
			return "— | — | — | —"
		}
		k := r.Kills[i]
		return fmt.Sprintf("%s | %s | %s | %s", k.Node, msf(k.FirstWriteMS), msf(k.LoadFirstWriteMS), msf(recovered(r, i)))
	}
	for i := range n {
		w.p("| %d | %s | %s |", i+1, cell(b, i), cell(e, i))
	}
	med := func(r *result.Run, m string) string {
		if v, ok := r.Metric(m); ok {
			return msf(v)
		}
		return "—"
	}
	medBack := func(r *result.Run) string {
		if r == nil || len(r.Kills) == 0 {
			return "—"
		}
		var xs []float64
		for i := range r.Kills {
			xs = append(xs, recovered(r, i))
		}
		return msf(median(xs))
	}
	w.p("| median | | %s | %s | %s | | %s | %s | %s |",
		med(b, "unavailable_median_ms"), med(b, "load_unavailable_median_ms"), medBack(b),
		med(e, "unavailable_median_ms"), med(e, "load_unavailable_median_ms"), medBack(e))
	bu, bok := b.Metric("unavailable_median_ms")
	eu, eok := e.Metric("unavailable_median_ms")
	if bok && eok && bu > 0 && eu > 0 {
		w.p("| Baton/etcd | | %.2f× | | | | | | |", bu/eu)
	}
	w.p("")
	for _, r := range []*result.Run{b, e} {
		if r == nil {
			continue
		}
		if r.Failed != "" {
			w.p("%s recovery failed: %s\n", names[r.System], oneLine(r.Failed))
		}
		w.p("%s: %s ops/s over the whole run, %d failed operations.\n", names[r.System], rate(r.OpsPerSec), r.Errors)
	}
	for _, r := range []*result.Run{b, e} {
		if r == nil || r.Series == nil {
			continue
		}
		c := Chart{Title: names[r.System] + ": throughput across leader kills (cas " + r.Variant + ")",
			XLabel: "seconds since the start (warm-up included)", YLabel: "successful ops/s (0.5 s average)",
			Lines: []Line{{Name: names[r.System], Color: systemColors[r.System], Points: r.Series.Rate(int(500 / max(r.Series.BucketMS, 1)))}}}
		for i, k := range r.Kills {
			c.Markers = append(c.Markers, Marker{X: k.AtMS / 1000, Label: fmt.Sprintf("kill %d", i+1)})
		}
		w.chart("recovery-"+r.System, c.Title, c)
	}
}

// recovered is kill i's Recover90MS, or -1 ("never") when it came only
// after the next kill.
func recovered(r *result.Run, i int) float64 {
	k := r.Kills[i]
	if i+1 < len(r.Kills) && k.Recover90MS > r.Kills[i+1].AtMS-k.AtMS {
		return -1
	}
	return k.Recover90MS
}

// median of xs, a negative value (never) counting as the largest; -1 when
// the median is such a value.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		if s[i] < 0 {
			s[i] = math.Inf(1)
		}
	}
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if math.IsInf(m, 1) {
		return -1
	}
	return m
}

func (w *writer) killDown() string {
	for _, r := range w.s.Runs {
		if r.Workload == "recovery" {
			if v, ok := r.Metric("kill_down_ms"); ok {
				return dur(time.Duration(v) * time.Millisecond)
			}
		}
	}
	return "a few seconds"
}

func (w *writer) scaleRun() *result.Run {
	for _, r := range w.s.Runs {
		if r.Workload == "scale" {
			return r
		}
	}
	return nil
}

func (w *writer) scale() {
	r := w.scaleRun()
	if r == nil {
		return
	}
	w.p("## scale: %s\n", r.Variant)
	w.p("Baton only. The cluster runs with `%s` so that every node snapshots the loaded state soon after the load.\n", w.scaleArgs(r))
	if r.Failed != "" {
		w.p("The scale run failed: %s\n", oneLine(r.Failed))
	}
	w.p("| figure | n1 | n2 | n3 |\n|---|---|---|---|")
	perNode := []struct {
		prefix, name string
		f            func(float64) string
	}{
		{"rss_bytes_", "resident memory after load and snapshot", mib},
		{"heap_live_bytes_", "  Go live heap at the last GC, at the same time", mib},
		{"heap_live_bytes_per_task_", "  that heap per task loaded, bytes (KV entries included)", rate},
		{"snapshot_bytes_", "snapshot size (state.bin, zstd)", mib},
		{"snapshot_ms_", "snapshot time, ms (raft log: start to complete)", msf},
		{"raft_log_bytes_", "Raft log on disk (wal/ or raft.db)", mib},
		{"data_dir_bytes_", "data directory size", mib},
	}
	for _, pn := range perNode {
		cells := []string{pn.name}
		for _, id := range []string{"n1", "n2", "n3"} {
			if v, ok := r.Metric(pn.prefix + id); ok {
				cells = append(cells, pn.f(v))
			} else {
				cells = append(cells, "—")
			}
		}
		w.p("| %s |", strings.Join(cells, " | "))
	}
	w.p("")
	w.p("| figure | value |\n|---|---|")
	single := []struct {
		key, name string
		f         func(float64) string
	}{
		{"tasks_loaded", "tasks loaded", rate},
		{"kv_loaded", "KV entries loaded", rate},
		{"load_tasks_s", "task load time, s (transactions of 128 creates, 8 loaders)", secs},
		{"load_tasks_per_s", "task load rate, tasks/s", rate},
		{"load_kv_s", "KV load time, s", secs},
		{"threads_loaded", "checkpoint threads loaded", rate},
		{"checkpoints_loaded", "checkpoints loaded (a chain per thread)", rate},
		{"load_checkpoints_s", "checkpoint load time, s (one put at a time, 32 loaders)", secs},
		{"claim_p50_ms_1000", "queue claim p50 among 1,000 tasks (fresh cluster, tasks put back), ms", msf},
		{"claim_p99_ms_1000", "  p99, ms", msf},
		{"claim_p50_ms_1000000", "queue claim p50 among 1,000,000 tasks (the same way), ms", msf},
		{"claim_p99_ms_1000000", "  p99, ms", msf},
		{"restart_ready_ms", "restart-to-ready of a follower killed with SIGKILL, ms", msf},
		{"restart_healthy_ms", "  of which until /healthz answers, ms", msf},
		{"backup_bytes", "backup stream (GET /v1/cluster/backup) size", mib},
		{"backup_ms", "backup stream time, ms", msf},
	}
	for _, sg := range single {
		if v, ok := r.Metric(sg.key); ok {
			w.p("| %s | %s |", sg.name, sg.f(v))
		}
	}
	if ok(r) {
		if h := r.Stages["claim"]; h != nil {
			w.p("| queue claim among the loaded tasks (W=%d), p50 / p99 / p99.9 ms | %s / %s / %s |", r.Workers,
				msec(h.Quantile(0.5)), msec(h.Quantile(0.99)), msec(h.Quantile(0.999)))
		}
		w.p("| claim-then-done tasks/s at that size | %s |", rate(r.OpsPerSec))
	}
	w.p("")
	if ok(r) {
		c := Chart{Title: "scale: queue claim latency CDF among " + r.Variant, XLabel: "latency (ms, log scale)", YLabel: "fraction at or below", LogX: true, YMax: 1}
		if h := r.Stages["claim"]; h != nil {
			c.Lines = append(c.Lines, Line{Name: "Baton", Color: systemColors["baton"], Points: h.CDF()})
		}
		w.chart("scale-claim-cdf", c.Title, c)
	}
}

func (w *writer) scaleArgs(r *result.Run) string {
	for _, n := range r.Notes {
		if a, ok := strings.CutPrefix(n, "batond flags: "); ok {
			return a
		}
	}
	return "default flags"
}

func (w *writer) notes() {
	var lines []string
	seen := map[string]bool{}
	add := func(l string) { // a note every round of a workload repeats is said once
		if !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	for _, r := range w.all {
		label := names[r.System] + " " + r.Workload
		if r.Client != "" {
			label = names[r.System] + " " + r.Workload + " (" + r.Client + " SDK)"
		}
		if r.Variant != "" {
			label += " " + r.Variant
		}
		if w.atDefault && procsOf(r) == result.ProcsPinned {
			label += " (pinned)"
		}
		which := label
		if r.Round > 0 {
			which += fmt.Sprintf(" (round %d)", r.Round)
		}
		if r.Failed != "" {
			add(fmt.Sprintf("- %s **failed**: %s", which, oneLine(r.Failed)))
		}
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "batond flags: ") {
				continue
			}
			add(fmt.Sprintf("- %s: %s", label, n))
		}
		if r.Errors > 0 && len(r.ErrorSamples) > 0 {
			add(fmt.Sprintf("- %s: %d errors, e.g. `%s`", which, r.Errors, oneLine(r.ErrorSamples[0])))
		}
	}
	if len(lines) == 0 {
		return
	}
	w.p("## Notes from the run\n")
	for _, l := range lines {
		w.p("%s", l)
	}
	w.p("")
}

func (w *writer) phases() {
	if len(w.s.Phases) == 0 {
		return
	}
	w.p("## Where the time went\n")
	w.p("The load average is the machine's when the phase ended: processes running or waiting for one of the %d cores, averaged over a minute. It counts the suite's own processes: three members and the load generator, and for PostgreSQL one server process per connection (64 in the queue workload), so a high figure during a phase is not by itself a sign of other work; the load before the run is.\n", max(w.s.Machine.Cores, 1))
	w.p("| phase | waited for an idle machine, s | seconds | load average (1 min) |\n|---|---|---|---|")
	for _, ph := range w.s.Phases {
		w.p("| %s | %.1f | %.1f | %.1f |", ph.Name, ph.SettleSeconds, ph.Seconds, ph.LoadAvg)
	}
	w.p("")
}

func (w *writer) method() {
	w.p("## Method\n")
	w.p("- Each system is started by the suite on 127.0.0.1 with its normal timings: Baton as three `batond` processes (`cmd/batond/cluster`, default Raft timings, fsync on); etcd as three members from Debian's `etcd-server` (default heartbeat 100 ms, election 1 s); PostgreSQL as one server from Debian's package in a fresh `initdb` directory with `synchronous_commit = on`. Each workload, and each cas client count, gets a fresh cluster.")
	w.p("- Before each phase the suite writes out dirty pages (`sync`) and waits, up to a minute, until two 1-second samples in a row find at most 10%% of the cores busy (I/O wait counted as busy): each workload starts on a machine as quiet as the first, not during the previous one's writeback (`bench/loadgen.Settle`; the wait is in \"Where the time went\").")
	w.p("- Load is closed-loop: every client or worker waits for its answer before sending the next request, and has its own connection(s) (its own Baton client, etcd client or PostgreSQL connection), spread over the members. Baton's clients use the Go SDK with its defaults (failover and retries included).")
	w.p("- Every run has a warm-up and a measured window; only operations that start in the window count. Latency percentiles come from log-bucketed histograms (within about 1%%). Each worker's random choices come from the seed.")
	w.p("- The same code (`bench/loadgen`) drives and measures every system; Baton's side lives in `bench/baton`, the peers' in the separate module `bench/peers` (so their client libraries stay out of Baton's go.mod).")
	w.p("- fsync latency is measured on every run with the same probe, in the filesystem that holds the data directories.")
	w.p("- The machine CPU rows come from the machine's own counters (/proc/stat) at the measured window's start and end, every process counted: the members, the load generator (for Baton the Go SDK in the driver's process, for etcd and PostgreSQL their client libraries in `peerbench`) and anything else running. Cores busy near the machine's cores means the run was bound by CPU, and its throughput is then about the cores over the CPU per operation; fewer means it was bound by waits (fsync, round trips).")
	if w.s.Machine.CPUStartMS > 0 {
		w.p("- The single-core probe is the same computation on every run, timed before the first workload and after the last: runs on different days (or a machine that slowed during a run) compare through it, as the Python SDK's rate, bound by one core, follows it.")
	}
	if len(w.variants(result.WorkloadSDK)) > 0 || len(w.variants(result.WorkloadLangGraph)) > 0 {
		w.p("- The Python rows (sdk, langgraph) are driven by asyncio programs in `bench/python`, run by the driver as subprocesses: they measure as `bench/loadgen` does (closed loop, the same warm-up and window rules, the same log-bucketed histogram) and hand the driver a run as JSON. The Python SDK runs in the venv `make test-python` builds (`bin/py`), the savers in the bench venv (`bin/py-bench`, `bench/python/requirements.txt`), the client installed from the tree in both (`bench/python/venv.sh`). A Python process runs one event loop on one core: at high concurrency its own CPU, on the cores the servers share, is part of what these rows measure.")
	}
	if w.atDefault {
		w.p("- A full run repeats cas and queue in three rounds, interleaved across the systems and, for the pinned runs, the two GOMAXPROCS settings (each round starts one system-and-setting later), and compares each system's median round at each setting: on a shared virtual machine one system's figures have moved by up to 40%% between runs minutes apart, so a single pass favours whichever system met the quieter minutes.")
		w.p("- GOMAXPROCS: the headline runs start every batond and etcd member with no GOMAXPROCS in its environment (`cmd/batond/cluster.ProcsRuntime`, `peerbench --procs default`); the pinned runs with GOMAXPROCS = cores / members (`cmd/batond/cluster.ProcsShare`, `peerbench --procs pinned`). `--pinned=false` leaves the pinned runs out; `--pinned-workloads` chooses them (default cas, queue).")
	} else {
		w.p("- A full run repeats cas and queue in three rounds, interleaved across the systems, and compares each system's median round: on a shared virtual machine one system's figures have moved by up to 40%% between runs minutes apart, so a single pass favours whichever system met the quieter minutes.")
	}
}

// Formatting.

func rate(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return thousands(math.Round(v))
	}
	return fmt.Sprintf("%.1f", v)
}

func thousands(v float64) string {
	neg := v < 0
	s := strconv.FormatInt(int64(math.Abs(math.Round(v))), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// msf formats milliseconds with three significant digits; a negative value
// means "never".
func msf(v float64) string {
	switch {
	case v < 0:
		return "never"
	case v >= 100:
		return thousands(v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func msec(d time.Duration) string { return msf(float64(d) / float64(time.Millisecond)) }

func secs(v float64) string { return fmt.Sprintf("%.1f", v) }

func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }

func dur(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}
