package fsm

import (
	"fmt"
	"slices"
	"strings"
)

// Task command kinds.
const (
	KindTaskCreate     Kind = "task.create"
	KindTaskClaim      Kind = "task.claim"
	KindTaskQueueClaim Kind = "task.queue_claim"
	KindTaskRenew      Kind = "task.renew"
	KindTaskUpdate     Kind = "task.update"
	KindTaskDelete     Kind = "task.delete"
)

// TaskCreateArgs creates a task; the server fills ID when the client gave none.
type TaskCreateArgs struct {
	ID       string
	Queue    string
	Status   string
	Priority int64
	Payload  []byte
	// Lifecycle (lifecycle.go); left out of the encoding when zero, so a
	// create that uses none is the bytes it was before.
	MaxAttempts      uint64 `codec:",omitempty"`
	BackoffInitialMs int64  `codec:",omitempty"`
	BackoffMaxMs     int64  `codec:",omitempty"`
	AvailableAt      int64  `codec:",omitempty"` // Unix ms
	DelayMs          int64  `codec:",omitempty"` // from the command's time; the later wins
	// RetentionMs: once the task is in a terminal status, it is deleted
	// after this long (retention.go); 0 takes the queue's. EntryVersion4.
	RetentionMs int64 `codec:",omitempty"`
	// Dependencies (deps.go); EntryVersion6.
	DependsOn []string `codec:",omitempty"`
	DepPolicy string   `codec:",omitempty"`
	// ConcurrencyKey (flow.go); EntryVersion6.
	ConcurrencyKey string `codec:",omitempty"`
}

// TaskClaimArgs claims one task.
type TaskClaimArgs struct {
	ID            string
	Owner         string
	LeaseMs       int64
	ExpectStatus  *string
	ExpectVersion *uint64
	SetStatus     *string
}

// QueueClaimArgs claims the best claimable task of a queue. Final marks the
// request's last attempt: its "nothing claimable" is remembered for the
// Idempotency-Key, an earlier round's is not.
type QueueClaimArgs struct {
	Queue     string
	Owner     string
	LeaseMs   int64
	Statuses  []string
	SetStatus *string
	Final     bool
	// Max, when not 0, claims up to Max tasks (claimbatch.go), answered
	// as a list; EntryVersion6, left out of the encoding when 0.
	Max int64 `codec:",omitempty"`
}

// TaskRenewArgs extends the lease of the current token holder.
type TaskRenewArgs struct {
	ID           string
	FencingToken uint64
	LeaseMs      int64
}

// TaskUpdateArgs changes a task; see docs/api.md for the guard rules.
type TaskUpdateArgs struct {
	ID            string
	FencingToken  *uint64
	ExpectVersion *uint64
	ExpectStatus  *string
	Status        *string
	ArtifactID    *string
	Result        []byte
	Payload       []byte
	Release       bool
	// With Release: a queue claim does not take the task before the later
	// of AvailableAt and the command's time plus DelayMs (lifecycle.go).
	// Left out of the encoding when zero.
	AvailableAt int64 `codec:",omitempty"`
	DelayMs     int64 `codec:",omitempty"`
	// Unstarted, with Release and the current lease's fencing token,
	// gives back what the claim of that lease took: the attempt, and the
	// status a claim's set_status replaced (ClaimedFrom), for a task
	// claimed and released without having run (unstarted.go).
	// EntryVersion6; left out of the encoding when false.
	Unstarted bool `codec:",omitempty"`
}

// TaskDeleteArgs deletes a task.
type TaskDeleteArgs struct {
	ID            string
	ExpectVersion *uint64
}

func taskNotFound(id string) *Result {
	return fail(CodeNotFound, fmt.Sprintf("task %q not found", id), nil)
}

func applyTaskCreate(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskCreateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if f.st.Has(taskKey(c.Tenant, a.ID)) {
		return fail(CodeAlreadyExists, fmt.Sprintf("task %q already exists", a.ID), nil)
	}
	status := a.Status
	if status == "" {
		status = "pending"
	}
	withQueueDefaults(f.st, c.Tenant, &a)
	t := &Task{Tenant: c.Tenant, ID: a.ID, Queue: a.Queue, Status: status, Priority: a.Priority,
		Payload: a.Payload, Version: 1, CreatedAt: ctx.now, UpdatedAt: ctx.now, Seq: ctx.nextSeq(), ConcurrencyKey: a.ConcurrencyKey}
	if a.RetentionMs < 0 {
		return errRetention(a.RetentionMs)
	}
	if a.entryV3() || a.RetentionMs != 0 {
		t.Life = &TaskLife{MaxAttempts: a.MaxAttempts, BackoffInitialMs: a.BackoffInitialMs, BackoffMaxMs: a.BackoffMaxMs,
			AvailableAt: availableAt(a.AvailableAt, a.DelayMs, ctx.now), RetentionMs: a.RetentionMs}
	}
	if a.depsVersion() != 0 {
		if r := createDeps(f, c, &a, t); r != nil {
			return r
		}
	}
	if a.ConcurrencyKey != "" {
		f.markFlow()
	}
	f.putTask(nil, t)
	return okValue(OutcomeCreated, t)
}

// checkExpect applies expect_version / expect_status guards.
func checkExpect(t *Task, version *uint64, status *string) *Result {
	if version != nil && *version != t.Version {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q is at version %d, not %d", t.ID, t.Version, *version),
			map[string]any{"current_version": t.Version})
	}
	if status != nil && *status != t.Status {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q has status %q, not %q", t.ID, t.Status, *status),
			map[string]any{"current_status": t.Status})
	}
	return nil
}

func leaseHeld(t *Task) *Result {
	return fail(CodeLeaseHeld, fmt.Sprintf("task %q is leased by %q until %s", t.ID, t.Owner, FormatMillis(t.LeaseUntil)),
		map[string]any{"owner": t.Owner, "lease_until": FormatMillis(t.LeaseUntil)})
}

// claim gives t to owner with a new fencing token. With v5 (a claim in an
// EntryVersion5 entry) a claim that sets another status remembers the one
// the task had (ClaimedFrom), so that the task is claimable in it again
// once the lease runs out.
func claim(f *FSM, ctx *applyCtx, t *Task, owner string, leaseMs int64, setStatus *string, v5 bool) *Result {
	old := *t
	t.Owner, t.LeaseUntil = owner, ctx.now+leaseMs
	if t.Life != nil && t.Life.AvailableAt != 0 {
		l := *t.Life
		l.AvailableAt = 0
		t.Life = &l
	}
	t.FencingToken = ctx.nextToken()
	t.Attempt++
	t.Version++
	t.UpdatedAt = ctx.now
	if setStatus != nil {
		if v5 && *setStatus != t.Status && t.ClaimedFrom == "" {
			t.ClaimedFrom = t.Status
		}
		t.Status = *setStatus
		if t.ClaimedFrom == t.Status {
			t.ClaimedFrom = "" // back where it was claimed from
		}
	}
	f.putTask(&old, t)
	return okValue(OutcomeOK, claimAnswer(f.st, t))
}

// A claim that sets a status is written in an EntryVersion5 entry: a
// member from before ClaimedFrom refuses it rather than not remember the
// status it replaces.
func (a *TaskClaimArgs) entryVersion() byte { return claimVersion(a.SetStatus) }
func (a *QueueClaimArgs) entryVersion() byte {
	return max(claimVersion(a.SetStatus), a.maxVersion())
}

func claimVersion(setStatus *string) byte {
	if setStatus != nil {
		return EntryVersion5
	}
	return 0
}

func applyTaskClaim(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskClaimArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	t, ok := getTask(f.st, c.Tenant, a.ID)
	if r := f.taskDenied(c, a.ID, t, ok, taskWrite); r != nil {
		return r
	}
	if !ok {
		return taskNotFound(a.ID)
	}
	if r := checkExpect(t, a.ExpectVersion, a.ExpectStatus); r != nil {
		return r
	}
	if t.leaseLive(ctx.now) && t.Owner != a.Owner {
		return leaseHeld(t)
	}
	if r := claimRefusal(t); r != nil {
		return r
	}
	if r := depsRefusal(t); r != nil {
		return r
	}
	if r := f.flowRefusal(t, ctx.now); r != nil {
		return r
	}
	return claim(f, ctx, t, a.Owner, a.LeaseMs, a.SetStatus, c.ver >= EntryVersion5)
}

func applyQueueClaim(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a QueueClaimArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if a.Max != 0 {
		return queueClaimMax(f, ctx, c, &a)
	}
	return queueClaim(f, ctx, c, &a)
}

// queueClaim applies a queue claim of c's tenant (also the claim part of
// a task.update_claim, claimnext.go).
func queueClaim(f *FSM, ctx *applyCtx, c *Command, a *QueueClaimArgs) *Result {
	var admit func(*Task) bool
	p := queuePolicy(f.st, c.Tenant, a.Queue)
	if p.flowLimited() {
		if rateNext(f.st, c.Tenant, a.Queue, &p, ctx.now) != 0 {
			return okValue(OutcomeNoContent, nil) // over its rate (flow.go)
		}
		admit = f.flowAdmit(c.Tenant, a.Queue, &p)
	}
	t, exhausted, _ := bestClaimable(f.st, c.Tenant, a.Queue, a.Statuses, ctx.now, c.ver >= EntryVersion4, admit)
	for _, x := range exhausted {
		markDead(f, ctx, x)
	}
	if t == nil {
		return okValue(OutcomeNoContent, nil)
	}
	if p.flowLimited() {
		f.takeToken(c.Tenant, a.Queue, &p, ctx.now)
	}
	set := a.SetStatus
	if set == nil && t.ClaimedFrom != "" && !slices.Contains(a.Statuses, t.Status) {
		// Found as a task of the status an expired claim moved it from:
		// taken again in that status.
		from := t.ClaimedFrom
		set = &from
	}
	return claim(f, ctx, t, a.Owner, a.LeaseMs, set, c.ver >= EntryVersion5)
}

// bestClaimable finds the highest-priority, then oldest, task of the queue
// whose status is in statuses, that has no live lease and is due. It reads
// the first ready entry per status, the expired leases and the due delayed
// tasks, not the whole queue. exhausted are the tasks met on the way that
// have used their attempts: a claim makes them dead and takes the best of
// the others. next is the earliest time at which a lease runs out or a
// delayed task becomes due (0: none).
//
// With v4 (a claim in an EntryVersion4 entry, and every read), a task
// released on its last attempt is exhausted as an expired lease on its
// last attempt is, at most maxDeadPerClaim of them are returned, and the
// walk goes on past them (at most maxExhaustedWalk) to the best claimable
// task. Without it, the claim is applied as members before that change
// apply it, so that a log written by an older leader gives the same state
// on every member: released tasks are not looked at, and every expired
// lease on its last attempt is returned.
//
// admit, when not nil, is the filter of flow control (flow.go): a task it
// refuses is walked past (at most maxFlowWalk of them) as if it were not
// there.
func bestClaimable(st *Store, tenant, queue string, statuses []string, now int64, v4 bool, admit func(*Task) bool) (best *Task, exhausted []*Task, next int64) {
	flowWalked := 0
	// better notes a candidate and reports whether the walk goes on.
	better := func(t *Task) bool {
		if admit != nil && !admit(t) {
			flowWalked++
			return flowWalked < maxFlowWalk
		}
		if best == nil || t.Priority > best.Priority || (t.Priority == best.Priority && t.Seq < best.Seq) {
			best = t
		}
		return false
	}
	sooner := func(at int64) {
		if at != 0 && (next == 0 || at < next) {
			next = at
		}
	}
	// spent notes a task that used its attempts and reports whether the
	// walk goes on.
	walked := 0
	spent := func(t *Task) bool {
		if !v4 {
			exhausted = append(exhausted, t)
			return true
		}
		walked++
		if len(exhausted) < maxDeadPerClaim {
			exhausted = append(exhausted, t)
		}
		return walked < maxExhaustedWalk
	}
	// Without an owner a task is ready or delayed: when flow control
	// admits none of those, only run-out leases are looked at.
	unowned := admit == nil || admit(nil)
	for _, status := range statuses {
		if status == StatusDead {
			continue
		}
		base := queuePrefix(tenant, queue, status)
		st.Scan(base+"r/", "", func(k string, _ []byte) bool {
			if !unowned {
				return false
			}
			t, ok := getTask(st, tenant, k[strings.LastIndexByte(k, '/')+1:])
			if !ok {
				return false
			}
			if v4 && t.exhausted() {
				return spent(t) // released on its last attempt: look further
			}
			return better(t) // the first ready one, unless flow control refuses it
		})
		st.Scan(base+"l/", "", func(k string, _ []byte) bool {
			t, ok := getTask(st, tenant, k[strings.LastIndexByte(k, '/')+1:])
			if !ok {
				return false
			}
			if t.LeaseUntil > now {
				sooner(t.LeaseUntil)
				return false // ordered by lease end: the rest are live
			}
			if t.CancelRequested {
				return true // to be cancelled (cancel.go), never claimed again
			}
			if t.exhausted() {
				return spent(t)
			}
			better(t)
			return flowWalked < maxFlowWalk
		})
		sooner(delayedIndexNext(st, tenant, base, now, func(t *Task) bool {
			if !unowned {
				return false
			}
			if v4 && t.exhausted() {
				return spent(t)
			}
			better(t)
			return flowWalked < maxFlowWalk
		}))
		// Tasks a claim moved from this status to another (ClaimedFrom),
		// by lease end: once the lease ran out they are claimable here
		// too. One whose status is asked as well was met above.
		st.Scan(claimedPrefix(tenant, queue, status), "", func(k string, _ []byte) bool {
			t, ok := getTask(st, tenant, k[strings.LastIndexByte(k, '/')+1:])
			if !ok {
				return false
			}
			if t.LeaseUntil > now {
				sooner(t.LeaseUntil)
				return false // ordered by lease end: the rest are live
			}
			if slices.Contains(statuses, t.Status) || t.CancelRequested {
				return true
			}
			if t.exhausted() {
				return spent(t)
			}
			better(t)
			return flowWalked < maxFlowWalk
		})
	}
	return best, exhausted, next
}

// fenced is the answer to a stale fencing token.
func fenced(t *Task, token uint64) *Result {
	return fail(CodeFenced, fmt.Sprintf("fencing token %d is not current for task %q (current %d)", token, t.ID, t.FencingToken),
		map[string]any{"current_token": t.FencingToken})
}

func applyTaskRenew(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskRenewArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	t, ok := getTask(f.st, c.Tenant, a.ID)
	if r := f.taskDenied(c, a.ID, t, ok, taskWrite); r != nil {
		return r
	}
	if !ok {
		return taskNotFound(a.ID)
	}
	if t.FencingToken != a.FencingToken || t.Owner == "" {
		return fenced(t, a.FencingToken)
	}
	if t.cancelDue(ctx.now) {
		return cancelledFenced(t, a.FencingToken)
	}
	old := *t
	t.LeaseUntil = ctx.now + a.LeaseMs
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

func applyTaskUpdate(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskUpdateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	return updateTask(f, ctx, c, &a)
}

// updateTask applies a task update of c's tenant (also the update part of
// a task.update_claim, claimnext.go).
func updateTask(f *FSM, ctx *applyCtx, c *Command, a *TaskUpdateArgs) *Result {
	t, ok := getTask(f.st, c.Tenant, a.ID)
	if r := f.taskDenied(c, a.ID, t, ok, taskWrite); r != nil {
		return r
	}
	if !ok {
		return taskNotFound(a.ID)
	}
	if a.FencingToken != nil && *a.FencingToken != t.FencingToken {
		return fenced(t, *a.FencingToken)
	}
	if a.FencingToken != nil && t.cancelDue(ctx.now) {
		return cancelledFenced(t, *a.FencingToken)
	}
	if a.FencingToken == nil && t.leaseLive(ctx.now) {
		return leaseHeld(t)
	}
	if r := checkExpect(t, a.ExpectVersion, a.ExpectStatus); r != nil {
		return r
	}
	if a.Unstarted {
		if r := unstartedRefusal(t, a, ctx.now); r != nil {
			return r
		}
	}
	old := *t
	applyTaskChanges(t, a)
	if a.Unstarted {
		giveBackClaim(t)
	}
	if a.Release && a.entryV3() {
		l := TaskLife{}
		if t.Life != nil {
			l = *t.Life
		}
		l.AvailableAt = availableAt(a.AvailableAt, a.DelayMs, ctx.now)
		t.Life = &l
	}
	releaseCancelled(ctx, &old, t, false)
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

func applyTaskChanges(t *Task, a *TaskUpdateArgs) {
	if a.Status != nil {
		t.Status = *a.Status
	}
	if a.ArtifactID != nil {
		t.ArtifactID = *a.ArtifactID
	}
	if a.Result != nil {
		t.Result = a.Result
	}
	if a.Payload != nil {
		t.Payload = a.Payload
	}
	if a.Release {
		t.Owner, t.LeaseUntil = "", 0
	}
}

func applyTaskDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a TaskDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	t, ok := getTask(f.st, c.Tenant, a.ID)
	if r := f.taskDenied(c, a.ID, t, ok, taskDelete); r != nil {
		return r
	}
	if !ok {
		return taskNotFound(a.ID)
	}
	if r := checkExpect(t, a.ExpectVersion, nil); r != nil {
		return r
	}
	f.deleteTask(t)
	return okValue(OutcomeNoContent, nil)
}

func (a *TaskCreateArgs) jsonFields() [][]byte { return [][]byte{a.Payload} }
func (a *TaskUpdateArgs) jsonFields() [][]byte { return [][]byte{a.Result, a.Payload} }
