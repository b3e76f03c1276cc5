package server

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/baton-dev/baton/fsm"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A client chooses the method name; made-up names must not become label
// values, or /metrics grows without bound (20,000 methods made it 44 MB).
func TestMetricsMethodLabelBounded(t *testing.T) {
	m := newMetrics(nil, fsm.New())
	h := m.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	before := testutil.CollectAndCount(m.requests) + testutil.CollectAndCount(m.latency)
	for _, method := range []string{"FOO", "BAR", "get", "PROPFIND", "X-1", "GET "} {
		h.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: method, URL: httptest.NewRequest("GET", "/x", nil).URL})
	}
	after := testutil.CollectAndCount(m.requests) + testutil.CollectAndCount(m.latency)
	if after != before+2 { // one "other" series in each of the two vectors
		t.Fatalf("made-up methods added %d series, want 2 (one \"other\" per vector)", after-before)
	}
	for _, method := range []string{"FOO", "BAZ"} {
		h.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: method, URL: httptest.NewRequest("GET", "/x", nil).URL})
	}
	if n := testutil.CollectAndCount(m.requests) + testutil.CollectAndCount(m.latency); n != after {
		t.Fatalf("more made-up methods added %d series, want 0", n-after)
	}
	if v := testutil.ToFloat64(m.requests.WithLabelValues("other", "unrouted", "200")); v != 8 {
		t.Fatalf(`requests{method="other"} = %v, want 8`, v)
	}
}

// The live heap gauge reads the runtime's figure: after a collection it
// is at least what a live allocation holds.
func TestHeapLive(t *testing.T) {
	hold := make([]byte, 8<<20)
	runtime.GC()
	if got := heapLive(); got < float64(len(hold)) {
		t.Fatalf("heapLive() = %v with %d bytes held", got, len(hold))
	}
	runtime.KeepAlive(hold)
}
