package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestSchedule: an interval schedule against a real batond creates tasks
// whose ids carry their tick; pause stops it; an invalid cron expression
// is ErrInvalidArgument.
func TestSchedule(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	beat, queue := uniqueName("beat"), uniqueName("schq") // -count=N shares the node
	if _, err := c.CreateSchedule(ctx, "acme", client.CreateScheduleRequest{ScheduleID: uniqueName("bad"), Queue: queue, Cron: "* * *"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("invalid cron: %v, want ErrInvalidArgument", err)
	}
	s, err := c.CreateSchedule(ctx, "acme", client.CreateScheduleRequest{ScheduleID: beat, Queue: queue, IntervalMs: 1000})
	if err != nil || s.CatchUp != client.CatchUpLatest {
		t.Fatalf("create: %+v %v", s, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Ticks < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no tick: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
		if s, err = c.GetSchedule(ctx, "acme", beat); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = c.PauseSchedule(ctx, "acme", beat); err != nil || !s.Paused {
		t.Fatalf("pause: %+v %v", s, err)
	}
	list, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue})
	if err != nil || uint64(len(list.Tasks)) != s.Ticks || !strings.HasPrefix(list.Tasks[0].TaskID, beat+":") {
		t.Fatalf("tasks of %d ticks: %+v %v", s.Ticks, list, err)
	}
	all, err := c.ListSchedules(ctx, "acme", 0, "")
	if err != nil || !slices.ContainsFunc(all.Schedules, func(s client.Schedule) bool { return s.ScheduleID == beat }) {
		t.Fatalf("list: %+v %v", all, err)
	}
	if err := c.DeleteSchedule(ctx, "acme", beat); err != nil {
		t.Fatal(err)
	}
}
