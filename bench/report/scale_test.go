package report

import (
	"testing"

	"github.com/baton-dev/baton/bench/result"
)

func TestScaleGoals(t *testing.T) {
	run := func(tasks, threads, small, large float64) *result.Run {
		r := &result.Run{System: "baton", Workload: "scale"}
		r.SetMetric("restart_ready_ms", 5000)
		r.SetMetric("tasks_loaded", tasks)
		r.SetMetric("kv_loaded", 100_000)
		r.SetMetric("threads_loaded", threads)
		r.SetMetric("checkpoints_loaded", threads*20)
		r.SetMetric("claim_p50_ms_1000", small)
		if large > 0 {
			r.SetMetric("claim_p50_ms_1000000", large)
		}
		return r
	}
	for _, c := range []struct {
		name   string
		r      *result.Run
		states [2]string
	}{
		{"met", run(1_000_000, 10_000, 2, 2.3), [2]string{"met", "met"}},
		{"claim slower", run(1_000_000, 10_000, 2, 2.5), [2]string{"met", "missed"}},
		{"no threads", run(1_000_000, 0, 2, 2), [2]string{"not measured", "met"}},
		{"quick", run(100_000, 1_000, 2, 0), [2]string{"not measured", "not measured"}},
	} {
		w := &writer{s: &result.Suite{Runs: []*result.Run{c.r}}}
		gs := w.scaleGoals()
		for i, g := range gs {
			if g.state != c.states[i] {
				t.Errorf("%s: %s: %q (%s), want %q", c.name, g.text, g.state, g.measured, c.states[i])
			}
		}
	}
}
