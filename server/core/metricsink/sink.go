// Package metricsink keeps the go-metrics that hashicorp/raft (and the node
// package) emit as Prometheus metrics: samples as histograms, counters as
// counters, gauges as gauges, named and described by Prometheus'
// conventions (names.go): snake_case, times in seconds under _seconds,
// _total on counters, a HELP that explains.
//
// It replaces go-metrics' own Prometheus sink, which keeps every timer as a
// summary (a lock and a quantile stream per observation) and builds the
// metric's name and a lookup key as new strings on every call; raft times
// several steps of every log entry on every node. Here a metric is found by
// a hash of its key and labels, computed without allocating, and a
// histogram observation is a few atomic adds.
//
// A series, once emitted, is served for as long as the process lives (a
// leader-only timer on a node that lost leadership keeps its counts), so
// that rate() and increase() over it stay right; go-metrics' sink dropped
// series idle for a minute.
package metricsink

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// Histogram bounds by unit: times from 10 µs to about 5 s, doubling;
// counts from 1 to 8192; ratios in tenths.
var (
	secondsBuckets = prometheus.ExponentialBuckets(0.00001, 2, 20)
	countBuckets   = prometheus.ExponentialBuckets(1, 2, 14)
	ratioBuckets   = prometheus.LinearBuckets(0.1, 0.1, 10)
)

type kind uint8

const (
	kindGauge kind = iota + 1
	kindCounter
	kindSample
)

// Sink is a go-metrics MetricSink and a Prometheus collector. The zero
// value is not usable; call New.
type Sink struct {
	prefix string

	byHash sync.Map   // uint64 -> *entry, the head of a chain of entries with that hash
	mu     sync.Mutex // serialises adding entries
	all    []*entry   // every entry, in creation order, under mu
	// named holds, under mu, the entry that owns each Prometheus series
	// (name and labels): two keys that sanitise to one name share its
	// metric rather than make /metrics fail on a duplicate.
	named map[string]*entry
}

// entry is one metric: a key, its labels and its kind.
type entry struct {
	kind   kind
	parts  []string
	labels []metrics.Label
	next   atomic.Pointer[entry] // the next entry with the same hash
	scale  float64               // what a value is multiplied by: 1/1000 for a time in ms

	hist    prometheus.Histogram
	counter prometheus.Counter
	gauge   prometheus.Gauge
	alias   bool // shares the metric of the entry that owns its series; not collected itself
}

var (
	_ metrics.MetricSink   = (*Sink)(nil)
	_ prometheus.Collector = (*Sink)(nil)
)

// New returns a sink whose metrics are named prefix_<name> (names.go).
func New(prefix string) *Sink {
	return &Sink{prefix: prefix, named: map[string]*entry{}}
}

// SetGauge implements metrics.MetricSink.
func (s *Sink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements metrics.MetricSink.
func (s *Sink) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	e := s.get(kindGauge, key, labels)
	e.gauge.Set(float64(val) * e.scale)
}

// EmitKey implements metrics.MetricSink; a key-value event has no
// Prometheus form and raft emits none, so it is dropped.
func (s *Sink) EmitKey([]string, float32) {}

// IncrCounter implements metrics.MetricSink.
func (s *Sink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements metrics.MetricSink. A negative
// increment, which a Prometheus counter cannot take, is dropped.
func (s *Sink) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	if val < 0 {
		return
	}
	e := s.get(kindCounter, key, labels)
	e.counter.Add(float64(val))
}

// AddSample implements metrics.MetricSink.
func (s *Sink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements metrics.MetricSink.
func (s *Sink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	e := s.get(kindSample, key, labels)
	e.hist.Observe(float64(val) * e.scale)
}

// get finds the entry of (k, key, labels), creating it on first use.
func (s *Sink) get(k kind, key []string, labels []metrics.Label) *entry {
	h := hash(k, key, labels)
	if v, ok := s.byHash.Load(h); ok {
		for e := v.(*entry); e != nil; e = e.next.Load() {
			if e.is(k, key, labels) {
				return e
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var head *entry
	if v, ok := s.byHash.Load(h); ok { // look again: another caller may have added it
		head = v.(*entry)
		for e := head; e != nil; e = e.next.Load() {
			if e.is(k, key, labels) {
				return e
			}
		}
	}
	e := s.newEntry(k, key, labels)
	if head == nil {
		s.byHash.Store(h, e)
	} else { // a hash collision: chain it behind the head
		last := head
		for n := last.next.Load(); n != nil; n = last.next.Load() {
			last = n
		}
		last.next.Store(e)
	}
	s.all = append(s.all, e)
	return e
}

func (s *Sink) newEntry(k kind, key []string, labels []metrics.Label) *entry {
	e := &entry{kind: k, parts: append([]string(nil), key...), labels: append([]metrics.Label(nil), labels...), scale: 1}
	name, help, u := describe(s.prefix, k, key)
	if u == unitMillis && k != kindCounter {
		e.scale = 1.0 / 1000
	}
	var constLabels prometheus.Labels
	series := []string{name}
	if len(labels) > 0 {
		constLabels = prometheus.Labels{}
		for _, l := range labels {
			constLabels[sanitize(snake(l.Name))] = l.Value
		}
		for n, v := range constLabels {
			series = append(series, n+"="+v)
		}
		slices.Sort(series[1:])
	}
	id := strings.Join(series, "\xff")
	if owner, ok := s.named[id]; ok {
		e.alias = true
		if owner.kind == k { // the same series: count into it
			e.gauge, e.counter, e.hist = owner.gauge, owner.counter, owner.hist
			return e
		}
		// The same series as another kind: keep this one's figures out of
		// /metrics (Prometheus cannot serve both) in a metric of its own.
	} else {
		s.named[id] = e
	}
	switch k {
	case kindGauge:
		e.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels})
	case kindCounter:
		e.counter = prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels})
	case kindSample:
		buckets := secondsBuckets
		switch u {
		case unitCount:
			buckets = countBuckets
		case unitRatio:
			buckets = ratioBuckets
		}
		e.hist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help,
			ConstLabels: constLabels, Buckets: buckets})
	}
	return e
}

func (e *entry) is(k kind, key []string, labels []metrics.Label) bool {
	if e.kind != k || len(e.parts) != len(key) || len(e.labels) != len(labels) {
		return false
	}
	for i := range key {
		if e.parts[i] != key[i] {
			return false
		}
	}
	for i := range labels {
		if e.labels[i] != labels[i] {
			return false
		}
	}
	return true
}

func (e *entry) metric() prometheus.Collector {
	switch e.kind {
	case kindGauge:
		return e.gauge
	case kindCounter:
		return e.counter
	}
	return e.hist
}

// Describe implements prometheus.Collector. It describes nothing: the set
// of metrics grows as raft emits them, so the sink is an unchecked
// collector.
func (s *Sink) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: every metric emitted so far.
func (s *Sink) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	all := s.all[:len(s.all):len(s.all)]
	s.mu.Unlock()
	for _, e := range all {
		if !e.alias {
			e.metric().Collect(ch)
		}
	}
}

var forbidden = strings.NewReplacer(" ", "_", ".", "_", "=", "_", "-", "_", "/", "_")

func sanitize(s string) string { return forbidden.Replace(s) }

// hash is FNV-1a over the kind, the key's parts and the labels, each string
// followed by a separator byte that no part is expected to hold (a
// collision is still told apart by entry.is).
func hash(k kind, key []string, labels []metrics.Label) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	h = (h ^ uint64(k)) * prime
	str := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime
	}
	for _, p := range key {
		str(p)
	}
	for _, l := range labels {
		str(l.Name)
		str(l.Value)
	}
	return h
}
