package fsm

import (
	"fmt"
)

// Cancellation (docs/api.md "Cancellation").
//
// A task without a live lease is cancelled at once: status cancelled, no
// owner, and its fencing token retired: the task gets a fresh token from
// the log position, which no claim handed out, so every fenced write of a
// former holder (task writes by token, fences of other resources) is
// refused from then on. A task under a live lease gets CancelRequested
// instead; its holder sees it on renew (and in every answer about the
// task) and ends the cancellation with task.cancel under its token, or by
// releasing or failing the task; a lease that runs out first ends it too:
// from the command time at which the lease ran out, every write under the
// holder's token is refused (cancelDue), and the leader proposes
// task.cancel_sweep, which cancels such tasks in the order their leases
// ran out. Nothing here reads a clock: times are the commands'.

// Cancellation command kinds. Only in EntryVersion6 entries.
const (
	KindTaskCancel      Kind = "task.cancel"
	KindTaskCancelSweep Kind = "task.cancel_sweep"
)

// TaskCancelArgs cancels a task. With FencingToken, the holder of the
// current lease cancels (or acknowledges a requested cancellation): the
// task is cancelled at once. Reason, if any, becomes the task's last_error.
type TaskCancelArgs struct {
	ID            string
	FencingToken  *uint64 `codec:",omitempty"`
	ExpectVersion *uint64 `codec:",omitempty"`
	Reason        string  `codec:",omitempty"`
}

// TaskCancelSweepArgs bounds one sweep.
type TaskCancelSweepArgs struct{ Max int }

// MaxCancelSweep bounds the tasks one task.cancel_sweep cancels, whatever
// its args say.
const MaxCancelSweep = 1000

// Cancellation keys:
//
//	tc/<lease until, 16 hex>/<tenant>/<id>   a leased task with a cancellation requested
//	cfg/cancel                               present once a task record had CancelRequested
const (
	cancelPrefix    = "tc/"
	cancelMarkerKey = "cfg/cancel"
)

// cancelKey is t's entry in the index of requested cancellations, "" for
// none: only a task with an owner has one.
func (t *Task) cancelKey() string {
	if t == nil || !t.CancelRequested || t.Owner == "" {
		return ""
	}
	return cancelPrefix + hex16(t.LeaseUntil) + "/" + t.Tenant + "/" + t.ID
}

// cancelDue reports whether t's cancellation takes effect at now: it was
// requested and the lease is no longer live. Every write under the
// holder's token is then refused as fenced.
func (t *Task) cancelDue(now int64) bool { return t.CancelRequested && !t.leaseLive(now) }

// cancelledFenced is the answer to a write under the token of a lease
// whose cancellation took effect (cancelDue) but that no sweep applied yet.
func cancelledFenced(t *Task, token uint64) *Result {
	return fail(CodeFenced, fmt.Sprintf("task %q was cancelled: its lease ran out after the cancellation was requested (token %d is retired)",
		t.ID, token), map[string]any{"current_token": t.FencingToken})
}

// moveCancel keeps the requested-cancellation index in step with a put or
// delete of a task (t nil: deleted). A task without an owner has no
// cancellation pending: putTask clears CancelRequested first.
func (f *FSM) moveCancel(old, t *Task) {
	was, is := old.cancelKey(), t.cancelKey()
	if t != nil && t.CancelRequested && !f.st.Has(cancelMarkerKey) {
		f.st.Put(cancelMarkerKey, []byte{1})
	}
	if was == is {
		return
	}
	if was != "" {
		f.st.Delete(was)
	}
	if is != "" {
		f.st.Put(is, nil)
	}
}

// finishCancel makes t cancelled: no owner, a retired fencing token. The
// caller counts the write (Version, UpdatedAt).
func finishCancel(ctx *applyCtx, t *Task, reason string) {
	t.Status = StatusCancelled
	t.Owner, t.LeaseUntil = "", 0
	t.CancelRequested, t.Parked = false, false
	t.FencingToken = ctx.nextToken()
	if t.Life != nil || reason != "" {
		l := t.ownLife()
		l.AvailableAt = 0
		if reason != "" {
			l.LastError = reason
		}
	}
}

func applyTaskCancel(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskCancelArgs
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
	if a.FencingToken != nil {
		if *a.FencingToken != t.FencingToken || t.Owner == "" {
			return fenced(t, *a.FencingToken)
		}
		if t.cancelDue(ctx.now) {
			return cancelledFenced(t, *a.FencingToken)
		}
	}
	if r := checkExpect(t, a.ExpectVersion, nil); r != nil {
		return r
	}
	if t.Status == StatusCancelled && t.Owner == "" {
		return okValue(OutcomeOK, t) // already cancelled: nothing to do
	}
	if a.FencingToken == nil && TerminalStatus(t.Status) && !t.leaseLive(ctx.now) {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q is %s; only a task that has not ended can be cancelled", t.ID, t.Status),
			map[string]any{"current_status": t.Status})
	}
	old := *t
	if a.FencingToken == nil && t.leaseLive(ctx.now) {
		if t.CancelRequested {
			return okValue(OutcomeOK, t) // requested before: the holder has it
		}
		t.CancelRequested = true
		if a.Reason != "" {
			t.ownLife().LastError = a.Reason
		}
	} else {
		finishCancel(ctx, t, a.Reason)
	}
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

func applyTaskCancelSweep(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskCancelSweepArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	limit := min(max(a.Max, 0), MaxCancelSweep)
	// A lease is live while lease_until > now: due at lease_until <= now.
	ran := dueEntries(f.st, cancelPrefix, ctx.now, limit)
	for _, d := range ran {
		t, ok := getTask(f.st, d.tenant, d.id)
		if !ok || !t.cancelDue(ctx.now) || t.cancelKey() != d.key {
			f.st.Delete(d.key) // never written without its task; kept tidy all the same
			continue
		}
		old := *t
		finishCancel(ctx, t, "")
		t.Version++
		t.UpdatedAt = ctx.now
		f.putTask(&old, t)
	}
	return okValue(OutcomeOK, map[string]int{"cancelled": len(ran)})
}

// NextCancelDue is the earliest lease end among the tasks with a
// cancellation requested, 0 if none: the leader proposes
// task.cancel_sweep once its clock has passed it.
func (f *FSM) NextCancelDue() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(cancelPrefix, "", func(k string, _ []byte) bool {
		if rest := k[len(cancelPrefix):]; len(rest) >= 16 {
			next = max(parseHex16(rest[:16]), 1)
		}
		return false
	})
	return next
}

// releaseCancelled ends a requested cancellation when the task loses its
// owner (an update that releases it, a failed attempt, a retry): the task
// is cancelled rather than claimable again, unless the write sets a
// terminal status of its own (the work ended anyway) or keep is set (a
// retry, which revives it). Either way the holder's token is retired.
// Called by the handler before putTask.
func releaseCancelled(ctx *applyCtx, old, t *Task, keep bool) {
	if !old.CancelRequested || t.Owner != "" {
		return
	}
	if keep || TerminalStatus(t.Status) && t.Status != old.Status {
		t.CancelRequested = false
		t.FencingToken = ctx.nextToken()
		return
	}
	finishCancel(ctx, t, "")
}
