package result

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {0.999, 9990 * time.Microsecond}} {
		got := h.Quantile(tc.q)
		if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 0.012 {
			t.Errorf("Quantile(%v): got %v, want %v within 1.2%%", tc.q, got, tc.want)
		}
	}
	if h.Quantile(1) != 10*time.Millisecond || h.Quantile(0) != time.Microsecond {
		t.Errorf("got min %v max %v, want 1µs and 10ms", h.Quantile(0), h.Quantile(1))
	}
}

func TestHistogramJSONAndMerge(t *testing.T) {
	var a, b Histogram
	for i := range 100 {
		a.Record(time.Duration(i+1) * time.Millisecond)
		b.Record(time.Duration(i+101) * time.Millisecond)
	}
	a.Compact()
	data, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	back.Merge(&b)
	if back.Count != 200 || back.MinNS != int64(time.Millisecond) || back.MaxNS != int64(200*time.Millisecond) {
		t.Fatalf("got count %d min %d max %d, want 200, 1ms, 200ms", back.Count, back.MinNS, back.MaxNS)
	}
	if got := back.Quantile(0.5); got < 98*time.Millisecond || got > 102*time.Millisecond {
		t.Fatalf("median: got %v, want about 100ms", got)
	}
	if pts := back.CDF(); len(pts) == 0 || pts[len(pts)-1].Y != 1 {
		t.Fatalf("CDF: got %v, want points ending at 1", pts)
	}
}
