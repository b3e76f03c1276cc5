package server

import (
	"net/http"
	rtmetrics "runtime/metrics"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's own Prometheus metrics, named
// baton_<subsystem>_<what>_<unit>. Raft's metrics reach the default
// registry through the go-metrics Prometheus sink that batond installs; the
// /metrics handler serves both.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
}

func newMetrics(c Cluster, f *fsm.FSM) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_http_requests_total", Help: "HTTP requests by method, route pattern (server/routes.go) and status code.",
	}, []string{"method", "route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "baton_http_request_duration_seconds", Help: "HTTP request latency by method and route pattern.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
	}, []string{"method", "route"})
	m.watchers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_watchers", Help: "Watch streams open on this node."})
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	m.reg.MustRegister(m.requests, m.latency, m.watchers, &domainCollector{f: f},
		gauge("baton_raft_applied_index", "Index of the last log entry applied to the FSM.",
			func() float64 { return float64(f.AppliedIndex()) }),
		gauge("baton_raft_commit_index", "Commit index known to this node.",
			func() float64 { return float64(c.CommitIndex()) }),
		gauge("baton_raft_term", "Current Raft term.", func() float64 { return float64(c.Term()) }),
		gauge("baton_raft_is_leader", "1 if this node is the leader.", func() float64 {
			if c.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("baton_fsm_keys", "Number of keys in the state machine.", func() float64 { return float64(f.Status().Keys) }),
		gauge("baton_state_bytes", "Bytes of data in the state, as quotas count them.", func() float64 { return float64(f.StateBytes()) }),
		gauge("baton_state_max_bytes", "The cluster's state quota (--max-state-bytes; 0: none).", func() float64 { return float64(f.Limits().MaxStateBytes) }),
		gauge("baton_session_bytes", "Bytes client sessions keep for exactly-once retries.", func() float64 { return float64(f.Status().SessionBytes) }),
		gauge("baton_session_max_bytes", "The cluster's bound on session bytes (--session-bytes).", func() float64 { return float64(f.Limits().SessionBytes) }),
		gauge("baton_idempotency_bytes", "Bytes of Idempotency-Key answers kept.", func() float64 { return float64(f.Status().IdemBytes) }),
		gauge("baton_idempotency_max_bytes", "The cluster's bound on Idempotency-Key answers (--idempotency-bytes).", func() float64 { return float64(f.Limits().IdemBytes) }),
		gauge("baton_go_heap_live_bytes", "Heap the Go runtime found live at the end of its last garbage collection (runtime/metrics /gc/heap/live:bytes).",
			heapLive),
		gauge("baton_watch_history_bytes", "Estimated bytes of events kept for watchers (--watch-history-bytes bounds it).", func() float64 {
			used, _ := f.History().Bytes()
			return float64(used)
		}),
	)
	return m
}

// heapLive is the live heap as of the last garbage collection: what the
// state holds, without the garbage a scrape of the current heap includes.
func heapLive() float64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

// buildInfo registers baton_build_info: 1, labelled with b.
func (m *metrics) buildInfo(b Build) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_build_info", Help: "Always 1; the labels say which build this node runs."},
		[]string{"version", "commit", "go_version"})
	g.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	m.reg.MustRegister(g)
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush lets server-sent events through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *metrics) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		method, route := methodLabel(r.Method), routeLabel(r)
		m.requests.WithLabelValues(method, route, strconv.Itoa(rec.status)).Inc()
		m.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	})
}

// routeLabel is the ServeMux pattern that served r ("/v1/tasks/{tenant}/{id}",
// set on r by the mux), never the raw path: the routes are a fixed set. A
// request refused before routing (a path not in clean form) is
// "unrouted"; one no route matched has the catch-all pattern "/".
func routeLabel(r *http.Request) string {
	if r.Pattern == "" {
		return "unrouted"
	}
	return r.Pattern
}

// methodLabel is the method as a metric label: the client chooses the
// method name, so anything but the standard methods counts as "other"
// (otherwise every made-up name would be a new series, without bound).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return m
	}
	return "other"
}
