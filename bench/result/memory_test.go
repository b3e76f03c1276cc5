package result

import (
	"math"
	"testing"
)

func TestSlope(t *testing.T) {
	// y = 5 + 2x exactly: slope 2, no error.
	var pts []Point
	for x := range 10 {
		pts = append(pts, Point{X: float64(x), Y: 5 + 2*float64(x)})
	}
	b, se, ok := Slope(pts)
	if !ok || math.Abs(b-2) > 1e-9 || se > 1e-9 {
		t.Fatalf("Slope of y = 5 + 2x: got %v ± %v (ok %v), want 2 ± 0", b, se, ok)
	}
	// A sawtooth around a flat line, as a garbage-collected heap looks:
	// whole periods fit a slope near 0 with a standard error above 0.
	pts = nil
	for x := range 40 {
		pts = append(pts, Point{X: float64(x), Y: 100 + float64(x%4)*10})
	}
	b, se, ok = Slope(pts)
	if !ok || math.Abs(b) > 0.5 || se <= 0 {
		t.Fatalf("Slope of a flat sawtooth: got %v ± %v (ok %v), want about 0 with an error", b, se, ok)
	}
	if _, _, ok := Slope(pts[:2]); ok {
		t.Fatal("Slope of two points: got ok, want not enough points")
	}
	if _, _, ok := Slope([]Point{{1, 1}, {1, 2}, {1, 3}}); ok {
		t.Fatal("Slope with no spread in x: got ok, want not ok")
	}
}

func TestMemSeriesPoints(t *testing.T) {
	m := &MemSeries{Node: "n1", Samples: []MemSample{
		{AtMS: 0, RSSBytes: 1 << 20, HeapBytes: 0},
		{AtMS: 60000, RSSBytes: 3 << 20, HeapBytes: 2 << 20},
	}}
	rss, heap := m.RSS(), m.Heap()
	if len(rss) != 2 || rss[1] != (Point{X: 1, Y: 3}) {
		t.Fatalf("RSS points: got %v, want 2 points ending at (1 min, 3 MiB)", rss)
	}
	if len(heap) != 1 || heap[0] != (Point{X: 1, Y: 2}) {
		t.Fatalf("heap points: got %v, want the one sample whose heap was read, (1 min, 2 MiB)", heap)
	}
	if got := After(rss, 0.5); len(got) != 1 || got[0].X != 1 {
		t.Fatalf("After(0.5): got %v, want the point at 1", got)
	}
}
