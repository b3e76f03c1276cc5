package report

import (
	"testing"

	"github.com/baton-dev/baton/bench/result"
)

func TestLeadershipGoal(t *testing.T) {
	run := func(system, workload, variant string, elections float64) *result.Run {
		r := fakeRun(system, workload, variant, 1000, 0)
		if elections >= 0 {
			r.SetMetric("raft_elections", elections)
		}
		return r
	}
	for _, c := range []struct {
		name          string
		runs          []*result.Run
		measured, got string
	}{
		{"none recorded", []*result.Run{run("baton", "cas", "C=64", -1)}, "—", "not measured"},
		{"quiet", []*result.Run{run("baton", "cas", "C=64", 0), run("baton", "queue", "W=64", 0),
			run("baton", "recovery", "C=64", 5), run("etcd", "cas", "C=64", 3)}, "0 elections in 2 runs", "met"},
		{"one election", []*result.Run{run("baton", "cas", "C=64", 0), run("baton", "soak", "C=64", 1)},
			"1 elections in 2 runs: soak/C=64/baton 1", "missed"},
	} {
		w := &writer{s: &result.Suite{Runs: c.runs}}
		if g := w.leadershipGoal(); g.measured != c.measured || g.state != c.got {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, g.measured, g.state, c.measured, c.got)
		}
	}
}
