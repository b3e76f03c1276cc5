package pyrun

import (
	"testing"
	"time"
)

// TestDecode: the last line of a driver's stdout is its run, in
// bench/result's schema (the histogram in its buckets).
func TestDecode(t *testing.T) {
	out := []byte("some noise\n" + `{"system": "baton", "workload": "sdk", "variant": "C=4", "client": "python", "workers": 4,` +
		` "ops": 3, "errors": 0, "ops_per_sec": 5.0, "window_ms": 600.0, "latency": {"count": 3, "sum_ns": 5000000,` +
		` "min_ns": 500, "max_ns": 3000000, "buckets": [[0, 1], [637, 2]]}, "metrics": {"p50_ms": 1.0}}` + "\n\n")
	r, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workload != "sdk" || r.Client != "python" || r.Variant != "C=4" || r.Ops != 3 {
		t.Fatalf("decoded %+v", r)
	}
	if p50 := r.Latency.Quantile(0.5); p50 < 990*time.Microsecond || p50 > 1010*time.Microsecond {
		t.Fatalf("p50 %v, want about 1 ms", p50)
	}
	for _, bad := range []string{"", "not json", `{"system": "baton"}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
}
