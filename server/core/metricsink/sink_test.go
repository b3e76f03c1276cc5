package metricsink

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather registers s on a fresh registry and returns its families by name.
func gather(t *testing.T, s *Sink) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(s); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func TestSinkKinds(t *testing.T) {
	s := New("baton")
	s.AddSample([]string{"raft", "commitTime"}, 0.5)
	s.AddSample([]string{"raft", "commitTime"}, 3)
	s.IncrCounter([]string{"raft", "apply"}, 2)
	s.IncrCounter([]string{"raft", "apply"}, 1)
	s.IncrCounter([]string{"raft", "apply"}, -1) // a counter cannot go down: dropped
	s.SetGauge([]string{"raft", "peers"}, 3)
	s.SetGauge([]string{"raft", "peers"}, 5)
	s.EmitKey([]string{"raft", "event"}, 1)
	lbl := []metrics.Label{{Name: "peer-id", Value: "n2"}}
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 1, lbl)
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 1, []metrics.Label{{Name: "peer-id", Value: "n3"}})

	fams := gather(t, s)
	if len(fams) != 4 {
		t.Errorf("families %d, want 4: %v", len(fams), fams)
	}
	h := fams["baton_raft_commit_time_seconds"]
	if h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("commit_time_seconds type %v, want histogram", h.GetType())
	}
	hist := h.GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 2 || math.Abs(hist.GetSampleSum()-0.0035) > 1e-9 {
		t.Errorf("commit_time_seconds count %d sum %v, want 2 and 0.0035 (3.5 ms)", hist.GetSampleCount(), hist.GetSampleSum())
	}
	// Raft's ms are observed in seconds: 0.5 ms falls at or below 0.64 ms,
	// 3 ms above 2.56 ms.
	for _, b := range hist.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 0.003:
			want = 2
		case b.GetUpperBound() >= 0.0005:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if c := fams["baton_raft_apply_total"]; c.GetType() != dto.MetricType_COUNTER || c.GetMetric()[0].GetCounter().GetValue() != 3 {
		t.Errorf("apply: %v, want a counter at 3", c)
	}
	if g := fams["baton_raft_peers"]; g.GetType() != dto.MetricType_GAUGE || g.GetMetric()[0].GetGauge().GetValue() != 5 {
		t.Errorf("peers: %v, want a gauge at 5", g)
	}
	rpc := fams["baton_raft_replication_append_entries_rpc_seconds"]
	if len(rpc.GetMetric()) != 2 {
		t.Fatalf("appendEntries rpc series %d, want one per peer", len(rpc.GetMetric()))
	}
	var got []string
	for _, m := range rpc.GetMetric() {
		got = append(got, labelsOf(m))
	}
	if strings.Join(got, " ") != "peer_id=n2 peer_id=n3" {
		t.Errorf("appendEntries rpc labels %v, want peer_id=n2 and peer_id=n3", got)
	}
}

func TestSinkNames(t *testing.T) {
	for _, c := range []struct {
		prefix string
		k      kind
		key    []string
		want   string
	}{
		{"baton", kindSample, []string{"raft", "leader", "dispatchLog"}, "baton_raft_leader_dispatch_log_seconds"},
		{"baton", kindSample, []string{"raft", "net", "getRPCType"}, "baton_raft_net_get_rpc_type_seconds"},
		{"baton", kindSample, []string{"raft", "net", "rpc-decode"}, "baton_raft_net_rpc_decode_seconds"},
		{"baton", kindSample, []string{"raft", "fsm", "applyBatchNum"}, "baton_raft_fsm_apply_batch_entries"},
		{"baton", kindSample, []string{"raft", "thread", "fsm", "saturation"}, "baton_raft_thread_fsm_saturation_ratio"},
		{"baton", kindGauge, []string{"raft", "leader", "oldestLogAge"}, "baton_raft_leader_oldest_log_age_seconds"},
		{"baton", kindGauge, []string{"raft", "peers"}, "baton_raft_peers"},
		{"baton", kindGauge, []string{"raft", "someNewGauge"}, "baton_raft_some_new_gauge"},
		{"baton", kindCounter, []string{"raft", "state", "leader"}, "baton_raft_state_leader_total"},
		{"baton", kindCounter, []string{"raft", "transition", "heartbeat_timeout"}, "baton_raft_transition_heartbeat_timeout_total"},
		{"baton", kindSample, []string{"node", "propose_wait"}, "baton_node_propose_wait_seconds"},
		{"", kindGauge, []string{"a.b", "c d", "e=f", "g/h"}, "a_b_c_d_e_f_g_h"},
	} {
		if got, _, _ := describe(c.prefix, c.k, c.key); got != c.want {
			t.Errorf("describe(%q, %v, %q) = %q, want %q", c.prefix, c.k, c.key, got, c.want)
		}
	}
}

// Every metric of the table follows Prometheus' conventions: snake_case,
// a unit suffix where it has one, _total on counters, a help that is more
// than the name. A counter key may also be emitted as a sample or gauge
// elsewhere, so each kind is checked.
func TestSinkKnownConventions(t *testing.T) {
	snakeRE := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for key, sp := range known {
		for _, k := range []kind{kindGauge, kindCounter, kindSample} {
			name, help, u := describe("baton", k, strings.Split(key, "."))
			if !snakeRE.MatchString(name) || strings.Contains(name, "__") {
				t.Errorf("%s: %q is not snake_case", key, name)
			}
			switch {
			case k == kindCounter && !strings.HasSuffix(name, "_total"):
				t.Errorf("%s: counter %q lacks _total", key, name)
			case k != kindCounter && u == unitMillis && !strings.HasSuffix(name, "_seconds"):
				t.Errorf("%s: time %q lacks _seconds", key, name)
			case k != kindCounter && strings.HasSuffix(name, "_total"):
				t.Errorf("%s: %q ends in _total but is not a counter", key, name)
			}
			if len(help) < 20 || help == name || sp.help == "" {
				t.Errorf("%s: help %q does not explain", key, help)
			}
		}
	}
}

// Two keys with one Prometheus name share a series rather than make the
// registry refuse the whole gather; one of another kind under that name
// is left out.
func TestSinkSameSeries(t *testing.T) {
	s := New("x")
	s.IncrCounter([]string{"a.b"}, 1)
	s.IncrCounter([]string{"a_b"}, 2)
	s.SetGauge([]string{"a", "b"}, 7) // also x_a_b, but a gauge
	fams := gather(t, s)
	c := fams["x_a_b_total"]
	if c.GetType() != dto.MetricType_COUNTER || len(c.GetMetric()) != 1 || c.GetMetric()[0].GetCounter().GetValue() != 3 {
		t.Errorf("x_a_b_total: %v, want one counter at 3", c)
	}
}

// A series stays on /metrics for as long as the process lives, however
// long it goes unchanged: there is no idle clock any more (go-metrics'
// sink, and this one before, dropped a series unchanged for a minute,
// which broke rate() over a leader-only timer after a leader change).
func TestSinkKeepsSeries(t *testing.T) {
	s := New("baton")
	s.AddSample([]string{"raft", "commitTime"}, 1)
	s.SetGauge([]string{"raft", "peers"}, 3)
	for range 3 {
		fams := gather(t, s)
		if len(fams) != 2 {
			t.Fatalf("families %d, want 2", len(fams))
		}
		if h := fams["baton_raft_commit_time_seconds"]; h.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
			t.Errorf("commit_time_seconds: %v, want its one sample", h)
		}
		if h := fams["baton_raft_commit_time_seconds"]; !strings.Contains(h.GetHelp(), "commit") {
			t.Errorf("commit_time_seconds help %q", h.GetHelp())
		}
	}
}

// Entries whose hashes collide are told apart by their keys.
func TestSinkHashChain(t *testing.T) {
	s := New("c")
	a, b := s.get(kindCounter, []string{"a"}, nil), s.get(kindCounter, []string{"b"}, nil)
	// Force b into a's chain as a collision would, then look both up.
	s.byHash.Delete(hash(kindCounter, []string{"b"}, nil))
	s.byHash.Store(hash(kindCounter, []string{"b"}, nil), a)
	a.next.Store(b)
	if got := s.get(kindCounter, []string{"b"}, nil); got != b {
		t.Error("b not found behind a in its chain")
	}
	if got := s.get(kindCounter, []string{"a"}, nil); got != a {
		t.Error("a not found at the head of its chain")
	}
	if got := s.get(kindGauge, []string{"a"}, nil); got == a {
		t.Error("a gauge with a counter's key found the counter")
	}
}

// An update of a metric that exists allocates nothing: the sink is on
// every log entry's path.
func TestSinkUpdateAllocs(t *testing.T) {
	s := New("baton")
	key := []string{"raft", "commitTime"}
	lkey := []string{"raft", "replication", "appendEntries", "rpc"}
	lbl := []metrics.Label{{Name: "peer_id", Value: "n2"}}
	s.AddSample(key, 1)
	s.AddSampleWithLabels(lkey, 1, lbl)
	s.IncrCounter(key, 1)
	if n := testing.AllocsPerRun(100, func() {
		s.AddSample(key, 1)
		s.AddSampleWithLabels(lkey, 1, lbl)
		s.IncrCounter(key, 1)
		s.SetGauge(key, 1)
	}); n != 0 {
		t.Errorf("%v allocations per update, want 0", n)
	}
}

func TestSinkConcurrent(t *testing.T) {
	s := New("baton")
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 500; i++ {
				s.AddSample([]string{"k", fmt.Sprint(i % 10)}, float32(i))
				if i%100 == 0 {
					if _, err := reg.Gather(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	fams := gather(t, s)
	var total uint64
	for i := 0; i < 10; i++ {
		total += fams[fmt.Sprintf("baton_k_%d_seconds", i)].GetMetric()[0].GetHistogram().GetSampleCount()
	}
	if total != 8*500 {
		t.Errorf("%d samples counted, want %d", total, 8*500)
	}
}
