package fsm

import (
	"fmt"
)

// Retention: a task in a terminal status is deleted once its retention
// period has passed (docs/api.md "Retention").
//
// The terminal statuses are a fixed set, not a per-queue setting: the
// expiry is decided when a task enters the set, so a set that could change
// would leave tasks already in a status that joined it without an expiry,
// and tasks in one that left it with one; and every status change would
// read the queue's set. done, dead and cancelled are the names the API
// already gives (dead) or suggests for ends.
//
// The period is the task's own (retention_ms on create), else its queue's
// (QueuePolicy.RetentionMs) as it is when the task enters the set; neither
// set, and the task stays until someone deletes it. The expiry is the
// command's time plus the period, stored in the task's lifecycle part
// (TaskLife.ExpiresAt) and in an index ordered by expiry; a task that
// leaves the set (task.retry, an update to another status) loses it. The
// leader proposes task.purge when the earliest expiry has passed by its
// clock; no replica's clock decides.

// KindTaskPurge deletes up to Max tasks whose retention ran out by the
// command's time. Only in EntryVersion4 entries.
const KindTaskPurge Kind = "task.purge"

// MaxTaskPurge bounds the tasks one task.purge deletes, whatever its
// args say: each is a record, two index keys and a watch event.
const MaxTaskPurge = 1000

// TaskPurgeArgs bounds one purge.
type TaskPurgeArgs struct{ Max int }

// Terminal statuses (see above).
const (
	StatusDone      = "done"
	StatusCancelled = "cancelled"
)

// TerminalStatus reports whether status is one a retention period counts
// from: done, dead or cancelled.
func TerminalStatus(status string) bool {
	return status == StatusDone || status == StatusDead || status == StatusCancelled
}

// Retention keys:
//
//	tx/<expiry ms, 16 hex>/<tenant>/<task id>   a retained task's expiry
//	cfg/retention                               present once the state held a retention period (markRetention)
const (
	taskExpiryPrefix   = "tx/"
	retentionMarkerKey = "cfg/retention"
)

func taskExpiryKey(exp int64, tenant, id string) string {
	return taskExpiryPrefix + hex16(exp) + "/" + tenant + "/" + id
}

// expiresAt is when t is deleted (0: never).
func (t *Task) expiresAt() int64 {
	if t == nil || t.Life == nil {
		return 0
	}
	return t.Life.ExpiresAt
}

// retain sets or clears t's expiry as t enters or leaves a terminal
// status (old is t before the command; nil for a new task). now is the
// command's time. Called by putTask, so every path that changes a status
// (update, fail, a claim's set_status, markDead, retry) goes through it.
func (f *FSM) retain(old, t *Task, now int64) {
	entering := TerminalStatus(t.Status) && (old == nil || !TerminalStatus(old.Status))
	switch {
	case entering:
		ms := int64(0)
		if t.Life != nil {
			ms = t.Life.RetentionMs
		}
		if ms == 0 {
			ms = queuePolicy(f.st, t.Tenant, t.Queue).RetentionMs
		}
		if ms > 0 {
			t.ownLife().ExpiresAt = now + ms
		}
	case !TerminalStatus(t.Status) && t.expiresAt() != 0:
		t.ownLife().ExpiresAt = 0
	}
}

// ownLife returns t's lifecycle part after giving t a copy of its own, so
// that a change does not reach the record before the command (handlers
// copy a task with old := *t, which shares the part).
func (t *Task) ownLife() *TaskLife {
	l := TaskLife{}
	if t.Life != nil {
		l = *t.Life
	}
	t.Life = &l
	return t.Life
}

// moveExpiry keeps the expiry index in step with a put or delete of a task
// (t nil: deleted).
func (f *FSM) moveExpiry(old, t *Task) {
	if t != nil && t.Life != nil && t.Life.RetentionMs != 0 {
		f.markRetention() // a period of its own, with or without an expiry yet
	}
	was, is := old.expiresAt(), t.expiresAt() // old and t are the same task
	if was == is {
		return
	}
	if was != 0 {
		f.st.Delete(taskExpiryKey(was, old.Tenant, old.ID))
	}
	if is != 0 {
		f.markRetention()
		f.st.Put(taskExpiryKey(is, t.Tenant, t.ID), nil)
	}
}

// markRetention puts retentionMarkerKey once the state holds a retention
// period anywhere (a task's own, a queue policy's, an expiry): an older
// member, which would drop the period from the record it restores, then
// refuses the snapshot.
func (f *FSM) markRetention() {
	if !f.st.Has(retentionMarkerKey) {
		f.st.Put(retentionMarkerKey, []byte{1})
	}
}

func applyTaskPurge(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskPurgeArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	limit := min(max(a.Max, 0), MaxTaskPurge)
	expired := dueEntries(f.st, taskExpiryPrefix, ctx.now, limit)
	for _, d := range expired {
		if t, ok := getTask(f.st, d.tenant, d.id); ok && t.expiresAt() == d.at {
			f.deleteTask(t) // its index entry, the expiry's and a watch event
		} else {
			f.st.Delete(d.key) // never written without its task; kept tidy all the same
		}
	}
	return okValue(OutcomeOK, map[string]int{"purged": len(expired)})
}

// NextTaskExpiry is the earliest retained task's expiry, 0 if none.
func (f *FSM) NextTaskExpiry() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(taskExpiryPrefix, "", func(k string, _ []byte) bool {
		if rest := k[len(taskExpiryPrefix):]; len(rest) >= 16 {
			next = parseHex16(rest[:16])
		}
		return false
	})
	return next
}

// retentionEntryVersion is the entry version a retention field needs.
func retentionEntryVersion(ms int64) byte {
	if ms != 0 {
		return EntryVersion4
	}
	return 0
}

func (a *QueuePolicyArgs) entryVersion() byte {
	return max(retentionEntryVersion(a.Policy.RetentionMs), a.flowVersion())
}

// errRetention is the message of a bad retention period in args that
// bypassed the server's validation.
func errRetention(ms int64) *Result {
	return fail(CodeInvalidArgument, fmt.Sprintf("retention_ms must not be negative, not %d", ms), nil)
}
