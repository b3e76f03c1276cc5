package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// cpuStat is the first line of /proc/stat: busy and all jiffies, summed
// over the machine's CPUs, and how many CPUs the file lists.
type cpuStat struct {
	busy, total uint64
	cpus        int
}

// readCPUStat parses /proc/stat's text. Busy is user, nice, system, irq
// and softirq (guest time is already in user); idle, iowait and steal are
// not busy. ok is false when the text has no aggregate cpu line.
func readCPUStat(text []byte) (cpuStat, bool) {
	var s cpuStat
	found := false
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			s.cpus++
			continue
		}
		if len(f) < 9 {
			return cpuStat{}, false
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuStat{}, false
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		s.busy = user + nice + system + irq + softirq
		s.total = s.busy + idle + iowait + steal
		found = true
	}
	return s, found && s.cpus > 0
}

func sampleCPU() (cpuStat, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, false
	}
	return readCPUStat(b)
}

// cpuWindow samples the counters at the window's start and at its end (or
// when the load stops first) in the background.
type cpuWindow struct {
	done     chan struct{}
	from, to cpuStat
	ok       bool
}

func watchCPU(ctx context.Context, windowStart, end time.Time, stopped <-chan struct{}) *cpuWindow {
	w := &cpuWindow{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if !waitUntil(ctx, windowStart, stopped) {
			return
		}
		from, ok := sampleCPU()
		if !ok {
			return
		}
		waitUntil(ctx, end, stopped)
		to, ok := sampleCPU()
		w.from, w.to, w.ok = from, to, ok && to.total > from.total
	}()
	return w
}

// waitUntil waits for t, ctx's end or stopped; it reports whether t came.
func waitUntil(ctx context.Context, t time.Time, stopped <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
	case <-stopped:
	}
	return false
}

// record waits for the sampler and sets the metrics on r, once its
// throughput is known.
func (w *cpuWindow) record(r *result.Run) {
	<-w.done
	if !w.ok {
		return
	}
	cores := float64(w.to.busy-w.from.busy) / float64(w.to.total-w.from.total) * float64(w.to.cpus)
	r.SetMetric(result.MetricCPUBusyCores, cores)
	r.SetMetric(result.MetricCPUCores, float64(w.to.cpus))
	if r.OpsPerSec > 0 {
		r.SetMetric(result.MetricCPUMsPerOp, cores/r.OpsPerSec*1000)
	}
}
