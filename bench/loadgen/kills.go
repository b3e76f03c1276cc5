package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// KillSchedule is when the recovery workload crashes the leader: the
// first kill First after the run's start, then one every Period, Count in
// all; each killed node is restarted Down after its kill.
type KillSchedule struct {
	First  time.Duration
	Period time.Duration
	Down   time.Duration
	Count  int
}

// Length is the run time the schedule needs: up to the last kill plus one
// period for the recovery to show.
func (s KillSchedule) Length() time.Duration {
	return s.First + time.Duration(s.Count)*s.Period
}

// Killer crashes and restarts one system's nodes.
type Killer interface {
	// KillLeader finds the current leader, kills it with SIGKILL and
	// returns its name and the moment of the kill.
	KillLeader(ctx context.Context) (node string, at time.Time, err error)
	// Restart starts a killed node again.
	Restart(ctx context.Context, node string) error
}

// KillEvent is a kill that happened.
type KillEvent struct {
	Node string
	At   time.Duration // since the run's start
}

// RunKills follows s from start, and returns the kills it made. An error
// ends the schedule (the kills so far are returned with it).
func RunKills(ctx context.Context, start time.Time, s KillSchedule, k Killer) ([]KillEvent, error) {
	var events []KillEvent
	for i := range s.Count {
		if err := sleepUntil(ctx, start.Add(s.First+time.Duration(i)*s.Period)); err != nil {
			return events, err
		}
		node, at, err := k.KillLeader(ctx)
		if err != nil {
			return events, fmt.Errorf("kill %d: %w", i+1, err)
		}
		events = append(events, KillEvent{Node: node, At: at.Sub(start)})
		if err := sleepUntil(ctx, at.Add(s.Down)); err != nil {
			return events, err
		}
		if err := k.Restart(ctx, node); err != nil {
			return events, fmt.Errorf("restart %s after kill %d: %w", node, i+1, err)
		}
	}
	return events, nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ProbeInterval is how often the recovery workload's prober starts a
// write.
const ProbeInterval = 20 * time.Millisecond

// maxProbesInFlight bounds the prober's goroutines.
const maxProbesInFlight = 2000

// Probe is one small write the prober issues, independent of the load.
type Probe func(ctx context.Context) error

// runProber starts probe every ProbeInterval, each in its own goroutine
// (a hung probe does not delay the next), from start until ctx ends, and
// returns their records once every probe has returned.
func runProber(ctx context.Context, start time.Time, probe Probe) []OpRecord {
	var mu sync.Mutex
	var recs []OpRecord
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxProbesInFlight)
	tick := time.NewTicker(ProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return recs
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // too many hung probes: skip this one
		}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
			err := probe(pctx)
			cancel()
			t1 := time.Now()
			mu.Lock()
			recs = append(recs, OpRecord{StartNS: int64(t0.Sub(start)), EndNS: int64(t1.Sub(start)), OK: err == nil})
			mu.Unlock()
		})
	}
}

// probeTimeout bounds one probe.
const probeTimeout = 15 * time.Second

// Recovery runs op under cfg while following the kill schedule and, when
// probe is not nil, a prober (a write every ProbeInterval, each on its own,
// so that no hung request delays the next). It returns the run with one
// Kill per crash: the unavailability comes from the probes, the recovery
// of throughput from the load. cfg.Duration is raised to fit the
// schedule; cfg.Trace is forced on.
func Recovery(ctx context.Context, cfg Config, s KillSchedule, k Killer, op Op, probe Probe) (*result.Run, error) {
	cfg.Trace = true
	cfg.Start = time.Now()
	cfg.Duration = max(cfg.Duration, s.Length()-cfg.Warmup)
	var probes []OpRecord
	probeDone := make(chan struct{})
	pctx, stopProbes := context.WithDeadline(ctx, cfg.Start.Add(cfg.Warmup+cfg.Duration))
	defer stopProbes()
	go func() {
		defer close(probeDone)
		if probe != nil {
			probes = runProber(pctx, cfg.Start, probe)
		}
	}()
	type killsDone struct {
		events []KillEvent
		err    error
	}
	done := make(chan killsDone, 1)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		ev, err := RunKills(kctx, cfg.Start, s, k)
		done <- killsDone{ev, err}
	}()
	out := Run(ctx, cfg, op)
	cancel()
	kd := <-done
	stopProbes()
	<-probeDone
	r := out.Run
	for i, ev := range kd.events {
		var until time.Duration
		if i+1 < len(kd.events) {
			until = kd.events[i+1].At
		}
		kill := AnalyzeKill(out.Trace, ev.At, until)
		kill.Node = ev.Node
		kill.LoadFirstWriteMS = kill.FirstWriteMS
		if probe != nil {
			kill.FirstWriteMS = firstWrite(probes, ev.At)
		}
		r.Kills = append(r.Kills, kill)
	}
	if probe != nil {
		r.SetMetric("probes", float64(len(probes)))
	}
	if kd.err != nil && len(kd.events) < s.Count {
		r.Failed = kd.err.Error()
	}
	r.SetMetric("kill_down_ms", float64(s.Down.Milliseconds()))
	r.SetMetric("kill_period_ms", float64(s.Period.Milliseconds()))
	var first, load, back []float64
	for _, kill := range r.Kills {
		first = append(first, kill.FirstWriteMS)
		load = append(load, kill.LoadFirstWriteMS)
		back = append(back, kill.Recover90MS)
	}
	if len(first) > 0 {
		r.SetMetric("unavailable_median_ms", Median(first))
		r.SetMetric("unavailable_max_ms", maxOf(first))
		r.SetMetric("load_unavailable_median_ms", Median(load))
		r.SetMetric("recover90_median_ms", Median(back))
	}
	return r, nil
}

// Median of xs, where a negative value (never recovered) counts as the
// largest; -1 when any such value is the median.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		if s[i] < 0 {
			s[i] = 1e18
		}
	}
	sortFloats(s)
	var m float64
	if len(s)%2 == 1 {
		m = s[len(s)/2]
	} else {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if m >= 1e17 {
		return -1
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		if x < 0 {
			return -1
		}
		m = max(m, x)
	}
	return m
}

func sortFloats(s []float64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
