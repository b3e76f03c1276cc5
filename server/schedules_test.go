package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSchedulesHTTP: an interval schedule creates one task per tick, with
// the tick's time in its id, fired by the leader; paused it creates none;
// invalid cron expressions, time zones and intervals are 400 and write
// nothing; a cron schedule's first tick is computed in its time zone.
func TestSchedulesHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	for body, msg := range map[string]string{
		`{"schedule_id":"bad","queue":"sq","cron":"61 * * * *"}`:                          "is not a valid expression",
		`{"schedule_id":"bad","queue":"sq","cron":"0 9 * * *","timezone":"Mars/Olympus"}`: "is not an IANA time zone",
		`{"schedule_id":"bad","queue":"sq","interval_ms":10}`:                             "interval_ms must be between",
		`{"schedule_id":"bad","queue":"sq","cron":"@hourly","interval_ms":1000}`:          "one of them",
		`{"schedule_id":"bad","queue":"sq","interval_ms":1000,"catch_up":"some"}`:         "catch_up",
	} {
		status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/schedules", body, adm)
		if status != http.StatusBadRequest || !strings.Contains(string(resp), msg) {
			t.Errorf("%s: %d %s, want 400 with %q", body, status, resp, msg)
		}
	}
	fx.get(t, "/v1/tenants/acme/schedules/bad", adm, http.StatusNotFound, nil)

	var sch struct {
		NextAt string `json:"next_at"`
		Ticks  uint64 `json:"ticks"`
		Paused bool   `json:"paused"`
	}
	status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/schedules",
		`{"schedule_id":"daily","queue":"sq","cron":"30 9 * * *","timezone":"Asia/Tokyo"}`, adm)
	if status != http.StatusCreated {
		t.Fatalf("cron create: %d %s", status, resp)
	}
	decodeBody(t, resp, &sch)
	if next, err := time.Parse(time.RFC3339Nano, sch.NextAt); err != nil || next.In(mustZone(t, "Asia/Tokyo")).Format("15:04") != "09:30" {
		t.Fatalf("first tick of 30 9 * * * in Asia/Tokyo: %s %v", sch.NextAt, err)
	}

	status, _, resp = fx.c.do(t, 0, "POST", "/v1/tenants/acme/schedules", `{"schedule_id":"every","queue":"sq","interval_ms":1000,"payload":{"k":1}}`, adm)
	if status != http.StatusCreated {
		t.Fatalf("interval create: %d %s", status, resp)
	}
	waitFor(t, "two ticks", func() string {
		fx.get(t, "/v1/tenants/acme/schedules/every", adm, http.StatusOK, &sch)
		if sch.Ticks < 2 {
			return fmt.Sprintf("%+v", sch)
		}
		return ""
	})
	fx.mustTask(t, "POST", "/v1/tenants/acme/schedules/every/pause", "", adm, http.StatusOK)
	fx.get(t, "/v1/tenants/acme/schedules/every", adm, http.StatusOK, &sch)
	paused := sch.Ticks
	var list struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
		} `json:"tasks"`
	}
	fx.get(t, "/v1/tenants/acme/tasks?queue=sq", adm, http.StatusOK, &list)
	if uint64(len(list.Tasks)) != paused {
		t.Fatalf("%d tasks for %d ticks: %+v", len(list.Tasks), paused, list)
	}
	for _, task := range list.Tasks {
		if !strings.HasPrefix(task.TaskID, "every:") {
			t.Fatalf("task id %q is not the schedule's and its tick's", task.TaskID)
		}
	}
	fx.get(t, "/v1/tenants/acme/schedules/every", adm, http.StatusOK, &sch)
	if !sch.Paused || sch.Ticks != paused {
		t.Fatalf("paused schedule: %+v", sch)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/schedules/every/resume", "", adm, http.StatusOK)
	waitFor(t, "a tick after the resume", func() string {
		fx.get(t, "/v1/tenants/acme/schedules/every", adm, http.StatusOK, &sch)
		if sch.Ticks <= paused {
			return fmt.Sprintf("%+v", sch)
		}
		return ""
	})
	var list2 struct {
		Schedules []struct {
			ID string `json:"schedule_id"`
		} `json:"schedules"`
		Next string `json:"next_page_token"`
	}
	fx.get(t, "/v1/tenants/acme/schedules?limit=1", adm, http.StatusOK, &list2)
	if len(list2.Schedules) != 1 || list2.Schedules[0].ID != "daily" || list2.Next == "" {
		t.Fatalf("first page of schedules: %+v", list2)
	}
	fx.get(t, "/v1/tenants/acme/schedules?limit=1&page_token="+list2.Next, adm, http.StatusOK, &list2)
	if len(list2.Schedules) != 1 || list2.Schedules[0].ID != "every" {
		t.Fatalf("second page of schedules: %+v", list2)
	}
	fx.get(t, "/v1/tenants/acme/schedules", bearer(fx.reader), http.StatusOK, &list2)
	if len(list2.Schedules) != 0 {
		t.Fatalf("a principal without task grants lists %+v", list2)
	}
	fx.mustTask(t, "DELETE", "/v1/tenants/acme/schedules/every", "", adm, http.StatusNoContent)
	fx.get(t, "/v1/tenants/acme/schedules/every", bearer(fx.reader), http.StatusForbidden, nil)
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
