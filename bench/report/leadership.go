package report

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/bench/result"
)

// leadershipGoal: no Raft election while the load runs (issue 34), counted
// on every Baton run but recovery's, which kills leaders on purpose. A run
// records "raft_elections", how far the term rose during it
// (bench/baton.Env.CountElections).
func (w *writer) leadershipGoal() goal {
	const text = "leadership: no Raft election during any Baton run at default settings (recovery aside)"
	var seen []string
	total, runs := 0.0, 0
	for _, r := range w.s.Runs {
		if r.System != result.SystemBaton || r.Workload == result.WorkloadRecovery || r.Procs == result.ProcsPinned {
			continue
		}
		n, ok := r.Metric("raft_elections")
		if !ok {
			continue
		}
		runs++
		total += n
		if n > 0 {
			seen = append(seen, fmt.Sprintf("%s %d", r.Key(), int(n)))
		}
	}
	switch {
	case runs == 0:
		return goal{text, "—", "not measured"}
	case total == 0:
		return goal{text, fmt.Sprintf("0 elections in %d runs", runs), "met"}
	default:
		return goal{text, fmt.Sprintf("%d elections in %d runs: %s", int(total), runs, strings.Join(seen, ", ")), "missed"}
	}
}
