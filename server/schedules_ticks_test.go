package server

import (
	"fmt"
	"testing"

	"github.com/baton-dev/baton/fsm"
)

// TestScheduleTicksCatchUp: the ticks a due schedule fires under each
// catch-up policy, and the tick after them.
func TestScheduleTicksCatchUp(t *testing.T) {
	cases := []struct {
		interval    int64
		catchUp     string
		next, now   int64
		ticks       string
		nextAfter   int64
		description string
	}{
		{1000, fsm.CatchUpAll, 10_000, 15_500, "[10000 11000 12000 13000 14000 15000]", 16_000, "every missed tick"},
		{1000, fsm.CatchUpAll, 10_000, 500_000, fmt.Sprint(seq(10_000, 100)), 110_000, "at most 100, the rest later"},
		{1000, fsm.CatchUpLatest, 10_000, 15_500, "[15000]", 16_000, "the latest only"},
		{1000, fsm.CatchUpSkip, 10_000, 10_200, "[10000]", 11_000, "on time"},
		{100_000, fsm.CatchUpSkip, 10_000, 200_000, "[]", 210_000, "late ones skipped"},
	}
	for _, c := range cases {
		a := scheduleTicks(&fsm.Schedule{ID: "s", CatchUp: c.catchUp, IntervalMs: c.interval, NextAt: c.next}, &tickSpec{interval: c.interval}, c.now)
		if a == nil || fmt.Sprint(a.Ticks) != c.ticks || a.NextAt != c.nextAfter || a.Expect != c.next {
			t.Errorf("%s (%s): %+v, want ticks %s, next %d", c.catchUp, c.description, a, c.ticks, c.nextAfter)
		}
	}
}

func seq(from int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)*1000
	}
	return out
}
