package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/bench/result"
)

// cpuStat is the first line of /proc/stat: busy and all jiffies, summed
// over the machine's CPUs, and how many CPUs the file lists.
type cpuStat struct {
	busy, iowait, total uint64
	cpus                int
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
		s.busy, s.iowait = user+nice+system+irq+softirq, iowait
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

// Settle waits for the machine to be idle before a measurement: it writes
// out dirty pages (sync), then waits until two 1-second samples in a row
// find at most idleBusy of the cores busy (iowait counted as busy, the
// disk being part of what a workload measures), or until most has
// passed. It returns the time waited and the last sample's busy share (0
// where /proc/stat is absent): a workload that follows another starts on
// a machine as quiet as the first one did, not during its writeback.
func Settle(most time.Duration, idleBusy float64) (time.Duration, float64) {
	start := time.Now()
	syscall.Sync()
	prev, ok := sampleCPU()
	if !ok {
		return time.Since(start), 0
	}
	quiet, busy := 0, 1.0
	for quiet < 2 && time.Since(start) < most {
		time.Sleep(time.Second) // the sampling interval
		cur, ok := sampleCPU()
		if !ok {
			break
		}
		busy, prev = busyShare(prev, cur), cur
		if busy <= idleBusy {
			quiet++
		} else {
			quiet = 0
		}
	}
	return time.Since(start), busy
}

// busyShare is the share of the jiffies between two samples that were
// busy or waiting on I/O.
func busyShare(a, b cpuStat) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.busy+b.iowait-a.busy-a.iowait) / float64(b.total-a.total)
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
