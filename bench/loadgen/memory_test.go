package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

func TestHeapFromMetrics(t *testing.T) {
	text := `# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.2e+07
go_memstats_heap_inuse_bytes 1.6777216e+07
go_memstats_heap_inuse_bytes_total{x="y"} 1
`
	if got, err := HeapFromMetrics(strings.NewReader(text)); err != nil || got != 16777216 {
		t.Fatalf("got %d, %v; want heap in use, 16777216", got, err)
	}
	alloc := "go_memstats_heap_alloc_bytes 1.2e+07\n"
	if got, err := HeapFromMetrics(strings.NewReader(alloc)); err != nil || got != 12000000 {
		t.Fatalf("without heap_inuse: got %d, %v; want heap_alloc, 12000000", got, err)
	}
	if _, err := HeapFromMetrics(strings.NewReader("up 1\n")); err == nil {
		t.Fatal("without either: got no error")
	}
}

// TestSampleMemory samples this very process: its RSS from /proc and a
// heap served by a test /metrics endpoint.
func TestSampleMemory(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "go_memstats_heap_inuse_bytes 4096")
	}))
	defer srv.Close()
	pid := os.Getpid()
	s := SampleMemory(context.Background(), time.Now(), time.Hour, []MemTarget{
		{Name: "self", PID: func() int { return pid }, MetricsURL: srv.URL},
		{Name: "gone", PID: func() int { return 0 }},
	})
	series := s.Stop()
	if len(series) != 2 || series[0].Node != "self" || series[1].Node != "gone" {
		t.Fatalf("got %d series, want self and gone", len(series))
	}
	// The first sample at the start, the last one at Stop.
	self := series[0].Samples
	if len(self) != 2 {
		t.Fatalf("self: got %d samples, want 2 (start and stop)", len(self))
	}
	for _, m := range self {
		if m.RSSBytes <= 0 || m.HeapBytes != 4096 {
			t.Fatalf("self: got %+v, want RSS > 0 and heap 4096", m)
		}
	}
	for _, m := range series[1].Samples {
		if m.RSSBytes != 0 || m.HeapBytes != 0 {
			t.Fatalf("a process that does not run: got %+v, want nothing read", m)
		}
	}
}

func TestAnalyzeSoak(t *testing.T) {
	r := &result.Run{WarmupMS: 0, WindowMS: 9000, Series: &result.Series{BucketMS: 1000}}
	// 100 ops/s for the first 3 s, 200 in the middle, 50 in the last 3 s.
	for i := range 9 {
		r.Series.OK = append(r.Series.OK, []int64{100, 200, 50}[i/3])
	}
	// n1's heap grows 1 MiB a minute after a jump in the first third
	// (which the slope leaves out); n2's is flat.
	grow, flat := &result.MemSeries{Node: "n1"}, &result.MemSeries{Node: "n2"}
	for i := range 31 {
		at := float64(i) * 6000 // every 6 s for 3 min
		heap := int64(100<<20) + int64(float64(i)*0.1*(1<<20))
		if i < 10 {
			heap = 10 << 20
		}
		grow.Samples = append(grow.Samples, result.MemSample{AtMS: at, RSSBytes: 300 << 20, HeapBytes: heap})
		flat.Samples = append(flat.Samples, result.MemSample{AtMS: at, RSSBytes: int64(200+i%2) << 20, HeapBytes: 50 << 20})
	}
	r.Memory = []*result.MemSeries{grow, flat}
	AnalyzeSoak(r)
	near := func(name string, want, tol float64) {
		t.Helper()
		if got, ok := r.Metric(name); !ok || math.Abs(got-want) > tol {
			t.Errorf("%s: got %v (present %v), want %v", name, got, ok, want)
		}
	}
	near("slope_from_ms", 60000, 1)
	near("heap_slope_mib_per_min_n1", 1, 1e-9)
	near("heap_slope_mib_per_min_n2", 0, 1e-9)
	near("rss_slope_mib_per_min_n1", 0, 1e-9)
	near("rss_max_bytes_n2", 201<<20, 0)
	near("heap_max_bytes_n1", float64(100<<20)+30*0.1*(1<<20), 1)
	near("heap_last_bytes_n2", 50<<20, 0)
	near("ops_per_sec_first_third", 100, 1e-9)
	near("ops_per_sec_last_third", 50, 1e-9)

	// A window shorter than three buckets has no whole bucket in a third.
	short := &result.Run{WarmupMS: 200, WindowMS: 2000, Series: &result.Series{BucketMS: 1000, OK: []int64{5, 5, 5}}}
	AnalyzeSoak(short)
	if v, ok := short.Metric("ops_per_sec_first_third"); ok {
		t.Errorf("a 2 s window in 1 s buckets: got first-third rate %v, want none", v)
	}
}
