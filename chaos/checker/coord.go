package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/chaos/history"
)

// Checkers of the coordination primitives (docs/api.md "Dependencies",
// "Cancellation", "Schedules", "Flow control"). Like the others, each is a
// pure function of the history, and an operation of unknown outcome never
// makes one fail by itself: it may have been applied at any point after
// its invocation, or not at all.
const (
	NameDependencies = "dependencies"
	NameCancellation = "cancellation"
	NameSchedules    = "schedules"
	NameFlowControl  = "flow-control"
)

const (
	statusDone      = "done"
	statusCancelled = "cancelled"
)

func terminal(status string) bool {
	return status == statusDone || status == statusDead || status == statusCancelled
}

// CoordCounts is what the coordination checkers could judge in a history,
// so that a run shows the rules were exercised and not only passed.
type CoordCounts struct {
	DepClaims    int // acknowledged claims of tasks with dependencies
	BadCreates   int // creates refused as bad input, found absent at the end
	Cancelled    int // tasks seen cancelled (their token retired)
	StaleFenced  int // writes under a cancelled lease's token, refused
	Ticks        int // schedule tasks judged
	TickGaps     int // gaps between ticks a pause and resume explained
	LeasedClaims int // acknowledged claims of queues with a leased limit
	MaxHeld      int // the most tasks seen held at once in such a queue
	StatsJudged  int // statistics reads of queues with max_leased
	// Waitpoints seen completed and timed out at the read-back; claims of
	// parked tasks judged.
	WaitCompleted, WaitTimedOut, ParkedClaims int
	// NothingClaimed: queue claims of those queues that took nothing, and
	// claims by id refused rate_limited.
	NothingClaimed int
	RateClaims     int // acknowledged claims of queues with a rate
}

// Add adds o to c (MaxHeld: the larger).
func (c *CoordCounts) Add(o CoordCounts) {
	c.DepClaims += o.DepClaims
	c.BadCreates += o.BadCreates
	c.Cancelled += o.Cancelled
	c.StaleFenced += o.StaleFenced
	c.Ticks += o.Ticks
	c.TickGaps += o.TickGaps
	c.LeasedClaims += o.LeasedClaims
	c.MaxHeld = max(c.MaxHeld, o.MaxHeld)
	c.NothingClaimed += o.NothingClaimed
	c.StatsJudged += o.StatsJudged
	c.WaitCompleted += o.WaitCompleted
	c.WaitTimedOut += o.WaitTimedOut
	c.ParkedClaims += o.ParkedClaims
	c.RateClaims += o.RateClaims
}

// CoordinationCounts counts what the coordination checkers judge in h.
func CoordinationCounts(h *history.History) CoordCounts {
	var n CoordCounts
	dependencies(h, &n)
	cancellation(h, &n)
	schedules(h, &n)
	flowControl(h, &n)
	waitpoints(h, &n)
	return n
}

// claimedTask is the task an acknowledged claim took ("" for none).
func claimedTask(op *history.Op) string {
	if op.Outcome != history.OK {
		return ""
	}
	switch op.Kind {
	case history.TaskClaim:
		return op.In.Key
	case history.TaskQueueClaim:
		return op.Out.TaskID
	}
	return ""
}

// taskAnswer is answeredTask, a cancellation's answer included.
func taskAnswer(op *history.Op) (string, bool) {
	if op.Kind == history.TaskCancel && op.Outcome == history.OK && op.Out.Version != 0 {
		return op.In.Key, true
	}
	return answeredTask(op)
}

// wallInvoke is the client's wall clock (Unix ms) when op was invoked.
func wallInvoke(op *history.Op) int64 {
	return op.WallMS - (op.Return-op.Invoke)/int64(time.Millisecond)
}

// Dependencies checks docs/api.md "Dependencies" from the client's side:
//
//  1. No claim of a dependent succeeds before each of its dependencies
//     may have been done: a write that sets done (the only way a task
//     becomes done), acknowledged or of unknown outcome, was invoked
//     before the claim returned. Under the policy ignore a dependency
//     that may have ended otherwise counts too: a write that may have
//     made it terminal (an update to a terminal status, a failed attempt,
//     a cancellation), or, for a dependent with a policy other than
//     ignore, one of its own dependencies that may have (it then follows
//     its policy), or a max_attempts (a lease that runs out may make it
//     dead with no operation).
//  2. A dependent with the policy fail or cancel is never claimed once a
//     dependency's first terminal status was not done: an answer showed it
//     dead or cancelled at version v, and every write that sets done on it
//     failed or was answered with a version after v.
//  3. The claim's own answer agrees: dependencies_left 0, every listed
//     dependency resolved.
//  4. Bad input writes nothing: a create refused (a dependency that does
//     not exist, the task itself) leaves no task: the read-back after
//     healing does not find it.
func Dependencies(h *history.History) []Anomaly { return dependencies(h, nil) }

func dependencies(h *history.History, n *CoordCounts) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	type spec struct {
		deps   []string
		policy string
	}
	specs := map[string]spec{}
	exhaustible := map[string]bool{}
	doneBy, termBy := map[string]int64{}, map[string]int64{}
	note := func(m map[string]int64, task string, at int64) {
		if cur, ok := m[task]; !ok || at < cur {
			m[task] = at
		}
	}
	doneWrites := map[string][]*history.Op{}
	firstBad := map[string]taskVersion{} // the earliest version seen dead or cancelled
	var claims, refused []*history.Op
	finalRead := map[string]*history.Op{}
	created := map[string]bool{} // a create that may have been applied
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskCreate {
			if op.Outcome == history.Fail {
				if op.Code != "already_exists" {
					refused = append(refused, op)
				}
				continue
			}
			created[op.In.Key] = true
			if len(op.In.DependsOn) > 0 {
				specs[op.In.Key] = spec{op.In.DependsOn, op.In.DepPolicy}
			}
			if op.In.MaxAttempts > 0 {
				exhaustible[op.In.Key] = true
			}
		}
		if op.Final && op.Kind == history.TaskGet && op.Outcome != history.Unknown {
			finalRead[op.In.Key] = op
		}
		if task, ok := taskAnswer(op); ok && (op.Out.Status == statusDead || op.Out.Status == statusCancelled) {
			if prev, seen := firstBad[task]; !seen || op.Out.Version < prev.Version {
				firstBad[task] = taskVersion{op: op, Output: op.Out}
			}
		}
		if op.Outcome == history.Fail {
			continue
		}
		switch op.Kind {
		case history.TaskUpdate:
			if op.In.Status == statusDone {
				note(doneBy, op.In.Key, op.Invoke)
				doneWrites[op.In.Key] = append(doneWrites[op.In.Key], op)
			}
			if terminal(op.In.Status) {
				note(termBy, op.In.Key, op.Invoke)
			}
		case history.TaskFail, history.TaskCancel:
			note(termBy, op.In.Key, op.Invoke)
		case history.TaskClaim, history.TaskQueueClaim:
			if t := claimedTask(op); t != "" {
				claims = append(claims, op)
			}
		}
	}
	// mayEnd is the earliest time a task may have become terminal by any
	// path (-1: at any time; absent: never).
	memo := map[string]int64{}
	var mayEnd func(task string, depth int) (int64, bool)
	mayEnd = func(task string, depth int) (int64, bool) {
		if at, ok := memo[task]; ok {
			return at, at != int64(^uint64(0)>>1)
		}
		best, ok := termBy[task]
		if !ok {
			best = int64(^uint64(0) >> 1)
		}
		if exhaustible[task] || depth > 64 {
			best = -1
		}
		if s, dep := specs[task]; dep && s.policy != "ignore" {
			for _, d := range s.deps {
				if at, ok := mayEnd(d, depth+1); ok && at < best {
					best = at
				}
			}
		}
		memo[task] = best
		return best, best != int64(^uint64(0)>>1)
	}
	// provablyBad: the dependency's first terminal status was not done.
	provablyBad := func(dep string) (taskVersion, bool) {
		v, ok := firstBad[dep]
		if !ok {
			return v, false
		}
		for _, w := range doneWrites[dep] {
			if w.Outcome != history.OK || w.Out.Version == 0 || w.Out.Version <= v.Version {
				return v, false
			}
		}
		return v, true
	}
	var out []Anomaly
	bad := func(task, msg string, ids ...int) {
		out = append(out, Anomaly{Checker: NameDependencies, Key: "task:" + task, Message: msg, Ops: ids})
	}
	for _, c := range claims {
		task := claimedTask(c)
		s, ok := specs[task]
		if !ok {
			continue
		}
		if n != nil {
			n.DepClaims++
		}
		for _, d := range s.deps {
			at, may := doneBy[d]
			if s.policy == "ignore" {
				if end, ok := mayEnd(d, 0); ok && (!may || end < at) {
					at, may = end, true
				}
			}
			if !may || at >= c.Return {
				bad(task, fmt.Sprintf("%s took it before its dependency %s may have been done (policy %q): no write that could end it was invoked before the claim returned",
					c.String(), d, s.policy), c.ID)
				continue
			}
			if s.policy == "ignore" {
				continue
			}
			if v, ok := provablyBad(d); ok {
				bad(task, fmt.Sprintf("%s took it although its dependency %s first ended %s (%s), not done (policy %q)",
					c.String(), d, v.Status, v.op.String(), s.policy), v.op.ID, c.ID)
			}
		}
		if c.Out.DepsLeft != nil && *c.Out.DepsLeft > 0 {
			bad(task, fmt.Sprintf("%s answered dependencies_left %d", c.String(), *c.Out.DepsLeft), c.ID)
		}
		for _, d := range c.Out.Deps {
			if !d.Resolved {
				bad(task, fmt.Sprintf("%s answered dependency %s unresolved", c.String(), d.TaskID), c.ID)
			}
		}
	}
	for _, r := range refused {
		if created[r.In.Key] {
			continue // another create of the id may have made it
		}
		f, ok := finalRead[r.In.Key]
		if !ok {
			continue
		}
		if f.Outcome == history.OK {
			bad(r.In.Key, fmt.Sprintf("%s was refused (%s), yet the read-back found the task", r.String(), r.Code), r.ID, f.ID)
		} else if n != nil && f.Code == "not_found" {
			n.BadCreates++
		}
	}
	return out
}

// Cancellation checks docs/api.md "Cancellation" from the client's side,
// per task:
//
//  1. Once an answer showed the task cancelled, its token retired (a new
//     token, larger than every one issued before it), no write under an
//     older token invoked after that answer returned is acknowledged:
//     task writes under the token and fences of other resources alike.
//  2. Once an answer showed a cancellation requested under token T, no
//     write under T is acknowledged if it was invoked after T's lease ran
//     out: the lease end is the latest lease_until any answer showed for
//     T (the check is skipped for T when a renew under T has an unknown
//     outcome: it may have moved the end anywhere). The leader judges the
//     end by its clock, which may be behind real time by the largest
//     clock skew injected by then (the nodes and the suite read one
//     clock; see Lifecycle rule 4): that is the slack.
func Cancellation(h *history.History) []Anomaly { return cancellation(h, nil) }

func cancellation(h *history.History, n *CoordCounts) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	type seen struct {
		op    *history.Op
		token uint64
	}
	cancelled := map[string][]seen{}
	requested := map[string]map[uint64][]*history.Op{}
	leaseEnd := map[string]map[uint64]int64{}
	renewUnknown := map[string]map[uint64]bool{}
	writes := map[string][]fencedWrite{}
	var refusals []*history.Op
	for i := range ops {
		op := &ops[i]
		if w, ok := acceptedFenced(op); ok {
			writes[w.task] = append(writes[w.task], w)
		}
		if fenced := op.Outcome == history.Fail && op.Code == "fenced"; fenced {
			refusals = append(refusals, op)
		}
		if op.Kind == history.TaskRenew && op.Outcome == history.Unknown && op.In.Token != nil {
			if renewUnknown[op.In.Key] == nil {
				renewUnknown[op.In.Key] = map[uint64]bool{}
			}
			renewUnknown[op.In.Key][*op.In.Token] = true
		}
		task, ok := taskAnswer(op)
		if !ok {
			continue
		}
		if op.Out.Status == statusCancelled && op.Out.Owner == "" && op.Out.Token != 0 {
			cancelled[task] = append(cancelled[task], seen{op, op.Out.Token})
		}
		if op.Out.Owner != "" && op.Out.Token != 0 {
			if leaseEnd[task] == nil {
				leaseEnd[task] = map[uint64]int64{}
			}
			leaseEnd[task][op.Out.Token] = max(leaseEnd[task][op.Out.Token], op.Out.LeaseUntil)
			if op.Out.CancelRequested {
				if requested[task] == nil {
					requested[task] = map[uint64][]*history.Op{}
				}
				requested[task][op.Out.Token] = append(requested[task][op.Out.Token], op)
			}
		}
	}
	if n != nil {
		for _, s := range cancelled {
			n.Cancelled += len(s)
		}
		for _, r := range refusals {
			task := r.In.Key
			tok := r.In.Token
			if r.In.FenceTask != "" {
				task, tok = r.In.FenceTask, &r.In.FenceToken
			}
			for _, c := range cancelled[task] {
				if tok != nil && *tok < c.token && c.op.Return < r.Invoke {
					n.StaleFenced++
					break
				}
			}
		}
	}
	slack := skewSlack(h.Faults)
	var out []Anomaly
	tasks := make([]string, 0, len(writes))
	for t := range writes {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, task := range tasks {
		for _, w := range writes[task] {
			for _, c := range cancelled[task] {
				if c.token > w.token && c.op.Return < w.op.Invoke {
					out = append(out, Anomaly{Checker: NameCancellation, Key: "task:" + task,
						Message: fmt.Sprintf("%s accepted under token %d, invoked after %s showed the task cancelled with its token retired (%d)",
							w.op.String(), w.token, c.op.String(), c.token),
						Ops: []int{c.op.ID, w.op.ID}})
					break
				}
			}
			reqs := requested[task][w.token]
			if len(reqs) == 0 || renewUnknown[task][w.token] || w.op.WallMS == 0 {
				continue
			}
			end := leaseEnd[task][w.token]
			for _, r := range reqs {
				if r.Return >= w.op.Invoke {
					continue
				}
				if at, s := wallInvoke(w.op), slack(w.op.Return); at > end+s+1 {
					out = append(out, Anomaly{Checker: NameCancellation, Key: "task:" + task,
						Message: fmt.Sprintf("%s accepted under token %d at the client's time %d, %d ms after its lease ran out (lease_until %d, clock slack %d ms) with a cancellation requested (%s)",
							w.op.String(), w.token, at, at-end, end, s, r.String()),
						Ops: []int{r.ID, w.op.ID}})
				}
				break
			}
		}
	}
	return out
}

// Schedules checks docs/api.md "Schedules" from the read-back of each
// schedule and of its queue (every task of the queue is the schedule's),
// and the pauses and resumes the history shows. What is checkable:
//
//  1. Every task of the queue is a tick's: "<schedule id>:<tick ms>",
//     created at or after its tick (the state machine's clock: a tick is
//     applied only once due), and ticks are made in order: no task of a
//     later tick was created before one of an earlier tick.
//  2. Exactly one task per tick: the schedule's ticks counter equals the
//     number of tasks whose tick is at or before its last_tick_at (read
//     before the queue, so ticks made in between are after it), and the
//     task of last_tick_at exists. A tick fired twice counts twice and
//     creates one task (its id exists), or, on another grid, an extra one.
//  3. No tick missing between the first and the last (catch_up all; the
//     period is interval_ms or a cron "@every <duration>"): consecutive
//     ticks are one period apart unless a resume lies between them,
//     whose answer's next_at is then the later tick (a resume ticks next
//     one period after its time: a new grid), or, when that next_at was
//     at or before the last tick made (the resuming leader's clock was
//     behind), the first tick of its grid after the last one. With catch_up latest the
//     leader may skip the ticks it missed while there was none (a kill, a
//     partition): the gap is then a whole number of periods from the
//     earlier tick or from a resume's next_at. The first tick is the
//     create's next_at (all) or on its grid (latest), or a resume's.
//     When a resume's outcome is unknown (its next_at unknown), rule 3 is
//     not judged for that schedule.
//  4. No tick while paused: between an acknowledged pause and the
//     acknowledged resume after it (the same agent's, in turn), no task of
//     the schedule was created (created_at strictly between their
//     updated_at: one clock that never goes back). Not judged for a
//     schedule with a pause or resume of unknown outcome.
func Schedules(h *history.History) []Anomaly { return schedules(h, nil) }

func schedules(h *history.History, n *CoordCounts) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	type sched struct {
		create        *history.Op
		turns         []*history.Op // pauses and resumes
		final, listed *history.Op
		unknown       bool
	}
	all := map[string]*sched{}
	get := func(id string) *sched {
		if all[id] == nil {
			all[id] = &sched{}
		}
		return all[id]
	}
	queues := map[string]string{}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case history.ScheduleCreate:
			if op.Outcome == history.OK {
				get(op.In.Key).create = op
				queues[op.In.Queue] = op.In.Key
			}
		case history.SchedulePause, history.ScheduleResume:
			s := get(op.In.Key)
			s.turns = append(s.turns, op)
			if op.Outcome == history.Unknown {
				s.unknown = true
			}
		case history.ScheduleGet:
			if op.Final && op.Outcome == history.OK {
				get(op.In.Key).final = op
			}
		}
	}
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskList && op.Final && op.Outcome == history.OK {
			if id, ok := queues[op.In.Queue]; ok {
				all[id].listed = op
			}
		}
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []Anomaly
	for _, id := range ids {
		s := all[id]
		if s.create == nil || s.final == nil || s.listed == nil || s.listed.Invoke < s.final.Return {
			continue
		}
		out = append(out, checkSchedule(id, s.create, s.turns, s.final, s.listed, s.unknown, n)...)
	}
	return out
}

// tickPeriod is a schedule's tick period in ms, 0 when its ticks are not
// evenly spaced (a cron expression other than "@every").
func tickPeriod(create *history.Op) int64 {
	if create.In.IntervalMS > 0 {
		return create.In.IntervalMS
	}
	if d, ok := strings.CutPrefix(create.In.Cron, "@every "); ok {
		if p, err := time.ParseDuration(d); err == nil && p >= time.Second && p%time.Second == 0 {
			return p.Milliseconds()
		}
	}
	return 0
}

func checkSchedule(id string, create *history.Op, turns []*history.Op, final, listed *history.Op, unknown bool, n *CoordCounts) []Anomaly {
	var out []Anomaly
	bad := func(msg string, ids ...int) {
		out = append(out, Anomaly{Checker: NameSchedules, Key: "schedule:" + id, Message: msg, Ops: ids})
	}
	type tick struct {
		at, created int64
	}
	var ticks []tick
	for _, t := range listed.Out.Listed {
		rest, ok := strings.CutPrefix(t.TaskID, id+":")
		at, err := strconv.ParseInt(rest, 10, 64)
		if !ok || err != nil {
			bad(fmt.Sprintf("task %s in the schedule's queue is not one of its ticks", t.TaskID), listed.ID)
			continue
		}
		if t.CreatedAtMS < at {
			bad(fmt.Sprintf("task %s was created at %d, before its tick", t.TaskID, t.CreatedAtMS), listed.ID)
		}
		ticks = append(ticks, tick{at, t.CreatedAtMS})
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].at < ticks[j].at })
	// Rule 2, against the schedule as read before the queue.
	var upto []tick
	for _, t := range ticks {
		if t.at <= final.Out.LastTickMS {
			upto = append(upto, t)
		}
	}
	if uint64(len(upto)) != final.Out.Ticks {
		bad(fmt.Sprintf("the schedule counts %d ticks up to its last_tick_at %d, its queue holds %d tasks of those ticks: a tick created no task or two",
			final.Out.Ticks, final.Out.LastTickMS, len(upto)), final.ID, listed.ID)
	}
	if final.Out.LastTickMS != 0 && (len(upto) == 0 || upto[len(upto)-1].at != final.Out.LastTickMS) {
		bad(fmt.Sprintf("no task of the last tick %d", final.Out.LastTickMS), final.ID, listed.ID)
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i].created < ticks[i-1].created {
			bad(fmt.Sprintf("tick %d was made at %d, before tick %d at %d: ticks went back", ticks[i].at, ticks[i].created,
				ticks[i-1].at, ticks[i-1].created), listed.ID)
		}
	}
	if n != nil {
		n.Ticks += len(ticks)
	}
	// Rule 4.
	if !unknown {
		for i, p := range turns {
			if p.Kind != history.SchedulePause || p.Outcome != history.OK || !p.Out.Paused || i+1 == len(turns) {
				continue
			}
			r := turns[i+1]
			if r.Kind != history.ScheduleResume || r.Outcome != history.OK || r.Out.Paused {
				continue
			}
			for _, t := range ticks {
				if t.created > p.Out.UpdatedAtMS && t.created < r.Out.UpdatedAtMS {
					bad(fmt.Sprintf("the task of tick %d was created at %d, while the schedule was paused (%s at %d, %s at %d)",
						t.at, t.created, p.String(), p.Out.UpdatedAtMS, r.String(), r.Out.UpdatedAtMS), p.ID, r.ID, listed.ID)
				}
			}
		}
	}
	// Rule 3.
	per := tickPeriod(create)
	if per == 0 || unknown || len(ticks) == 0 {
		return out
	}
	all := create.In.CatchUp == "all"
	resumes := map[int64]bool{}
	var resumeAt []int64
	for _, r := range turns {
		if r.Kind == history.ScheduleResume && r.Outcome == history.OK && !r.Out.Paused {
			resumes[r.Out.NextAtMS] = true
			resumeAt = append(resumeAt, r.Out.NextAtMS)
		}
	}
	// onGrid: at is origin plus a whole number of periods (none for all).
	onGrid := func(origin, at int64) bool {
		if all {
			return at == origin
		}
		return at >= origin && (at-origin)%per == 0
	}
	first := ticks[0].at
	ok := onGrid(create.Out.NextAtMS, first)
	for _, o := range resumeAt {
		ok = ok || onGrid(o, first)
	}
	if !ok {
		bad(fmt.Sprintf("the first tick %d is neither the create's next_at %d nor a resume's (catch_up %q, period %d ms)",
			first, create.Out.NextAtMS, create.In.CatchUp, per), create.ID, listed.ID)
	}
	for i := 1; i < len(ticks); i++ {
		prev, cur := ticks[i-1].at, ticks[i].at
		if onGrid(prev+per, cur) {
			continue
		}
		explained := false
		for _, o := range resumeAt {
			// The first tick of a resume's grid after the last tick made
			// (the resume's next_at may be before it: ticks only move
			// forward); with latest, any later one.
			if cur >= o && (cur-o)%per == 0 && (!all || cur == o || cur-per <= prev) {
				explained = true
			}
		}
		if explained {
			if n != nil {
				n.TickGaps++
			}
			continue
		}
		bad(fmt.Sprintf("tick %d follows tick %d: %d ms, with period %d ms and catch_up %q, and no resume between that explains it",
			cur, prev, cur-prev, per, create.In.CatchUp), listed.ID)
	}
	return out
}

// FlowControl checks docs/api.md "Flow control" against the limits the
// history's queue policies set (set before the traffic; a policy applies
// to the claims after it):
//
//  1. max_leased and concurrency_key_limit: at no time were more of the
//     queue's tasks (of one key) held at once. A task counts as held,
//     certainly, from the return of an acknowledged claim of it (the
//     claim was applied by then) until the invocation of the first
//     operation on it that may have taken its owner away and that did
//     not end before the claim was invoked: a release, a failed attempt,
//     a cancellation, a retry, acknowledged or of unknown outcome (a
//     refused one changed nothing). A lease that runs out keeps the slot
//     (docs/api.md), so the count does not depend on any clock; a task
//     with max_attempts (a run-out lease on its last attempt makes it
//     dead with no operation) or a retention is not counted. Claims of
//     unknown outcome are not counted either: the count is a lower bound
//     of what the state machine held, so a count above the limit is a
//     violation.
//  2. The queue's statistics (docs/api.md "Queues": running, and
//     lease_expired, the tasks with an owner whose lease ran out, both as
//     of one index) never count more leased tasks than max_leased.
//  3. claims_per_second with claim_burst: over any stretch of the state
//     machine's clock (the claims' updated_at, their command times, which
//     fill the bucket), the acknowledged claims are at most the burst
//     plus the rate times its length.
func FlowControl(h *history.History) []Anomaly { return flowControl(h, nil) }

type flowLimits struct {
	maxLeased, keyLimit, rate, burst int64
	at                               int64 // the policy's return
}

type interval struct {
	start, end int64
	task       string
	claim      *history.Op
}

func flowControl(h *history.History, n *CoordCounts) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	limits := map[string]flowLimits{}
	queueOf, keyOf := map[string]string{}, map[string]string{}
	uncountable := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Kind == history.QueuePolicySet && op.Outcome == history.OK:
			limits[op.In.Queue] = flowLimits{op.In.MaxLeased, op.In.KeyLimit, op.In.ClaimsPerSecond, max(op.In.ClaimBurst, 1), op.Return}
		case op.Kind == history.TaskCreate && op.Outcome != history.Fail:
			queueOf[op.In.Key], keyOf[op.In.Key] = op.In.Queue, op.In.ConcurrencyKey
			if op.In.MaxAttempts > 0 || op.In.RetentionMS > 0 {
				uncountable[op.In.Key] = true
			}
		}
	}
	var out []Anomaly
	for i := range ops {
		op := &ops[i]
		l, ok := limits[op.In.Queue]
		if op.Kind != history.QueueStats || op.Outcome != history.OK || !ok || l.maxLeased <= 0 || op.Invoke < l.at {
			continue
		}
		if n != nil {
			n.StatsJudged++
		}
		if op.Out.Running+op.Out.LeaseExpired > l.maxLeased {
			out = append(out, Anomaly{Checker: NameFlowControl, Key: "queue:" + op.In.Queue,
				Message: fmt.Sprintf("%s counted %d running and %d with a lease run out, over its max_leased %d",
					op.String(), op.Out.Running, op.Out.LeaseExpired, l.maxLeased), Ops: []int{op.ID}})
		}
	}
	claims := map[string][]*history.Op{}   // per task
	clearers := map[string][]*history.Op{} // per task
	var rated = map[string][]*history.Op{} // per queue
	for i := range ops {
		op := &ops[i]
		if t := claimedTask(op); t != "" {
			l, ok := limits[queueOf[t]]
			if !ok || op.Invoke < l.at {
				continue
			}
			claims[t] = append(claims[t], op)
			if l.rate > 0 {
				rated[queueOf[t]] = append(rated[queueOf[t]], op)
			}
			continue
		}
		if n != nil && isClaim(op) {
			q := op.In.Queue
			if op.Kind == history.TaskClaim {
				q = queueOf[op.In.Key]
			}
			l := limits[q]
			limited := l.maxLeased > 0 || l.keyLimit > 0 || l.rate > 0
			if limited && (op.Code == "rate_limited" || op.Outcome == history.OK && op.Kind == history.TaskQueueClaim) {
				n.NothingClaimed++
			}
		}
		if op.Outcome == history.Fail {
			continue
		}
		switch op.Kind {
		case history.TaskFail, history.TaskCancel, history.TaskRetry:
			clearers[op.In.Key] = append(clearers[op.In.Key], op)
		case history.TaskUpdate:
			if op.In.Release {
				clearers[op.In.Key] = append(clearers[op.In.Key], op)
			}
		}
	}
	queues := make([]string, 0, len(limits))
	for q := range limits {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	for _, q := range queues {
		l := limits[q]
		if l.maxLeased > 0 || l.keyLimit > 0 {
			var held []interval
			for task, cs := range claims {
				if queueOf[task] != q || uncountable[task] {
					continue
				}
				if n != nil {
					n.LeasedClaims += len(cs)
				}
				held = append(held, heldIntervals(task, cs, clearers[task])...)
			}
			if l.maxLeased > 0 {
				out = append(out, overLimit(q, "", held, l.maxLeased, n)...)
			}
			if l.keyLimit > 0 {
				byKey := map[string][]interval{}
				for _, iv := range held {
					if k := keyOf[iv.task]; k != "" {
						byKey[k] = append(byKey[k], iv)
					}
				}
				keys := make([]string, 0, len(byKey))
				for k := range byKey {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					out = append(out, overLimit(q, k, byKey[k], l.keyLimit, nil)...)
				}
			}
		}
		if l.rate > 0 {
			if n != nil {
				n.RateClaims += len(rated[q])
			}
			out = append(out, overRate(q, rated[q], l)...)
		}
	}
	return out
}

// heldIntervals are the stretches during which task was certainly held:
// from each acknowledged claim's return to the invocation of the first
// operation that may have taken its owner away after the claim's
// invocation; merged where they overlap (a claim of a task whose lease
// ran out keeps its slot).
func heldIntervals(task string, claims, clearers []*history.Op) []interval {
	var ivs []interval
	for _, c := range claims {
		end := int64(^uint64(0) >> 1)
		for _, o := range clearers {
			if o.Return > c.Invoke && o.Invoke < end {
				end = o.Invoke
			}
		}
		if end > c.Return {
			ivs = append(ivs, interval{c.Return, end, task, c})
		}
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
	var merged []interval
	for _, iv := range ivs {
		if k := len(merged) - 1; k >= 0 && iv.start <= merged[k].end {
			merged[k].end = max(merged[k].end, iv.end)
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// overLimit reports the first moment more than limit intervals overlap.
func overLimit(queue, key string, ivs []interval, limit int64, n *CoordCounts) []Anomaly {
	type event struct {
		at   int64
		d    int
		iv   *interval
		open bool
	}
	var evs []event
	for i := range ivs {
		evs = append(evs, event{ivs[i].start, 1, &ivs[i], true}, event{ivs[i].end, -1, &ivs[i], false})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].d < evs[j].d // an end before a start at the same time
	})
	open := map[*interval]bool{}
	for _, e := range evs {
		if !e.open {
			delete(open, e.iv)
			continue
		}
		open[e.iv] = true
		if n != nil {
			n.MaxHeld = max(n.MaxHeld, len(open))
		}
		if int64(len(open)) <= limit {
			continue
		}
		var ids []int
		var names []string
		for iv := range open {
			ids = append(ids, iv.claim.ID)
			names = append(names, iv.task)
		}
		sort.Ints(ids)
		sort.Strings(names)
		what, lim := "max_leased", "queue "+queue
		if key != "" {
			what, lim = "concurrency_key_limit", fmt.Sprintf("key %q of queue %s", key, queue)
		}
		return []Anomaly{{Checker: NameFlowControl, Key: "queue:" + queue,
			Message: fmt.Sprintf("%d tasks of %s held at once at %s (%s), over its %s %d: each claim was acknowledged and nothing that could end it was invoked yet",
				len(open), lim, fmtDur(e.at), strings.Join(names, ", "), what, limit),
			Ops: ids}}
	}
	return nil
}

func fmtDur(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// overRate reports a stretch of the state machine's clock with more
// acknowledged claims than the bucket allows.
func overRate(queue string, claims []*history.Op, l flowLimits) []Anomaly {
	cs := append([]*history.Op(nil), claims...)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Out.UpdatedAtMS < cs[j].Out.UpdatedAtMS })
	for j := range cs {
		for i := 0; i < j; i++ {
			span := cs[j].Out.UpdatedAtMS - cs[i].Out.UpdatedAtMS
			if int64(j-i+1)*1000 > l.burst*1000+span*l.rate {
				return []Anomaly{{Checker: NameFlowControl, Key: "queue:" + queue,
					Message: fmt.Sprintf("%d claims within %d ms of the state machine's clock (%s .. %s), over claims_per_second %d with claim_burst %d",
						j-i+1, span, cs[i].String(), cs[j].String(), l.rate, l.burst),
					Ops: []int{cs[i].ID, cs[j].ID}}}
			}
		}
	}
	return nil
}

// NameWaitpoints is the checker of waitpoints.
const NameWaitpoints = "waitpoints"

// Waitpoints checks docs/api.md "Waitpoints", per waitpoint:
//
//  1. Once: every acknowledged completion carries one payload (a second
//     with another payload is refused), and no answer shows the waitpoint
//     completed with a payload no completion sent, or with another than
//     the acknowledged one, or timed out once a completion was
//     acknowledged.
//  2. A claim's answer that carries the outcome of the waitpoint its task
//     was parked on shows it resolved: completed with the payload of a
//     completion invoked before the claim returned, or timed out at a
//     command time at or after its timeout_at (the claim's updated_at: the
//     state machine's clock, on which timeout_at was stamped too).
//  3. A parked task is not claimed before its waitpoint resolved: the
//     first acknowledged claim of it invoked after an acknowledged park
//     carries the waitpoint's outcome (not judged when a claim of its
//     queue of unknown outcome may lie between).
func Waitpoints(h *history.History) []Anomaly { return waitpoints(h, nil) }

func waitpoints(h *history.History, n *CoordCounts) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	timeoutAt := map[string]int64{}
	okPayload := map[string]*history.Op{}
	sent := map[string]map[string]*history.Op{} // payloads of completions that may have applied
	queueOf := map[string]string{}
	var out []Anomaly
	bad := func(wp, msg string, ids ...int) {
		out = append(out, Anomaly{Checker: NameWaitpoints, Key: "waitpoint:" + wp, Message: msg, Ops: ids})
	}
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Kind == history.WaitpointCreate && op.Outcome == history.OK:
			timeoutAt[op.In.Key] = op.Out.TimeoutAtMS
		case op.Kind == history.TaskCreate && op.Outcome != history.Fail:
			queueOf[op.In.Key] = op.In.Queue
		case op.Kind == history.WaitpointComplete && op.Outcome != history.Fail:
			if sent[op.In.Key] == nil {
				sent[op.In.Key] = map[string]*history.Op{}
			}
			sent[op.In.Key][op.In.Value] = op
			if op.Outcome != history.OK {
				break
			}
			if first, ok := okPayload[op.In.Key]; ok && first.In.Value != op.In.Value {
				bad(op.In.Key, fmt.Sprintf("completed with two payloads: %s and %s", first.String(), op.String()), first.ID, op.ID)
			} else if !ok {
				okPayload[op.In.Key] = op
			}
		}
	}
	// Rule 1 on every answer that shows a waitpoint's state.
	for i := range ops {
		op := &ops[i]
		wp, state, payload := "", "", ""
		switch {
		case op.Outcome != history.OK:
			continue
		case op.Kind == history.WaitpointGet || op.Kind == history.WaitpointComplete || op.Kind == history.WaitpointCreate:
			wp, state, payload = op.In.Key, op.Out.WaitState, op.Out.WaitPayload
		case op.Out.Waitpoint != "":
			wp, state, payload = op.Out.Waitpoint, op.Out.WaitState, op.Out.WaitPayload
		default:
			continue
		}
		if n != nil && op.Final {
			switch state {
			case "completed":
				n.WaitCompleted++
			case "timed_out":
				n.WaitTimedOut++
			}
		}
		first, acked := okPayload[wp]
		switch {
		case state == "completed" && sent[wp][payload] == nil:
			bad(wp, fmt.Sprintf("%s shows it completed with %q, which no completion sent", op.String(), payload), op.ID)
		case state == "completed" && acked && payload != first.In.Value:
			bad(wp, fmt.Sprintf("%s shows it completed with %q, but %s was acknowledged", op.String(), payload, first.String()), first.ID, op.ID)
		case state == "timed_out" && acked:
			bad(wp, fmt.Sprintf("%s shows it timed out, but %s was acknowledged", op.String(), first.String()), first.ID, op.ID)
		}
	}
	// Rules 2 and 3.
	var parks []*history.Op
	for i := range ops {
		if op := &ops[i]; op.Kind == history.TaskPark && op.Outcome == history.OK {
			parks = append(parks, op)
		}
	}
	for _, p := range parks {
		task, wp := p.In.Key, p.In.Waitpoint
		var next *history.Op
		judged := true
		for i := range ops {
			op := &ops[i]
			if op.Invoke < p.Return || !isClaim(op) {
				continue
			}
			mine := claimedTask(op) == task || op.Kind == history.TaskClaim && op.In.Key == task
			if op.Outcome == history.Unknown && (mine || op.Kind == history.TaskQueueClaim && op.In.Queue == queueOf[task]) {
				judged = false
				break
			}
			if claimedTask(op) == task {
				next = op
				break
			}
		}
		if !judged || next == nil {
			continue
		}
		if n != nil {
			n.ParkedClaims++
		}
		if next.Out.Waitpoint != wp {
			bad(wp, fmt.Sprintf("%s took task %s, parked on it by %s, without its outcome: claimed while parked", next.String(), task, p.String()),
				p.ID, next.ID)
			continue
		}
		switch next.Out.WaitState {
		case "completed":
			if c := sent[wp][next.Out.WaitPayload]; c == nil || c.Invoke >= next.Return {
				bad(wp, fmt.Sprintf("%s took task %s with the waitpoint completed (%q) before any such completion was invoked", next.String(), task,
					next.Out.WaitPayload), next.ID)
			}
		case "timed_out":
			if at, ok := timeoutAt[wp]; ok && next.Out.UpdatedAtMS < at {
				bad(wp, fmt.Sprintf("%s took task %s at the state machine's time %d with the waitpoint timed out, %d ms before its timeout_at",
					next.String(), task, next.Out.UpdatedAtMS, at-next.Out.UpdatedAtMS), next.ID)
			}
		default:
			bad(wp, fmt.Sprintf("%s took task %s with the waitpoint %q: claimed before it resolved", next.String(), task, next.Out.WaitState), p.ID, next.ID)
		}
	}
	return out
}
