package server

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	_ "time/tzdata" // schedules' time zones, also in an image without a zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/replica"
)

// Schedules (docs/api.md "Schedules"): the routes, and the leader's loop
// that fires due ticks. The leader computes tick times from the cron
// expression and time zone (or the interval) and proposes them; the state
// machine stores and compares times only, so replicas agree whatever
// their time zone data, and a tick applies once (fsm/schedules.go).

// cronParser reads 5-field expressions and descriptors (@hourly, ...).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Bounds of schedules.
const (
	minScheduleIntervalMs = 1000
	maxScheduleIntervalMs = 366 * 24 * 60 * 60 * 1000
	// onTimeMs: a tick fired this late is on time (catch_up skip).
	onTimeMs = 60 * 1000
	// maxTickWalk bounds the ticks the leader walks to find the latest
	// missed one after a long downtime.
	maxTickWalk       = 100_000
	dueSchedulesBatch = 64
)

// tickSpec computes a schedule's ticks.
type tickSpec struct {
	cron     cron.Schedule
	loc      *time.Location
	interval int64
}

func scheduleSpec(cronExpr, tz string, intervalMs int64) (*tickSpec, error) {
	if (cronExpr == "") == (intervalMs == 0) {
		return nil, badRequest("give cron or interval_ms, one of them")
	}
	if cronExpr == "" {
		if intervalMs < minScheduleIntervalMs || intervalMs > maxScheduleIntervalMs {
			return nil, badRequest("interval_ms must be between %d and %d, not %d", minScheduleIntervalMs, int64(maxScheduleIntervalMs), intervalMs)
		}
		if tz != "" {
			return nil, badRequest("timezone goes with cron")
		}
		return &tickSpec{interval: intervalMs}, nil
	}
	sched, err := cronParser.Parse(cronExpr)
	if err != nil {
		return nil, badRequest("cron %q is not a valid expression (minute hour day-of-month month day-of-week, or @hourly ...): %v", cronExpr, err)
	}
	loc := time.UTC
	if tz != "" {
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, badRequest("timezone %q is not an IANA time zone: %v", tz, err)
		}
	}
	if next := sched.Next(time.Now().In(loc)); next.IsZero() {
		return nil, badRequest("cron %q never fires", cronExpr)
	}
	return &tickSpec{cron: sched, loc: loc}, nil
}

// next is the first tick after at (Unix ms); 0 if none.
func (t *tickSpec) next(at int64) int64 {
	if t.interval > 0 {
		return at + t.interval
	}
	n := t.cron.Next(time.UnixMilli(at).In(t.loc))
	if n.IsZero() {
		return 0
	}
	return n.UnixMilli()
}

func specOf(s *fsm.Schedule) (*tickSpec, error) {
	return scheduleSpec(s.Cron, s.TimeZone, s.IntervalMs)
}

func (s *Server) handleScheduleCreate(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.mayReach(id, tenant, []string{resTasks}, actWrite); err != nil {
		return err
	}
	var req wire.ScheduleCreate
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validName("schedule_id", req.ScheduleID); err != nil {
		return err
	}
	if len(req.ScheduleID) > fsm.MaxScheduleIDLen {
		return badRequest("schedule_id is %d bytes; at most %d", len(req.ScheduleID), fsm.MaxScheduleIDLen)
	}
	if err := validName("queue", req.Queue); err != nil {
		return err
	}
	switch req.CatchUp {
	case "", fsm.CatchUpLatest, fsm.CatchUpAll, fsm.CatchUpSkip:
	default:
		return badRequest("catch_up %q must be latest, all or skip", req.CatchUp)
	}
	spec, err := scheduleSpec(req.Cron, req.TimeZone, req.IntervalMs)
	if err != nil {
		return err
	}
	payload, err := compactJSON("payload", req.Payload)
	if err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resTasks, req.Queue, actWrite); err != nil {
		return err
	}
	args := &fsm.ScheduleCreateArgs{ID: req.ScheduleID, Queue: req.Queue, Cron: req.Cron, TimeZone: req.TimeZone,
		IntervalMs: req.IntervalMs, CatchUp: req.CatchUp, Priority: req.Priority, Payload: payload, NextAt: spec.next(s.now())}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindScheduleCreate, args, body)
}

// authorizeSchedule finds a schedule and checks action on its queue; a
// caller who may not act on every queue gets 403 for a missing one too.
func (s *Server) authorizeSchedule(id *identity, tenant, schID, action string) (*fsm.Schedule, uint64, error) {
	if err := validName("schedule id", schID); err != nil {
		return nil, 0, err
	}
	if err := s.inTenant(id, tenant); err != nil {
		return nil, 0, err
	}
	sch, index, ok := s.fsm.GetSchedule(tenant, schID)
	if !ok {
		if id.allow(tenant, resTasks, "", action) != nil {
			return nil, 0, errorf(fsm.CodeForbidden, "principal %q may not %s schedule %q", id.principal, action, schID)
		}
		return nil, 0, errorf(fsm.CodeNotFound, "schedule %q not found", schID)
	}
	if id.allow(tenant, resTasks, sch.Queue, action) != nil {
		return nil, 0, errorf(fsm.CodeForbidden, "principal %q may not %s schedule %q", id.principal, action, schID)
	}
	return sch, index, nil
}

func (s *Server) handleScheduleGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	sch, index, err := s.authorizeSchedule(id, r.PathValue("tenant"), r.PathValue("id"), actRead)
	if err != nil {
		return err
	}
	return s.readReply(w, index, sch)
}

func (s *Server) handleScheduleDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, schID := r.PathValue("tenant"), r.PathValue("id")
	if _, _, err := s.authorizeSchedule(id, tenant, schID, actWrite); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindScheduleDelete, &fsm.ScheduleDeleteArgs{ID: schID}, nil)
}

// handleSchedulePause pauses a schedule or resumes it; a resumed one
// ticks next at its first tick after now (the ticks of the pause are
// skipped).
func (s *Server) handleSchedulePause(pause bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, id *identity) error {
		tenant, schID := r.PathValue("tenant"), r.PathValue("id")
		sch, _, err := s.authorizeSchedule(id, tenant, schID, actWrite)
		if err != nil {
			return err
		}
		args := &fsm.SchedulePauseArgs{ID: schID, Paused: pause}
		if !pause {
			spec, err := specOf(sch)
			if err != nil {
				return err
			}
			args.NextAt = spec.next(s.now())
		}
		return s.proposeAndReply(w, r, id, tenant, fsm.KindSchedulePause, args, nil)
	}
}

// tickSchedules fires the schedules whose next tick passed by the
// leader's clock: for each, the ticks its catch-up policy creates tasks
// for, and the tick after them.
func (s *Server) tickSchedules() {
	if !s.cluster.IsLeader() {
		return
	}
	now := s.now()
	for _, sch := range s.fsm.DueSchedules(now, dueSchedulesBatch) {
		spec, err := specOf(sch)
		if err != nil {
			s.log.Warn("schedule with a spec this node cannot read", "tenant", sch.Tenant, "schedule", sch.ID, "err", err)
			continue
		}
		args := scheduleTicks(sch, spec, now)
		if args == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
		cmd := s.replica.Command(replica.Caller{Tenant: sch.Tenant}, fsm.KindScheduleTick, args)
		cmd.Now = now // the time its due ticks were computed at
		_, err = s.replica.Propose(ctx, cmd)
		cancel()
		if err != nil {
			s.log.Debug("schedule tick", "err", err)
			return
		}
	}
}

// scheduleTicks computes the tick command of a due schedule at now.
func scheduleTicks(sch *fsm.Schedule, spec *tickSpec, now int64) *fsm.ScheduleTickArgs {
	a := &fsm.ScheduleTickArgs{ID: sch.ID, Expect: sch.NextAt}
	var missed []int64 // due ticks, the last maxTicks (or all, for catch_up all: the first ones)
	at := sch.NextAt
	walked := 0
	for ; at != 0 && at <= now && walked < maxTickWalk; walked++ {
		if sch.CatchUp == fsm.CatchUpAll && len(missed) == fsm.MaxTicksPerCommand {
			break // the rest in the next commands
		}
		missed = append(missed, at)
		if len(missed) > fsm.MaxTicksPerCommand && sch.CatchUp != fsm.CatchUpAll {
			missed = missed[1:]
		}
		at = spec.next(at)
	}
	if walked == maxTickWalk && at != 0 && at <= now {
		at = spec.next(now) // too far behind to walk: go on from now
	}
	if at == 0 {
		return nil // never fires again
	}
	a.NextAt = at
	switch sch.CatchUp {
	case fsm.CatchUpAll:
		a.Ticks = missed
	case fsm.CatchUpSkip:
		if n := len(missed); n > 0 && now-missed[n-1] <= onTimeMs {
			a.Ticks = missed[n-1:]
		}
	default: // latest
		if n := len(missed); n > 0 {
			a.Ticks = missed[n-1:]
		}
	}
	return a
}

// handleScheduleList lists the tenant's schedules the caller may read (a
// tasks read grant on the schedule's queue), in id order, a page at a time.
func (s *Server) handleScheduleList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	q := r.URL.Query()
	after, err := base64.RawURLEncoding.DecodeString(q.Get("page_token"))
	if err != nil {
		return badRequest("page_token is not one this server returned")
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be 1 to 1000, not %q", v)
		}
		limit = n
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	visible := func(sch *fsm.Schedule) bool { return id.allow(tenant, resTasks, sch.Queue, actRead) == nil }
	list, next, index := s.fsm.ListSchedules(tenant, string(after), limit, visible)
	token := ""
	if next != "" {
		token = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReply(w, index, map[string]any{"schedules": list, "next_page_token": token})
}
