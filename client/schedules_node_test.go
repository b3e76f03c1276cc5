package client_test

import (
	"errors"
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
	if _, err := c.CreateSchedule(ctx, "acme", client.CreateScheduleRequest{ScheduleID: "bad", Queue: "schq", Cron: "* * *"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("invalid cron: %v, want ErrInvalidArgument", err)
	}
	s, err := c.CreateSchedule(ctx, "acme", client.CreateScheduleRequest{ScheduleID: "beat", Queue: "schq", IntervalMs: 1000})
	if err != nil || s.CatchUp != client.CatchUpLatest {
		t.Fatalf("create: %+v %v", s, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Ticks < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no tick: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
		if s, err = c.GetSchedule(ctx, "acme", "beat"); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = c.PauseSchedule(ctx, "acme", "beat"); err != nil || !s.Paused {
		t.Fatalf("pause: %+v %v", s, err)
	}
	list, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: "schq"})
	if err != nil || uint64(len(list.Tasks)) != s.Ticks || !strings.HasPrefix(list.Tasks[0].TaskID, "beat:") {
		t.Fatalf("tasks of %d ticks: %+v %v", s.Ticks, list, err)
	}
	if all, err := c.ListSchedules(ctx, "acme", 0, ""); err != nil || len(all.Schedules) == 0 || all.Schedules[0].ScheduleID != "beat" {
		t.Fatalf("list: %+v %v", all, err)
	}
	if err := c.DeleteSchedule(ctx, "acme", "beat"); err != nil {
		t.Fatal(err)
	}
}
