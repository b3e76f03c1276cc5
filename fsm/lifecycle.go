package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Task lifecycle: attempts, backoff, dead letters and delayed tasks
// (docs/api.md "Attempts, backoff and delays").
//
// A task's attempt counter (Task.Attempt) counts claims. A task with
// max_attempts has used its attempts once Attempt reaches it: a failed
// attempt (task.fail) then makes it dead, and so does a lease that ran out
// on its last attempt, at the next claim of its queue (a lease that ran out
// earlier only lets the next claim take the task, as before: the claim
// counts it). A failed attempt that is not the last makes the task
// claimable again after a backoff: exponential from the initial delay,
// capped at the maximum, with "equal" jitter (a delay d is drawn from
// [d/2, d]) from a random number the leader drew into the command. Nothing
// here reads a clock or draws a random number: times are the commands'.

// Lifecycle command kinds. Entries holding them are EntryVersion3.
const (
	KindTaskFail  Kind = "task.fail"
	KindTaskRetry Kind = "task.retry"
)

// StatusDead is the terminal status of a task that used its attempts or
// failed without retry. A queue claim never takes it; task.retry revives it.
const StatusDead = "dead"

// Backoff defaults for a task that sets none.
const (
	DefaultBackoffInitialMs int64 = 1000
	DefaultBackoffMaxMs     int64 = 5 * 60 * 1000
)

// TaskLife is the lifecycle part of a task record. It is nil on a task
// that never used any of it, so that such a record is the bytes it was
// before lifecycles existed (omitempty: the reflection codec leaves a nil
// pointer out; appendTask writes only records without it).
type TaskLife struct {
	MaxAttempts      uint64 // 0: unlimited
	BackoffInitialMs int64  // 0: DefaultBackoffInitialMs
	BackoffMaxMs     int64  // 0: DefaultBackoffMaxMs
	// AvailableAt: a queue claim does not take the task before this time
	// (Unix ms; 0: now). A claim clears it.
	AvailableAt int64
	LastError   string
	FailedAt    int64  // time of the last failed attempt; 0: none
	Failures    uint64 // failed attempts (fail, or a lease out on the last attempt) since creation or retry
	// Retention (retention.go), left out of the encoding when zero so that
	// a record without it is the bytes it was before: the task's own
	// period (0: its queue's), and when the task is deleted (0: never; set
	// only while its status is terminal).
	RetentionMs int64 `codec:",omitempty"`
	ExpiresAt   int64 `codec:",omitempty"`
}

// TaskFailArgs ends the current attempt of the token holder as failed.
type TaskFailArgs struct {
	ID           string
	FencingToken uint64
	Error        string
	NonRetryable bool
	// Status the task goes back to when it will be retried; "" is "pending".
	Status string
	// Rand is the leader's random draw for the backoff's jitter.
	Rand uint64
}

// TaskRetryArgs puts a task (dead, or any without a live lease) back to
// a claimable status with its attempts reset.
type TaskRetryArgs struct {
	ID            string
	ExpectVersion *uint64
	Status        string // "" is "pending"
	AvailableAt   int64  // Unix ms; 0: now
	DelayMs       int64  // from the command's time; the later of the two wins
}

// entryV3 reports whether a create or update uses lifecycle fields, which
// only EntryVersion3 entries may carry (see entryVersion).
func (a *TaskCreateArgs) entryV3() bool {
	return a.MaxAttempts != 0 || a.BackoffInitialMs != 0 || a.BackoffMaxMs != 0 || a.AvailableAt != 0 || a.DelayMs != 0
}
func (a *TaskUpdateArgs) entryV3() bool { return a.AvailableAt != 0 || a.DelayMs != 0 }

func (a *TaskCreateArgs) entryVersion() byte {
	if v := max(a.depsVersion(), a.keyVersion()); v != 0 {
		return v
	}
	if v := retentionEntryVersion(a.RetentionMs); v != 0 {
		return v
	}
	if a.entryV3() {
		return EntryVersion3
	}
	return 0
}

func (a *TaskUpdateArgs) entryVersion() byte {
	if a.Unstarted {
		return EntryVersion6 // unstarted.go
	}
	if a.entryV3() {
		return EntryVersion3
	}
	return 0
}

// availableAt resolves an absolute time and a delay from now: the later.
func availableAt(at, delayMs, now int64) int64 {
	if delayMs > 0 && now+delayMs > at {
		return now + delayMs
	}
	return at
}

// life returns t's lifecycle part, making it if needed.
func (t *Task) life() *TaskLife {
	if t.Life == nil {
		t.Life = &TaskLife{}
	}
	return t.Life
}

// availableAt is when a queue claim may take t (0: any time).
func (t *Task) availableAt() int64 {
	if t.Life == nil {
		return 0
	}
	return t.Life.AvailableAt
}

// exhausted reports whether t has used all its attempts.
func (t *Task) exhausted() bool {
	return t.Life != nil && t.Life.MaxAttempts > 0 && t.Attempt >= t.Life.MaxAttempts
}

// backoffMs is the delay after failed attempt n (1-based), drawn from
// [d/2, d] with rnd, where d = initial * 2^(n-1), capped at max.
func backoffMs(l *TaskLife, n uint64, rnd uint64) int64 {
	initial, maxMs := l.BackoffInitialMs, l.BackoffMaxMs
	if initial <= 0 {
		initial = DefaultBackoffInitialMs
	}
	if maxMs <= 0 {
		maxMs = max(DefaultBackoffMaxMs, initial)
	}
	d := min(initial, maxMs)
	for i := uint64(1); i < n && d < maxMs; i++ {
		d *= 2
	}
	d = min(d, maxMs)
	half := d / 2
	return half + int64(rnd%uint64(d-half+1))
}

func applyTaskFail(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskFailArgs
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
	if old.Life != nil {
		l := *old.Life
		t.Life = &l
	}
	l := t.life()
	l.LastError, l.FailedAt = a.Error, ctx.now
	l.Failures++
	t.Owner, t.LeaseUntil = "", 0
	if a.NonRetryable || t.exhausted() {
		t.Status, l.AvailableAt = StatusDead, 0
	} else {
		t.Status = a.Status
		if t.Status == "" {
			t.Status = "pending"
		}
		l.AvailableAt = ctx.now + backoffMs(l, max(t.Attempt, 1), a.Rand)
	}
	releaseCancelled(ctx, &old, t, false)
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

func applyTaskRetry(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskRetryArgs
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
	if t.leaseLive(ctx.now) {
		return leaseHeld(t)
	}
	if r := checkExpect(t, a.ExpectVersion, nil); r != nil {
		return r
	}
	old := *t
	if old.Life != nil {
		l := *old.Life
		t.Life = &l
	}
	l := t.life()
	t.Status = a.Status
	if t.Status == "" {
		t.Status = "pending"
	}
	t.Owner, t.LeaseUntil = "", 0
	t.Attempt, l.Failures = 0, 0
	l.AvailableAt = availableAt(a.AvailableAt, a.DelayMs, ctx.now)
	releaseCancelled(ctx, &old, t, true)
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

// maxDeadPerClaim bounds how many tasks that used their attempts one queue
// claim (in an EntryVersion4 entry) moves to dead; the claims after it
// move the rest. maxExhaustedWalk bounds how many such tasks it walks past
// looking for a claimable one.
const (
	maxDeadPerClaim  = 64
	maxExhaustedWalk = 1024
)

// stampQueueClaim sets the entry version of a queue claim the leader is
// about to propose (the command table's Stamp, FSM.Stamp): EntryVersion4,
// whose claims make a task released on its last attempt dead
// (bestClaimable), once the state holds any task with a lifecycle part.
// Before that no task can have used its attempts, so the claim stays the
// version 1 command it always was, which older members apply the same way.
// (A claim proposed before the first lifecycle task was applied cannot
// meet that task released on its last attempt: the release is proposed
// after a claim of it was answered, so later, and proposals go into the
// log in order.)
func stampQueueClaim(f *FSM, c *Command) {
	f.mu.RLock()
	inUse := f.st.Has(lifecycleMarkerKey)
	f.mu.RUnlock()
	if inUse {
		c.ver = max(c.ver, EntryVersion4)
	}
}

// markDead moves t, which used its attempts without failing the last (its
// lease ran out, or it was released), to dead.
func markDead(f *FSM, ctx *applyCtx, t *Task) {
	old := *t
	l := *t.Life
	t.Life = &l
	how := "lease expired"
	if t.Owner == "" {
		how = "released"
	}
	l.LastError = fmt.Sprintf("%s on attempt %d of %d", how, t.Attempt, l.MaxAttempts)
	l.FailedAt = ctx.now
	l.Failures++
	l.AvailableAt = 0
	t.Status, t.Owner, t.LeaseUntil = StatusDead, "", 0
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
}

// claimRefusal refuses a claim by id of a dead task or one whose lease ran
// out on its last attempt.
func claimRefusal(t *Task) *Result {
	if t.CancelRequested {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q has a cancellation requested", t.ID),
			map[string]any{"current_status": t.Status, "cancel_requested": true})
	}
	if t.Status == StatusDead {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q is dead; retry it first", t.ID),
			map[string]any{"current_status": t.Status})
	}
	if t.exhausted() {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q has used its %d attempts; retry it first", t.ID, t.Life.MaxAttempts),
			map[string]any{"current_status": t.Status})
	}
	return nil
}

// delayedIndexNext reads the d/ (delayed) index entries of one queue
// status in time order: due ones go to due until it returns false, and it
// returns the time of the first that is not due yet (0 if none).
func delayedIndexNext(st *Store, tenant, base string, now int64, due func(*Task) bool) (next int64) {
	st.Scan(base+"d/", "", func(k string, _ []byte) bool {
		t, ok := getTask(st, tenant, k[strings.LastIndexByte(k, '/')+1:])
		if !ok {
			return true
		}
		if at := t.availableAt(); at > now {
			next = at
			return false
		}
		return due(t)
	})
	return next
}

// lifecycleMarkerKey is present once any task record has a lifecycle part:
// snapshots of such a state are snapshotFormat2, which an older member
// refuses (it would drop the part silently).
const lifecycleMarkerKey = "cfg/lifecycle"

// Queue policies: defaults an admin sets for the tasks later created in a
// queue (a create's own fields win). Kept at
//
//	t/<tenant>/qp/<queue>    QueuePolicy, JSON
//
// and only in EntryVersion3 entries, so a create that takes a default is
// always preceded, in the log, by an entry an older member refused.
const KindQueuePolicy Kind = "queue.policy"

// QueuePolicy is a queue's lifecycle defaults; zero fields give none.
type QueuePolicy struct {
	MaxAttempts      uint64 `json:"max_attempts"`
	BackoffInitialMs int64  `json:"backoff_initial_ms"`
	BackoffMaxMs     int64  `json:"backoff_max_ms"`
	// RetentionMs: how long a task of the queue stays once it is in a
	// terminal status (retention.go), read when it enters one. Left out of
	// both encodings when 0, so that a policy without it (stored, in the
	// log, or in a remembered answer) is the bytes it was before.
	RetentionMs int64 `json:"retention_ms,omitempty" codec:",omitempty"`
	// Flow control (flow.go), version 6; left out of both encodings when
	// 0 likewise: the tasks leased at once, the claims a second and their
	// burst, and the tasks leased at once per concurrency key.
	MaxLeased       int64 `json:"max_leased,omitempty" codec:",omitempty"`
	ClaimsPerSecond int64 `json:"claims_per_second,omitempty" codec:",omitempty"`
	ClaimBurst      int64 `json:"claim_burst,omitempty" codec:",omitempty"`
	KeyLimit        int64 `json:"concurrency_key_limit,omitempty" codec:",omitempty"`
}

// QueuePolicyArgs sets (all zero: clears) a queue's policy.
type QueuePolicyArgs struct {
	Queue  string
	Policy QueuePolicy
}

func queuePolicyKey(tenant, queue string) string { return "t/" + tenant + "/qp/" + queue }

func applyQueuePolicy(f *FSM, _ *applyCtx, c *Command) *Result {
	var a QueuePolicyArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if !f.st.Has(tenantKey(c.Tenant)) {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if a.Policy.RetentionMs < 0 {
		return errRetention(a.Policy.RetentionMs)
	}
	if a.Policy.RetentionMs > 0 {
		f.markRetention()
	}
	if p := a.Policy; p.MaxLeased < 0 || p.ClaimsPerSecond < 0 || p.ClaimBurst < 0 || p.KeyLimit < 0 {
		return fail(CodeInvalidArgument, "flow-control limits must not be negative", nil)
	}
	if a.Policy.flowLimited() {
		f.markFlow()
	}
	if a.Policy.ClaimsPerSecond == 0 {
		f.st.Delete(flowBucketKey(c.Tenant, a.Queue))
	}
	if a.Policy == (QueuePolicy{}) {
		f.st.Delete(queuePolicyKey(c.Tenant, a.Queue))
	} else {
		f.st.Put(queuePolicyKey(c.Tenant, a.Queue), mustJSON(&a.Policy))
	}
	return okValue(OutcomeOK, &a.Policy)
}

// queuePolicy returns the queue's policy (zero if none).
func queuePolicy(st *Store, tenant, queue string) QueuePolicy {
	var p QueuePolicy
	if raw, ok := st.Get(queuePolicyKey(tenant, queue)); ok {
		_ = json.Unmarshal(raw, &p) // written by applyQueuePolicy only
	}
	return p
}

// QueuePolicy returns a queue's lifecycle defaults and the applied index.
func (f *FSM) QueuePolicy(tenant, queue string) (QueuePolicy, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return queuePolicy(f.st, tenant, queue), f.applied
}

// withQueueDefaults fills a create's unset lifecycle fields from its
// queue's policy.
func withQueueDefaults(st *Store, tenant string, a *TaskCreateArgs) {
	p := queuePolicy(st, tenant, a.Queue)
	if a.MaxAttempts == 0 {
		a.MaxAttempts = p.MaxAttempts
	}
	if a.BackoffInitialMs == 0 {
		a.BackoffInitialMs = p.BackoffInitialMs
	}
	if a.BackoffMaxMs == 0 {
		a.BackoffMaxMs = p.BackoffMaxMs
	}
}
