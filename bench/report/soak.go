package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// The soak's goals (issue "Bounded memory under sustained load", point 5).
const (
	// SoakSlopeGoal bounds the heap's least-squares slope over the last two
	// thirds of the soak, on every node, in MiB per minute (either sign).
	// The leak it guards against grew every node by about 15 MB/s, some
	// 900 MiB/min.
	SoakSlopeGoal = 1.0
	// SoakRSSGoal bounds every node's largest sampled RSS, in bytes.
	SoakRSSGoal = 1 << 30
	// SoakThroughputGoal is the soak's throughput over the cas run's with
	// as many clients, at least.
	SoakThroughputGoal = 0.8
	// SoakGoalLength is the soak run the goals are stated for; a shorter
	// run (QUICK=1: 3 minutes) shows its figures but measures no goal.
	SoakGoalLength = 30 * time.Minute
)

func (w *writer) soakRun(system string) *result.Run {
	for _, r := range w.s.Runs {
		if r.Workload == result.WorkloadSoak && r.System == system {
			return r
		}
	}
	return nil
}

// soakLength is a soak run's whole length, warm-up included.
func soakLength(r *result.Run) time.Duration {
	return time.Duration((float64(r.WarmupMS) + r.WindowMS) * float64(time.Millisecond))
}

// soakCAS is the cas run a soak's throughput compares with: the same
// system with as many clients.
func (w *writer) soakCAS(r *result.Run) *result.Run {
	c := w.s.Find(result.WorkloadCAS, r.Variant, r.System)
	if !ok(c) {
		return nil
	}
	return c
}

func (w *writer) soakGoals() []goal {
	slopeText := fmt.Sprintf("soak: Baton heap slope within ±%.0f MiB/min on every node (last two thirds of %s of cas C=64)", SoakSlopeGoal, dur(SoakGoalLength))
	rssText := fmt.Sprintf("soak: Baton RSS < %s on every node", gib(SoakRSSGoal))
	tputText := fmt.Sprintf("soak: Baton throughput ≥ %.0f%% of cas C=64's", SoakThroughputGoal*100)
	r := w.soakRun(result.SystemBaton)
	if r == nil || r.Failed != "" || len(r.Memory) == 0 {
		return []goal{{slopeText, "—", "not measured"}, {rssText, "—", "not measured"}, {tputText, "—", "not measured"}}
	}
	// A run shorter than the goals' says its figures but meets no goal.
	state := metIf
	short := ""
	if soakLength(r) < SoakGoalLength-30*time.Second {
		short = fmt.Sprintf(" (a run of only %s)", dur(soakLength(r)))
		state = func(bool) string { return "not measured" }
	}
	var slopes, rss []string
	slopeOK, rssOK, haveSlope, haveRSS := true, true, false, false
	for _, m := range r.Memory {
		if b, found := r.Metric("heap_slope_mib_per_min_" + m.Node); found {
			slopes = append(slopes, fmt.Sprintf("%s %+.2f", m.Node, b))
			slopeOK = slopeOK && math.Abs(b) < SoakSlopeGoal
			haveSlope = true
		} else {
			slopes = append(slopes, m.Node+" —")
			slopeOK = false
		}
		if v, found := r.Metric("rss_max_bytes_" + m.Node); found {
			rss = append(rss, fmt.Sprintf("%s %s", m.Node, mib(v)))
			rssOK = rssOK && v < SoakRSSGoal
			haveRSS = true
		} else {
			rss = append(rss, m.Node+" —")
			rssOK = false
		}
	}
	var gs []goal
	if haveSlope {
		gs = append(gs, goal{slopeText, strings.Join(slopes, ", ") + " MiB/min" + short, state(slopeOK)})
	} else {
		gs = append(gs, goal{slopeText, "—", "not measured"})
	}
	if haveRSS {
		gs = append(gs, goal{rssText, "max " + strings.Join(rss, ", ") + short, state(rssOK)})
	} else {
		gs = append(gs, goal{rssText, "—", "not measured"})
	}
	if c := w.soakCAS(r); c != nil && r.Ops > 0 {
		ratio := r.OpsPerSec / c.OpsPerSec
		gs = append(gs, goal{tputText, fmt.Sprintf("%s vs %s ops/s: %.0f%%%s", rate(r.OpsPerSec), rate(c.OpsPerSec), ratio*100, short),
			state(ratio >= SoakThroughputGoal)})
	} else {
		gs = append(gs, goal{tputText, "— (no cas " + r.Variant + " run to compare with)", "not measured"})
	}
	return gs
}

func (w *writer) soak() {
	var runs []*result.Run
	for _, sys := range []string{result.SystemBaton, result.SystemEtcd} {
		if r := w.soakRun(sys); r != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	w.p("## soak: memory under a sustained cas load\n")
	first := runs[0]
	every := "10 s"
	if v, found := first.Metric("sample_every_ms"); found {
		every = dur(time.Duration(v) * time.Millisecond)
	}
	w.p("The cas load (%s: each client loops fenced updates of its own task; Baton through the Go SDK with its defaults, sessions included) for %s, warm-up included, on a fresh cluster. Every %s the suite samples each node's resident memory (VmRSS in /proc/PID/status) and Go heap in use (`go_memstats_heap_inuse_bytes` from the node's own /metrics; etcd exports the same gauge). *Heap slope*: the least-squares slope of the heap over the last two thirds of the run (the first third is left to caches, pools and the Raft log to fill), ± its standard error; a leak shows as a slope that stays positive however long the run. Goals: |heap slope| < %.0f MiB/min on every node, RSS < %s per node, throughput ≥ %.0f%% of the cas run with as many clients, over a %s run.\n",
		first.Variant, dur(soakLength(first)), every, SoakSlopeGoal, gib(SoakRSSGoal), SoakThroughputGoal*100, dur(SoakGoalLength))
	w.p("| system | node | heap slope MiB/min | RSS slope MiB/min | heap at the end | largest heap | largest RSS | samples |\n|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		if r.Failed != "" {
			w.p("| %s | — | failed: %s | | | | | |", names[r.System], oneLine(r.Failed))
		}
		for _, m := range r.Memory {
			cell := func(name string, f func(float64) string) string {
				if v, found := r.Metric(name + m.Node); found {
					return f(v)
				}
				return "—"
			}
			slope := cell("heap_slope_mib_per_min_", signed)
			if se, found := r.Metric("heap_slope_se_mib_per_min_" + m.Node); found && slope != "—" {
				slope += fmt.Sprintf(" ± %.2f", se)
			}
			w.p("| %s | %s | %s | %s | %s | %s | %s | %d |", names[r.System], m.Node, slope,
				cell("rss_slope_mib_per_min_", signed), cell("heap_last_bytes_", mib), cell("heap_max_bytes_", mib),
				cell("rss_max_bytes_", mib), len(m.Samples))
		}
	}
	w.p("")
	w.p("| figure | %s |\n|---|%s", strings.Join(systemNames(runs), " | "), strings.Repeat("---|", len(runs)))
	tput := []row{
		opsRow,
		{"ops/s, first third of the window", func(r *result.Run) (float64, bool) { return r.Metric("ops_per_sec_first_third") }, rate, false},
		{"ops/s, last third of the window", func(r *result.Run) (float64, bool) { return r.Metric("ops_per_sec_last_third") }, rate, false},
		{"ops/s relative to the cas run", func(r *result.Run) (float64, bool) {
			if c := w.soakCAS(r); c != nil && r.Ops > 0 {
				return r.OpsPerSec / c.OpsPerSec, true
			}
			return 0, false
		}, func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }, false},
		latRow("p50 ms", "", 0.5), latRow("p99 ms", "", 0.99), errRow,
	}
	for _, rw := range tput {
		cells := []string{rw.name}
		for _, r := range runs {
			if v, found := rw.get(r); found && r.Failed == "" {
				cells = append(cells, rw.fmt(v))
			} else {
				cells = append(cells, "—")
			}
		}
		w.p("| %s |", strings.Join(cells, " | "))
	}
	w.p("")
	for _, r := range runs {
		if len(r.Memory) == 0 {
			continue
		}
		c := Chart{Title: names[r.System] + ": memory per node under soak (cas " + r.Variant + ")",
			XLabel: "minutes since the start (warm-up included)", YLabel: "MiB"}
		for i, m := range r.Memory {
			color := spareColors[i%len(spareColors)]
			c.Lines = append(c.Lines, Line{Name: m.Node + " RSS", Color: color, Points: m.RSS()},
				Line{Name: m.Node + " heap", Color: color, Dash: "5 3", Points: m.Heap()})
		}
		w.chart("soak-memory-"+r.System, c.Title, c)
	}
	c := Chart{Title: "soak: throughput over time", XLabel: "minutes since the start (warm-up included)", YLabel: "successful ops/s (10 s average)"}
	for _, r := range runs {
		if r.Series == nil || r.Series.BucketMS <= 0 {
			continue
		}
		pts := r.Series.Rate(int(10000 / r.Series.BucketMS))
		for i := range pts {
			pts[i].X /= 60
		}
		c.Lines = append(c.Lines, Line{Name: names[r.System], Color: systemColors[r.System], Points: pts})
	}
	w.chart("soak-throughput", c.Title, c)
}

func systemNames(runs []*result.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = names[r.System]
	}
	return out
}

func gib(v float64) string { return fmt.Sprintf("%g GiB", v/(1<<30)) }

// signed formats a slope with its sign.
func signed(v float64) string { return fmt.Sprintf("%+.2f", v) }
