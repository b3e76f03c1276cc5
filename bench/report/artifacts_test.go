package report

import (
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

func TestArtifactGoals(t *testing.T) {
	run := func(variant string, up, down, again float64) *result.Run {
		r := &result.Run{System: "baton", Workload: result.WorkloadArtifacts, Variant: variant}
		r.SetMetric("upload_mb_per_s", up)
		r.SetMetric("download_mb_per_s", down)
		r.SetMetric("reupload_mb_per_s", again)
		return r
	}
	for _, c := range []struct {
		name   string
		runs   []*result.Run
		states [3]string
	}{
		{"absent", nil, [3]string{"not measured", "not measured", "not measured"}},
		{"1 GiB", []*result.Run{run("size=1GiB", 149, 500, 650)}, [3]string{"missed", "met", "met"}},
		{"quick size", []*result.Run{run("size=128MiB", 900, 900, 900)}, [3]string{"not measured", "not measured", "not measured"}},
	} {
		w := &writer{s: &result.Suite{Runs: c.runs}}
		gs := w.artifactGoals()
		if len(gs) != 3 {
			t.Fatalf("%s: %d goals, want 3", c.name, len(gs))
		}
		for i, g := range gs {
			if g.state != c.states[i] {
				t.Errorf("%s: %s: %q (%s), want %q", c.name, g.text, g.state, g.measured, c.states[i])
			}
		}
	}
}

// TestIssue34Goals: the queue goal is 1.5× PostgreSQL's, cas C=256 2.5×
// etcd's, recovery under 1.5 s.
func TestIssue34Goals(t *testing.T) {
	rec := fakeRun("baton", "recovery", "C=64", 5000, 10*time.Millisecond)
	rec.Kills = []result.Kill{{Node: "n1", AtMS: 3000, FirstWriteMS: 1200, Recover90MS: 1300}}
	rec.SetMetric("unavailable_median_ms", 1200)
	s := &result.Suite{Runs: []*result.Run{
		fakeRun("baton", "queue", "W=64", 5900, 20*time.Millisecond),
		fakeRun("postgres", "queue", "W=64", 4000, 15*time.Millisecond),
		fakeRun("baton", "cas", "C=256", 7400, 20*time.Millisecond),
		fakeRun("etcd", "cas", "C=256", 3000, 20*time.Millisecond),
		rec,
	}}
	w := &writer{s: s}
	want := map[string]string{
		"queue W=64: Baton tasks/s ≥ 1.5× PostgreSQL SKIP LOCKED's (issue 34; moonshot 2×)": "missed", // 1.475×
		"cas C=256: Baton ops/s ≥ 2.5× etcd's (issue 34)":                                   "missed", // 2.47×
		"recovery: Baton median unavailability after a leader SIGKILL < 1.5 s":              "met",
	}
	for _, g := range w.goalList() {
		if st, ok := want[g.text]; ok {
			if g.state != st {
				t.Errorf("%s: %q (%s), want %q", g.text, g.state, g.measured, st)
			}
			delete(want, g.text)
		}
	}
	for text := range want {
		t.Errorf("no goal %q", text)
	}
}
