package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-dev/baton/bench/result"
)

// pinnedSection shows the pinned runs: each workload's tables as above,
// then every pinned figure next to its default counterpart.
func (w *writer) pinnedSection() {
	if w.pinned == nil {
		return
	}
	m := w.s.Machine
	w.p("## pinned: every member at GOMAXPROCS = cores / members\n")
	w.p("The same loads with each batond and etcd member at GOMAXPROCS %s instead of %s, the same rule for both systems, in the same rounds as the default runs, interleaved with them. When members outnumber the cores, a member left at every core can keep waking idle processors of its own on cores the other members and the load generator need (cmd/batond/cluster.MemberProcs); pinned, each behaves as a node given its share of the machine. Production nodes, one to a machine, run at the default. These figures measure no goal.\n",
		procsText(m.MemberProcs, pinnedRule(m)),
		procsText(m.DefaultProcs, "the runtime's choice"))
	sub := &writer{s: w.pinned, all: w.pinned.Runs, atDefault: true, brief: true, chartDir: w.chartDir, chartRel: w.chartRel}
	sub.cas()
	sub.queue()
	sub.handoff()
	sub.recovery()
	sub.scale()
	sub.soak()
	if sub.err != nil && w.err == nil {
		w.err = sub.err
	}
	w.b.WriteString(demote(sub.b.String()))
	w.againstDefault()
}

// againstDefault tables every pinned run (each system's median round)
// with the default run of the same workload, variant and system.
func (w *writer) againstDefault() {
	w.p("### default against pinned\n")
	w.p("Each system's median round at each setting; *pinned/default* above 1× means pinning helped the throughput.\n")
	w.p("| workload | system | ops/s default | ops/s pinned | pinned/default | p50 ms default | p50 ms pinned | p99 ms default | p99 ms pinned |\n|---|---|---|---|---|---|---|---|---|")
	for _, wl := range w.pinnedWorkloads() {
		sub := &writer{s: w.pinned}
		variants := sub.variants(wl)
		if len(variants) == 0 {
			variants = []string{""}
		}
		for _, v := range variants {
			for _, sys := range []string{result.SystemBaton, result.SystemEtcd} {
				d, p := w.s.Find(wl, v, sys), w.pinned.Find(wl, v, sys)
				if p == nil { // a run that failed before it had a variant
					p = w.pinned.Find(wl, "", sys)
				}
				if d == nil {
					d = w.s.Find(wl, "", sys)
				}
				if p == nil {
					continue
				}
				cells := []string{strings.TrimSpace(wl + " " + v), names[sys]}
				opsCell := func(r *result.Run) string {
					switch {
					case r == nil:
						return "—"
					case r.Failed != "":
						return "failed"
					case r.Ops == 0:
						return "—"
					}
					return rate(r.OpsPerSec)
				}
				cells = append(cells, opsCell(d), opsCell(p))
				if ok(d) && ok(p) && d.OpsPerSec > 0 {
					cells = append(cells, fmt.Sprintf("%.2f×", p.OpsPerSec/d.OpsPerSec))
				} else {
					cells = append(cells, "—")
				}
				for _, q := range []float64{0.5, 0.99} {
					for _, r := range []*result.Run{d, p} {
						if ok(r) && r.Latency.Count > 0 {
							cells = append(cells, msec(r.Latency.Quantile(q)))
						} else {
							cells = append(cells, "—")
						}
					}
				}
				w.p("| %s |", strings.Join(cells, " | "))
			}
		}
	}
	w.p("")
}

// pinnedWorkloads are the workloads of the pinned runs, in the order
// they ran.
func (w *writer) pinnedWorkloads() []string {
	var out []string
	if w.pinned == nil {
		return nil
	}
	for _, r := range w.pinned.Runs {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}

// pinnedRule says where the pinned members' GOMAXPROCS came from.
func pinnedRule(m result.Machine) string {
	if m.DriverProcs > 0 {
		return "the driver's GOMAXPROCS, which the pinned members inherit"
	}
	return "its share of the cores, cores / members, at least 1: cmd/batond/cluster.MemberProcs"
}

// procsText is n with what it is, or what alone when n is unknown.
func procsText(n int, what string) string {
	if n > 0 {
		return fmt.Sprintf("%d (%s)", n, what)
	}
	return what
}

// demote turns the sections of a sub-report into subsections.
func demote(md string) string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") {
			lines[i] = "#" + l
		}
	}
	return strings.Join(lines, "\n")
}
