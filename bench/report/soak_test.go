package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/result"
)

// fakeSoak is a soak run of length d whose nodes' heaps grow by
// slope[i] MiB a minute and whose RSS stays at rss[i] MiB.
func fakeSoak(system string, d time.Duration, ops float64, rss []int64, slope []float64) *result.Run {
	r := fakeRun(system, "soak", "C=64", ops, 10*time.Millisecond)
	r.WarmupMS, r.WindowMS = 5000, float64(d.Milliseconds()-5000)
	r.Series = &result.Series{BucketMS: 1000}
	for range d / time.Second {
		r.Series.OK = append(r.Series.OK, int64(ops))
	}
	for i := range rss {
		m := &result.MemSeries{Node: "n" + string(rune('1'+i))}
		if system == "etcd" {
			m.Node = "e" + string(rune('1'+i))
		}
		for at := time.Duration(0); at <= d; at += 10 * time.Second {
			heap := 100 + slope[i]*at.Minutes()
			m.Samples = append(m.Samples, result.MemSample{AtMS: float64(at.Milliseconds()),
				RSSBytes: rss[i] << 20, HeapBytes: int64(heap * (1 << 20))})
		}
		r.Memory = append(r.Memory, m)
	}
	loadgen.AnalyzeSoak(r)
	return r
}

func TestSoak(t *testing.T) {
	suite := func(runs ...*result.Run) *result.Suite {
		return &result.Suite{Started: time.Now(), Finished: time.Now().Add(time.Hour), Machine: result.Machine{Cores: 2}, Runs: runs}
	}
	// A full run: n2's heap grows 3 MiB/min, n3's RSS passes 1 GiB,
	// throughput at 90% of the cas run's.
	full := fakeSoak("baton", 30*time.Minute, 9000, []int64{300, 310, 1100}, []float64{0.1, 3, -0.2})
	dir := t.TempDir()
	if err := Write(suite(fakeRun("baton", "cas", "C=64", 10000, 5*time.Millisecond), full,
		fakeSoak("etcd", 30*time.Minute, 4000, []int64{500, 500, 500}, []float64{0, 0, 0})),
		filepath.Join(dir, "benchmarks.md"), filepath.Join(dir, "bench")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	text := string(b)
	contains(t, text,
		"| soak: Baton heap slope within ±1 MiB/min on every node (last two thirds of 30m00s of cas C=64) | n1 +0.10, n2 +3.00, n3 -0.20 MiB/min | **missed** |",
		"| soak: Baton RSS < 1 GiB on every node | max n1 300.0 MiB, n2 310.0 MiB, n3 1100.0 MiB | **missed** |",
		"| soak: Baton throughput ≥ 80% of cas C=64's | 9,000 vs 10,000 ops/s: 90% | **met** |",
		"| Baton | n2 | +3.00 ± 0.00 | +0.00 |",
		"| etcd | e1 | +0.00 ± 0.00 |",
		"| figure | Baton | etcd |",
		"| ops/s relative to the cas run | 90% | — |",
		"](bench/soak-memory-baton.svg)", "](bench/soak-memory-etcd.svg)", "](bench/soak-throughput.svg)",
	)
	for _, name := range []string{"soak-memory-baton", "soak-memory-etcd", "soak-throughput"} {
		data, err := os.ReadFile(filepath.Join(dir, "bench", name+".svg"))
		var doc struct{ XMLName xml.Name }
		if err == nil {
			err = xml.Unmarshal(data, &doc)
		}
		if err != nil || doc.XMLName.Local != "svg" {
			t.Errorf("%s.svg: got %v (root %q), want a well-formed SVG document", name, err, doc.XMLName.Local)
		}
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "bench", "soak-memory-baton.svg")); !strings.Contains(string(svg), "n3 heap") ||
		!strings.Contains(string(svg), `stroke-dasharray="5 3"`) {
		t.Errorf("soak-memory-baton.svg lacks the dashed heap lines:\n%s", svg)
	}
	// A quick run (3 minutes) shows its figures but measures no goal, and
	// without a cas run there is no throughput ratio.
	quick := fakeSoak("baton", 3*time.Minute, 9000, []int64{300, 310, 320}, []float64{0, 0, 0})
	text = render(t, suite(quick))
	contains(t, text,
		"| n1 +0.00, n2 +0.00, n3 +0.00 MiB/min (a run of only 3m00s) | not measured |",
		"| soak: Baton throughput ≥ 80% of cas C=64's | — (no cas C=64 run to compare with) | not measured |",
		"| Baton | n1 | +0.00 ± 0.00 |",
	)
	// Without a soak there is no soak section and the goals say so.
	text = render(t, suite(fakeRun("baton", "cas", "C=64", 10000, 5*time.Millisecond)))
	contains(t, text, "| soak: Baton RSS < 1 GiB on every node | — | not measured |")
	if t.Failed() {
		t.Log(text)
	}
}
