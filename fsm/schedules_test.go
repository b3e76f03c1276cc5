package fsm

import (
	"testing"
)

// TestScheduleTickOnce: a tick creates its tasks (ids from the schedule
// and the tick) and moves the next tick; the same tick proposed again (a
// new leader, a retry) is refused and creates nothing; pausing takes the
// schedule off the due index and resuming puts it back.
func TestScheduleTickOnce(t *testing.T) {
	l := newLC(t)
	first := l.now + 1000
	if r := l.do(NewCommand(KindScheduleCreate, 0, "acme", "", &ScheduleCreateArgs{ID: "nightly", Queue: "q", IntervalMs: 1000,
		Payload: []byte(`{"r":1}`), NextAt: first})); !r.OK() {
		t.Fatalf("create: %s %s", r.Code, r.Message)
	}
	if due := l.f.DueSchedules(l.now, 10); len(due) != 0 {
		t.Fatal("due before its first tick")
	}
	l.now = first + 2500 // three ticks missed
	due := l.f.DueSchedules(l.now, 10)
	if len(due) != 1 || due[0].NextAt != first {
		t.Fatalf("due: %+v", due)
	}
	tick := &ScheduleTickArgs{ID: "nightly", Expect: first, Ticks: []int64{first, first + 1000, first + 2000}, NextAt: first + 3000}
	if r := l.do(NewCommand(KindScheduleTick, 0, "acme", "", tick)); !r.OK() {
		t.Fatalf("tick: %s %s", r.Code, r.Message)
	}
	for _, at := range tick.Ticks {
		if task := l.get(ScheduleTaskID("nightly", at)); task.Queue != "q" || string(task.Payload) != `{"r":1}` {
			t.Fatalf("task of tick %d: %+v", at, task)
		}
	}
	before := l.f.st.Len()
	if r := l.do(NewCommand(KindScheduleTick, 0, "acme", "", tick)); r.Code != CodeVersionMismatch || l.f.st.Len() != before {
		t.Fatalf("the same tick again: %s (keys %d → %d)", r.Code, before, l.f.st.Len())
	}
	s, _, _ := l.f.GetSchedule("acme", "nightly")
	if s.NextAt != first+3000 || s.Ticks != 3 || s.LastTick != first+2000 {
		t.Fatalf("after the tick: %+v", s)
	}
	// A tick after the command's time, or out of order, is refused.
	bad := &ScheduleTickArgs{ID: "nightly", Expect: first + 3000, Ticks: []int64{first + 3000}, NextAt: first + 4000}
	if r := l.do(NewCommand(KindScheduleTick, 0, "acme", "", bad)); r.Code != CodeInvalidArgument {
		t.Fatalf("a tick not due yet: %s", r.Code)
	}
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "nightly", Paused: true}))
	l.now += 10_000
	if due := l.f.DueSchedules(l.now, 10); len(due) != 0 {
		t.Fatal("a paused schedule is due")
	}
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "nightly", NextAt: l.now + 500}))
	if due := l.f.DueSchedules(l.now+500, 10); len(due) != 1 {
		t.Fatal("a resumed schedule is not due at its next tick")
	}
	l.ok2(NewCommand(KindScheduleDelete, 0, "acme", "", &ScheduleDeleteArgs{ID: "nightly"}))
	if due := l.f.DueSchedules(l.now+500, 10); len(due) != 0 || hasPrefix(l.f.st, "t/acme/sch/") {
		t.Fatal("a deleted schedule is left")
	}
	if r := l.do(NewCommand(KindScheduleCreate, 0, "acme", "", &ScheduleCreateArgs{ID: "x", Queue: "q", Cron: "* * * * *", IntervalMs: 5, NextAt: 1})); r.Code != CodeInvalidArgument {
		t.Fatalf("cron and interval both: %s", r.Code)
	}
}

// TestScheduleTicksNeverGoBack: a resume whose next tick is at or before
// the last tick made (the resuming leader's clock is behind the one that
// stamped the ticks: a clock skew, or a node ahead that fired them early)
// makes no task for those ticks again and does not count them: the
// ticks counter counts the tasks made, and last_tick_at never goes back.
// Found by the chaos suite (schedules checker, seeds 7, 10 and 15 of
// go run ./chaos/cmd/chaos --runs 20 --seed 1).
func TestScheduleTicksNeverGoBack(t *testing.T) {
	l := newLC(t)
	first := l.now + 1000
	l.ok2(NewCommand(KindScheduleCreate, 0, "acme", "", &ScheduleCreateArgs{ID: "s", Queue: "q", IntervalMs: 1000, NextAt: first}))
	l.now = first + 2000
	l.ok2(NewCommand(KindScheduleTick, 0, "acme", "", &ScheduleTickArgs{ID: "s", Expect: first,
		Ticks: []int64{first, first + 1000, first + 2000}, NextAt: first + 3000}))
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "s", Paused: true}))
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "s", NextAt: first + 500}))
	l.now = first + 3000
	keys := l.f.st.Len()
	l.ok2(NewCommand(KindScheduleTick, 0, "acme", "", &ScheduleTickArgs{ID: "s", Expect: first + 500,
		Ticks: []int64{first + 500, first + 1500, first + 2500}, NextAt: first + 3500}))
	for _, at := range []int64{first + 500, first + 1500} {
		if l.f.st.Has(taskKey("acme", ScheduleTaskID("s", at))) {
			t.Fatalf("a task for tick %d, before the last tick %d", at, first+2000)
		}
	}
	s, _, _ := l.f.GetSchedule("acme", "s")
	if s.Ticks != 4 || s.LastTick != first+2500 || s.NextAt != first+3500 || !l.f.st.Has(taskKey("acme", ScheduleTaskID("s", first+2500))) {
		t.Fatalf("after a tick from a next_at behind the last tick: ticks %d, last %d, next %d (keys %d → %d)",
			s.Ticks, s.LastTick, s.NextAt, keys, l.f.st.Len())
	}
	// On the same grid (a cron): the ticks made already are not counted again.
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "s", Paused: true}))
	l.ok2(NewCommand(KindSchedulePause, 0, "acme", "", &SchedulePauseArgs{ID: "s", NextAt: first + 1500}))
	l.now = first + 3500
	l.ok2(NewCommand(KindScheduleTick, 0, "acme", "", &ScheduleTickArgs{ID: "s", Expect: first + 1500,
		Ticks: []int64{first + 1500, first + 2500, first + 3500}, NextAt: first + 4500}))
	if s, _, _ = l.f.GetSchedule("acme", "s"); s.Ticks != 5 || s.LastTick != first+3500 {
		t.Fatalf("after ticks made already came again: ticks %d, last %d", s.Ticks, s.LastTick)
	}
}

func (l *lc) ok2(c *Command) {
	l.t.Helper()
	if r := l.do(c); !r.OK() {
		l.t.Fatalf("%s: %s %s", c.Kind, r.Code, r.Message)
	}
}

// TestListSchedules: pages in id order, filtered by visible.
func TestListSchedules(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"c", "a", "b", "hidden"} {
		l.ok2(NewCommand(KindScheduleCreate, 0, "acme", "", &ScheduleCreateArgs{ID: id, Queue: "q", IntervalMs: 1000, NextAt: l.now + 1000}))
	}
	visible := func(s *Schedule) bool { return s.ID != "hidden" }
	page, next, _ := l.f.ListSchedules("acme", "", 2, visible)
	if len(page) != 2 || page[0].ID != "a" || page[1].ID != "b" || next != "b" {
		t.Fatalf("first page: %d, next %q", len(page), next)
	}
	page, next, _ = l.f.ListSchedules("acme", next, 2, visible)
	if len(page) != 1 || page[0].ID != "c" || next != "" {
		t.Fatalf("second page: %d, next %q", len(page), next)
	}
}
