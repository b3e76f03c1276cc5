package result

import "math"

// MemSeries is the memory of one server process (a node, a member)
// sampled over a run.
type MemSeries struct {
	Node    string      `json:"node"`
	Samples []MemSample `json:"samples"`
}

// MemSample is one sample of a process's memory.
type MemSample struct {
	// AtMS is when it was taken, in milliseconds since the run's start.
	AtMS float64 `json:"at_ms"`
	// RSSBytes is the resident set size (/proc/PID/status VmRSS); 0 when
	// it could not be read.
	RSSBytes int64 `json:"rss_bytes"`
	// HeapBytes is the Go heap in use as the process's /metrics reports
	// it (go_memstats_heap_inuse_bytes); 0 when it could not be read.
	HeapBytes int64 `json:"heap_bytes"`
}

// RSS returns (minutes since the start, MiB) points of the samples whose
// RSS was read.
func (m *MemSeries) RSS() []Point { return m.points(func(s MemSample) int64 { return s.RSSBytes }) }

// Heap returns (minutes since the start, MiB) points of the samples whose
// heap was read.
func (m *MemSeries) Heap() []Point { return m.points(func(s MemSample) int64 { return s.HeapBytes }) }

func (m *MemSeries) points(get func(MemSample) int64) []Point {
	var pts []Point
	for _, s := range m.Samples {
		if v := get(s); v > 0 {
			pts = append(pts, Point{X: s.AtMS / 60000, Y: float64(v) / (1 << 20)})
		}
	}
	return pts
}

// After returns the points at or after x.
func After(pts []Point, x float64) []Point {
	var out []Point
	for _, p := range pts {
		if p.X >= x {
			out = append(out, p)
		}
	}
	return out
}

// Slope fits y = a + b·x to pts by least squares and returns b and its
// standard error; ok is false with fewer than three points or no spread
// in x.
func Slope(pts []Point) (slope, stderr float64, ok bool) {
	n := float64(len(pts))
	if len(pts) < 3 {
		return 0, 0, false
	}
	var mx, my float64
	for _, p := range pts {
		mx += p.X
		my += p.Y
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for _, p := range pts {
		sxx += (p.X - mx) * (p.X - mx)
		sxy += (p.X - mx) * (p.Y - my)
	}
	if sxx == 0 {
		return 0, 0, false
	}
	slope = sxy / sxx
	var sse float64
	for _, p := range pts {
		r := p.Y - (my + slope*(p.X-mx))
		sse += r * r
	}
	stderr = math.Sqrt(sse / (n - 2) / sxx)
	return slope, stderr, true
}
