package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom int64
		want           int
	}{
		{0, 64 * mib, 1600},               // nothing measured yet: Go's 4 MiB floor plus the headroom, not 100 times the floor
		{1 << 10, 64 * mib, 1600},         // a tiny heap counts as the floor
		{1 << 10, 1 << 40, MaxPercent},    // capped
		{32 * mib, 64 * mib, 200},         // a small heap collects half as often as GOGC=100
		{64 * mib, 64 * mib, 100},         // the headroom equals the live heap
		{330 * mib, 64 * mib, MinPercent}, // 1,000,000 tasks: grows by a quarter, not by all of it
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(live %d, headroom %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// Run moves GOGC to what the live heap calls for and puts the old value
// back when its context ends.
func TestRunSetsAndRestores(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	keep := make([]byte, 8<<20) // about 8 MiB live
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, 64<<20, 5*time.Millisecond); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := gogc()
		if p > 300 { // 64 MiB of headroom over about 8 MiB live: several hundred percent
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after 10 s; want it raised for a small heap", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC %d after Run returned, want the 100 it found", p)
	}
	runtime.KeepAlive(keep)
}

// gogc reads the GOGC in force without changing it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
