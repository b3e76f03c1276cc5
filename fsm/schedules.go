package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Schedules (docs/api.md "Schedules"): recurring task creation. A
// schedule keeps its next tick time (NextAt); the leader, once its clock
// passed it, computes the ticks due (cron expression in a time zone, or a
// fixed interval, and the catch-up policy) and the tick after them, and
// proposes schedule.tick with them and the NextAt it fires. The state
// machine applies a tick only if NextAt is still that one, so a tick
// proposed twice (a leader change, a retry, a restart) creates its tasks
// once; each task's id is the schedule's and the tick's time
// (<schedule id>:<unix ms>), so no two ticks share one. Nothing here
// parses a cron expression or reads a clock: the times travel in the
// commands.
//
// Keys:
//
//	t/<tenant>/sch/<id>                   the schedule
//	sx/<next at, 16 hex>/<tenant>/<id>    an active schedule's next tick
const (
	KindScheduleCreate Kind = "schedule.create"
	KindScheduleDelete Kind = "schedule.delete"
	KindSchedulePause  Kind = "schedule.pause"
	KindScheduleTick   Kind = "schedule.tick"
)

// Catch-up policies: which ticks missed while no leader ticked (downtime,
// a pause ends without them) create tasks.
const (
	CatchUpLatest = "latest" // only the most recent missed tick (the default)
	CatchUpAll    = "all"    // every missed tick, MaxTicksPerCommand a command
	CatchUpSkip   = "skip"   // none: only ticks that are on time
)

// MaxTicksPerCommand bounds the ticks (tasks) one schedule.tick creates.
const MaxTicksPerCommand = 100

// Schedule is a schedule record. Times are Unix ms.
type Schedule struct {
	Tenant     string
	ID         string
	Queue      string
	Cron       string // 5-field cron expression, or "" with IntervalMs
	TimeZone   string // IANA name of Cron's zone; "" is UTC
	IntervalMs int64
	CatchUp    string
	Priority   int64
	Payload    []byte // JSON of the tasks it creates
	Paused     bool
	NextAt     int64 // the next tick; kept while paused
	LastTick   int64 // the last tick that created a task; 0: none
	Ticks      uint64
	Version    uint64
	CreatedAt  int64
	UpdatedAt  int64
}

type scheduleJSON struct {
	Tenant     string          `json:"tenant_id"`
	ID         string          `json:"schedule_id"`
	Queue      string          `json:"queue"`
	Cron       string          `json:"cron,omitempty"`
	TimeZone   string          `json:"timezone,omitempty"`
	IntervalMs int64           `json:"interval_ms,omitempty"`
	CatchUp    string          `json:"catch_up"`
	Priority   int64           `json:"priority"`
	Payload    json.RawMessage `json:"payload"`
	Paused     bool            `json:"paused"`
	NextAt     string          `json:"next_at"`
	LastTick   *string         `json:"last_tick_at"`
	Ticks      uint64          `json:"ticks"`
	Version    uint64          `json:"version"`
	CreatedAt  string          `json:"created_at"`
	UpdatedAt  string          `json:"updated_at"`
}

// MarshalJSON renders the wire form.
func (s *Schedule) MarshalJSON() ([]byte, error) {
	j := scheduleJSON{Tenant: s.Tenant, ID: s.ID, Queue: s.Queue, Cron: s.Cron, TimeZone: s.TimeZone, IntervalMs: s.IntervalMs,
		CatchUp: s.CatchUp, Priority: s.Priority, Payload: s.Payload, Paused: s.Paused, NextAt: FormatMillis(s.NextAt),
		Ticks: s.Ticks, Version: s.Version, CreatedAt: FormatMillis(s.CreatedAt), UpdatedAt: FormatMillis(s.UpdatedAt)}
	if s.LastTick != 0 {
		t := FormatMillis(s.LastTick)
		j.LastTick = &t
	}
	if len(j.Payload) == 0 {
		j.Payload = json.RawMessage("{}")
	}
	return json.Marshal(&j)
}

// ScheduleCreateArgs creates a schedule whose first tick is NextAt (the
// leader computed it from the expression or interval).
type ScheduleCreateArgs struct {
	ID         string
	Queue      string
	Cron       string
	TimeZone   string
	IntervalMs int64
	CatchUp    string
	Priority   int64
	Payload    []byte
	NextAt     int64
}

// ScheduleDeleteArgs deletes a schedule (its tasks stay).
type ScheduleDeleteArgs struct{ ID string }

// SchedulePauseArgs pauses a schedule, or resumes it (Paused false) with
// its next tick at NextAt (the leader's computation).
type SchedulePauseArgs struct {
	ID     string
	Paused bool
	NextAt int64
}

// ScheduleTickArgs fires schedule ID's tick Expect: it creates a task for
// each of Ticks (ascending, none after the command's time) and moves the
// schedule's next tick to NextAt.
type ScheduleTickArgs struct {
	ID     string
	Expect int64
	Ticks  []int64
	NextAt int64
}

const schedulePrefix = "sx/"

func scheduleKey(tenant, id string) string { return "t/" + tenant + "/sch/" + id }
func scheduleDueKey(at int64, tenant, id string) string {
	return schedulePrefix + hex16(at) + "/" + tenant + "/" + id
}

// ScheduleTaskID is the id of the task schedule id creates at tick.
func ScheduleTaskID(id string, tick int64) string { return id + ":" + strconv.FormatInt(tick, 10) }

// MaxScheduleIDLen keeps ScheduleTaskID within a task id's 128 bytes.
const MaxScheduleIDLen = 100

func getSchedule(st *Store, tenant, id string) (*Schedule, bool) {
	raw, ok := st.Get(scheduleKey(tenant, id))
	if !ok {
		return nil, false
	}
	var s Schedule
	if decode(raw, &s) != nil {
		return nil, false
	}
	return &s, true
}

// putSchedule stores s and moves its due-index entry from old's.
func (f *FSM) putSchedule(old, s *Schedule) {
	was, is := "", ""
	if old != nil && !old.Paused {
		was = scheduleDueKey(old.NextAt, old.Tenant, old.ID)
	}
	if s != nil && !s.Paused {
		is = scheduleDueKey(s.NextAt, s.Tenant, s.ID)
	}
	if was != is {
		if was != "" {
			f.st.Delete(was)
		}
		if is != "" {
			f.st.Put(is, nil)
		}
	}
	if s == nil {
		f.st.Delete(scheduleKey(old.Tenant, old.ID))
		return
	}
	f.st.Put(scheduleKey(s.Tenant, s.ID), encode(s))
}

func scheduleNotFound(id string) *Result {
	return fail(CodeNotFound, fmt.Sprintf("schedule %q not found", id), nil)
}

func applyScheduleCreate(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ScheduleCreateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if !f.st.Has(tenantKey(c.Tenant)) {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if (a.Cron == "") == (a.IntervalMs <= 0) || a.NextAt <= 0 || len(a.ID) > MaxScheduleIDLen {
		return fail(CodeInvalidArgument, "a schedule needs a cron expression or a positive interval, not both, and its first tick", nil)
	}
	if a.CatchUp == "" {
		a.CatchUp = CatchUpLatest
	}
	if f.st.Has(scheduleKey(c.Tenant, a.ID)) {
		return fail(CodeAlreadyExists, fmt.Sprintf("schedule %q already exists", a.ID), nil)
	}
	s := &Schedule{Tenant: c.Tenant, ID: a.ID, Queue: a.Queue, Cron: a.Cron, TimeZone: a.TimeZone, IntervalMs: a.IntervalMs,
		CatchUp: a.CatchUp, Priority: a.Priority, Payload: a.Payload, NextAt: a.NextAt, Version: 1, CreatedAt: ctx.now, UpdatedAt: ctx.now}
	f.putSchedule(nil, s)
	return okValue(OutcomeCreated, s)
}

func applyScheduleDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a ScheduleDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	s, ok := getSchedule(f.st, c.Tenant, a.ID)
	if !ok {
		return scheduleNotFound(a.ID)
	}
	f.putSchedule(s, nil)
	return okValue(OutcomeNoContent, nil)
}

func applySchedulePause(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a SchedulePauseArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	s, ok := getSchedule(f.st, c.Tenant, a.ID)
	if !ok {
		return scheduleNotFound(a.ID)
	}
	if s.Paused == a.Paused {
		return okValue(OutcomeOK, s) // already so
	}
	old := *s
	s.Paused = a.Paused
	if !a.Paused {
		if a.NextAt <= 0 {
			return fail(CodeInvalidArgument, "a resumed schedule needs its next tick", nil)
		}
		s.NextAt = a.NextAt
	}
	s.Version++
	s.UpdatedAt = ctx.now
	f.putSchedule(&old, s)
	return okValue(OutcomeOK, s)
}

func applyScheduleTick(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ScheduleTickArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	s, ok := getSchedule(f.st, c.Tenant, a.ID)
	if !ok {
		return scheduleNotFound(a.ID)
	}
	if s.Paused || s.NextAt != a.Expect {
		// Fired already (or paused, or resumed elsewhere): exactly once.
		return fail(CodeVersionMismatch, fmt.Sprintf("schedule %q is not at tick %s", a.ID, FormatMillis(a.Expect)),
			map[string]any{"next_at": FormatMillis(s.NextAt)})
	}
	if len(a.Ticks) > MaxTicksPerCommand || a.NextAt <= a.Expect {
		return fail(CodeInvalidArgument, "a tick needs at most 100 ticks and a later next tick", nil)
	}
	prev := a.Expect - 1
	var made []int64
	for _, tick := range a.Ticks {
		if tick <= prev || tick < a.Expect || tick > ctx.now || tick >= a.NextAt {
			return fail(CodeInvalidArgument, fmt.Sprintf("tick %d is out of order or not due", tick), nil)
		}
		prev = tick
		if tick <= s.LastTick {
			// Made already, or passed: a resume's next tick came from a
			// leader whose clock was behind the one that stamped the
			// last tick. Ticks only move forward.
			continue
		}
		f.scheduledTask(ctx, s, tick)
		made = append(made, tick)
	}
	old := *s
	s.NextAt = a.NextAt
	if n := len(made); n > 0 {
		s.LastTick = made[n-1]
		s.Ticks += uint64(n)
	}
	s.Version++
	s.UpdatedAt = ctx.now
	f.putSchedule(&old, s)
	return okValue(OutcomeOK, s)
}

// scheduledTask creates the task of s's tick, unless a task of that id
// exists (a caller made one).
func (f *FSM) scheduledTask(ctx *applyCtx, s *Schedule, tick int64) {
	id := ScheduleTaskID(s.ID, tick)
	if f.st.Has(taskKey(s.Tenant, id)) {
		return
	}
	a := TaskCreateArgs{ID: id, Queue: s.Queue}
	withQueueDefaults(f.st, s.Tenant, &a)
	t := &Task{Tenant: s.Tenant, ID: id, Queue: s.Queue, Status: StatusPending, Priority: s.Priority, Payload: s.Payload,
		Version: 1, CreatedAt: ctx.now, UpdatedAt: ctx.now, Seq: ctx.nextSeq()}
	if a.entryV3() || a.MaxAttempts != 0 || a.BackoffInitialMs != 0 || a.BackoffMaxMs != 0 {
		t.Life = &TaskLife{MaxAttempts: a.MaxAttempts, BackoffInitialMs: a.BackoffInitialMs, BackoffMaxMs: a.BackoffMaxMs}
	}
	f.putTask(nil, t)
}

// DueSchedules returns up to limit active schedules whose next tick is at
// or before now, earliest first.
func (f *FSM) DueSchedules(now int64, limit int) []*Schedule {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Schedule
	f.st.Scan(schedulePrefix, "", func(k string, _ []byte) bool {
		rest := k[len(schedulePrefix):]
		if len(out) >= limit || len(rest) < 17 || parseHex16(rest[:16]) > now {
			return false
		}
		tenant, id, _ := strings.Cut(rest[17:], "/")
		if s, ok := getSchedule(f.st, tenant, id); ok {
			out = append(out, s)
		}
		return true
	})
	return out
}

// GetSchedule returns a schedule and the applied index.
func (f *FSM) GetSchedule(tenant, id string) (*Schedule, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := getSchedule(f.st, tenant, id)
	return s, f.applied, ok
}

func (a *ScheduleCreateArgs) jsonFields() [][]byte { return [][]byte{a.Payload} }

// ListSchedules returns, in id order after after (""; from the first),
// at most limit of the tenant's schedules that visible allows; next is
// the id to continue after when more may follow (the last returned, or
// the last examined when the page ends at MaxListWalk schedules).
func (f *FSM) ListSchedules(tenant, after string, limit int, visible func(*Schedule) bool) (out []*Schedule, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out = []*Schedule{}
	prefix := "t/" + tenant + "/sch/"
	from := ""
	if after != "" {
		from = prefix + after + "\x00"
	}
	walked := 0
	f.st.Scan(prefix, from, func(k string, v []byte) bool {
		if walked == MaxListWalk {
			next = after
			return false
		}
		walked++
		after = k[len(prefix):]
		var s Schedule
		if decode(v, &s) != nil || visible != nil && !visible(&s) {
			return true
		}
		if len(out) == limit {
			next = out[len(out)-1].ID
			return false
		}
		out = append(out, &s)
		return true
	})
	return out, next, f.applied
}
