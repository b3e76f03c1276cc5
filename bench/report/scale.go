package report

import "fmt"

// scaleGoals (issues 7 and 34): restart-to-ready with the state of the
// goal loaded, and the queue claim's p50 among 1,000,000 tasks against
// its p50 among 1,000 (bench/baton.ScaleParams.SmallTasks).
func (w *writer) scaleGoals() []goal {
	const readyText = "scale: restart-to-ready < 10 s with 1,000,000 tasks, 100,000 KV entries, 10,000 threads of 20 checkpoints"
	const claimText = "scale: queue claim p50 among 1,000,000 tasks ≤ 1.2× among 1,000"
	sc := w.scaleRun()
	var gs []goal
	ready, rok := sc.Metric("restart_ready_ms")
	tasks, _ := sc.Metric("tasks_loaded")
	kv, _ := sc.Metric("kv_loaded")
	threads, _ := sc.Metric("threads_loaded")
	cps, _ := sc.Metric("checkpoints_loaded")
	loaded := fmt.Sprintf("%s tasks, %s KV entries, %s threads, %s checkpoints", rate(tasks), rate(kv), rate(threads), rate(cps))
	switch {
	case !rok:
		gs = append(gs, goal{readyText, "—", "not measured"})
	case tasks < 1_000_000 || kv < 100_000 || threads < 10_000 || cps < 200_000:
		gs = append(gs, goal{readyText, fmt.Sprintf("%s ms with only %s", msf(ready), loaded), "not measured"})
	default:
		gs = append(gs, goal{readyText, fmt.Sprintf("%s ms with %s", msf(ready), loaded), metIf(ready < 10000)})
	}
	small, sok := sc.Metric("claim_p50_ms_1000")
	large, lok := sc.Metric("claim_p50_ms_1000000")
	switch {
	case sok && lok:
		gs = append(gs, goal{claimText, fmt.Sprintf("%s vs %s ms: %.2f×", msf(large), msf(small), large/small), metIf(large <= 1.2*small)})
	case sok:
		if v, ok := sc.Metric(fmt.Sprintf("claim_p50_ms_%.0f", tasks)); ok {
			gs = append(gs, goal{claimText, fmt.Sprintf("%s ms among only %s tasks vs %s ms", msf(v), rate(tasks), msf(small)), "not measured"})
			break
		}
		fallthrough
	default:
		gs = append(gs, goal{claimText, "—", "not measured"})
	}
	return gs
}
