// Package gctune bounds how far the Go heap may grow past its live data in
// bytes rather than as a ratio.
//
// The Go collector starts a cycle when the heap reaches GOGC percent more
// than the data live after the last one (100% by default): a node holding
// 330 MB of tasks may reach 660 MB before it collects, while a node holding
// 20 MB collects every 20 MB it allocates, which is many cycles for little
// memory. Run instead keeps the growth allowed per cycle near a number of
// bytes (the headroom), as a percentage of the live heap that it updates as
// the live heap changes: small heaps collect less often, large ones grow at
// most by a quarter of their live data (MinPercent).
package gctune

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// MinPercent is the lowest GOGC Run sets: below it the collector runs
	// so often for a large heap that its CPU cost outweighs the memory.
	MinPercent = 25
	// MaxPercent caps the GOGC Run sets for a nearly empty heap.
	MaxPercent = 10000
)

// minHeap is the Go runtime's smallest heap goal at GOGC=100 (4 MiB): the
// collector treats a smaller live heap (and a live heap not measured yet,
// before the first collection) as this large, so the growth GOGC allows
// is a percentage of at least this.
const minHeap = 4 << 20

// Percent is the GOGC that gives a heap of live bytes about headroom bytes
// of growth, within [MinPercent, MaxPercent].
func Percent(live, headroom int64) int {
	p := headroom * 100 / max(live, minHeap)
	return int(min(max(p, MinPercent), MaxPercent))
}

// Run sets GOGC from the live heap every interval until ctx ends, then puts
// back the GOGC it found. It changes the setting only when it moves by more
// than a tenth, so a steady heap costs nothing but one runtime/metrics read
// per interval.
func Run(ctx context.Context, headroom int64, interval time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	current := int(sample[1].Value.Uint64())
	defer debug.SetGCPercent(current)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		metrics.Read(sample)
		// Zero until the first collection ends: Go's own first goal (4
		// MiB) stands until then, and the live heap is measured.
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > 0 {
			want := Percent(int64(sample[0].Value.Uint64()), headroom)
			if d := want - current; d*10 > current || -d*10 > current {
				debug.SetGCPercent(want)
				current = want
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
