package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// MemTarget is a server process whose memory a soak samples.
type MemTarget struct {
	Name string
	// PID returns the process's id, 0 when it does not run.
	PID func() int
	// MetricsURL is its Prometheus text endpoint ("" for none), read for
	// the Go heap (HeapMetric, or FallbackHeapMetric when absent).
	MetricsURL string
}

// The Prometheus Go collector's heap gauges: the bytes in in-use heap
// spans, and the bytes of allocated heap objects (read when the first is
// absent).
const (
	HeapMetric         = "go_memstats_heap_inuse_bytes"
	FallbackHeapMetric = "go_memstats_heap_alloc_bytes"
)

// MemSampler samples its targets' memory at regular intervals.
type MemSampler struct {
	start   time.Time
	targets []MemTarget
	http    *http.Client
	stop    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	series []*result.MemSeries
}

// SampleMemory samples every target now and then every interval, until
// Stop or ctx's end; times are since start (the run's origin).
func SampleMemory(ctx context.Context, start time.Time, every time.Duration, targets []MemTarget) *MemSampler {
	s := &MemSampler{start: start, targets: targets, stop: make(chan struct{}), done: make(chan struct{}),
		http: &http.Client{Timeout: 5 * time.Second}}
	for _, t := range targets {
		s.series = append(s.series, &result.MemSeries{Node: t.Name})
	}
	s.sample(ctx)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-tick.C:
				s.sample(ctx)
			}
		}
	}()
	return s
}

// Stop waits for a sample under way, takes a last one and returns every
// target's series.
func (s *MemSampler) Stop() []*result.MemSeries {
	close(s.stop)
	<-s.done
	s.sample(context.Background())
	return s.series
}

func (s *MemSampler) sample(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.targets {
		m := result.MemSample{}
		if pid := t.PID(); pid > 0 {
			m.RSSBytes, _ = RSS(pid)
		}
		if t.MetricsURL != "" {
			m.HeapBytes, _ = s.heap(ctx, t.MetricsURL)
		}
		m.AtMS = float64(time.Since(s.start)) / float64(time.Millisecond)
		s.series[i].Samples = append(s.series[i].Samples, m)
	}
}

func (s *MemSampler) heap(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return HeapFromMetrics(resp.Body)
}

// HeapFromMetrics reads the Go heap in bytes from a Prometheus text
// exposition: HeapMetric, or FallbackHeapMetric when it is absent.
func HeapFromMetrics(r io.Reader) (int64, error) {
	vals := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != HeapMetric && f[0] != FallbackHeapMetric) {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			vals[f[0]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	for _, name := range []string{HeapMetric, FallbackHeapMetric} {
		if v, ok := vals[name]; ok {
			return int64(v), nil
		}
	}
	return 0, fmt.Errorf("loadgen: no %s nor %s in the metrics", HeapMetric, FallbackHeapMetric)
}

// RSS returns the resident set size of process pid in bytes, from
// /proc/PID/status (VmRSS).
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); err == nil {
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("loadgen: no VmRSS for pid %d", pid)
}

// SoakFraction is the part of a soak run its memory slopes leave out: the
// first third, while caches, connection pools and the Raft log's first
// segments fill.
const SoakFraction = 1.0 / 3

// AnalyzeSoak sets the soak figures of r from r.Memory and r.Series: per
// node, the least-squares slopes of the heap and the RSS over the last
// two thirds of the run (MiB per minute, with the heap slope's standard
// error), the largest RSS and heap, and the last heap; and the throughput
// of the first and last thirds of the measured window.
func AnalyzeSoak(r *result.Run) {
	var end float64 // minutes
	for _, m := range r.Memory {
		if n := len(m.Samples); n > 0 {
			end = max(end, m.Samples[n-1].AtMS/60000)
		}
	}
	from := end * SoakFraction
	r.SetMetric("slope_from_ms", from*60000)
	for _, m := range r.Memory {
		heap, rss := m.Heap(), m.RSS()
		if b, se, ok := result.Slope(result.After(heap, from)); ok {
			r.SetMetric("heap_slope_mib_per_min_"+m.Node, b)
			r.SetMetric("heap_slope_se_mib_per_min_"+m.Node, se)
		}
		if b, _, ok := result.Slope(result.After(rss, from)); ok {
			r.SetMetric("rss_slope_mib_per_min_"+m.Node, b)
		}
		var maxRSS, maxHeap, lastHeap int64
		for _, s := range m.Samples {
			maxRSS, maxHeap = max(maxRSS, s.RSSBytes), max(maxHeap, s.HeapBytes)
			if s.HeapBytes > 0 {
				lastHeap = s.HeapBytes
			}
		}
		if maxRSS > 0 {
			r.SetMetric("rss_max_bytes_"+m.Node, float64(maxRSS))
		}
		if maxHeap > 0 {
			r.SetMetric("heap_max_bytes_"+m.Node, float64(maxHeap))
			r.SetMetric("heap_last_bytes_"+m.Node, float64(lastHeap))
		}
	}
	if s := r.Series; s != nil && s.BucketMS > 0 && r.WindowMS > 0 {
		w0 := float64(r.WarmupMS)
		third := r.WindowMS / 3
		if v, ok := seriesRate(s, w0, w0+third); ok {
			r.SetMetric("ops_per_sec_first_third", v)
		}
		if v, ok := seriesRate(s, w0+2*third, w0+r.WindowMS); ok {
			r.SetMetric("ops_per_sec_last_third", v)
		}
	}
}

// seriesRate is the successful completions per second of the buckets
// that lie wholly within [fromMS, toMS), if any does; a bucket past the
// end of the series completed nothing.
func seriesRate(s *result.Series, fromMS, toMS float64) (float64, bool) {
	first := int64(math.Ceil(fromMS / float64(s.BucketMS)))
	last := int64(math.Floor(toMS/float64(s.BucketMS))) - 1 // the last bucket that ends by toMS
	if last < first {
		return 0, false
	}
	var n int64
	for i := first; i <= last; i++ {
		if i < int64(len(s.OK)) {
			n += s.OK[i]
		}
	}
	return float64(n) / (float64(last-first+1) * float64(s.BucketMS) / 1000), true
}
