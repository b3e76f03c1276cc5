package fsm

import "fmt"

// A worker that claims several tasks at once (a queue claim with Max, a
// task.update_batch's claim) may hold one it never starts: its slot was
// still busy when it stopped. Releasing that task with Unstarted gives
// back what the claim took, so that a claim nobody acted on does not
// count: the attempt (Task.Attempt counts claims; on its last attempt
// the task would otherwise go dead without having run) and the status a
// claim's set_status replaced, when the record remembers it
// (ClaimedFrom: a claim of an EntryVersion5 entry or later). A holder
// that gave the task another status itself has made the claim's status
// its own: that status stays.
//
// Only the holder of the current, live lease may say so: the fencing
// token must be current (a later claim fences it) and the lease must not
// have run out (another claim could have taken and started the task).
// The attempt goes back to what it was before that claim, never lower.

// unstartedRefusal refuses an update with Unstarted that is not a plain
// release by the holder of t's live lease.
func unstartedRefusal(t *Task, a *TaskUpdateArgs, now int64) *Result {
	switch {
	case a.FencingToken == nil || !a.Release:
		return fail(CodeInvalidArgument, "unstarted needs release and the lease's fencing_token", nil)
	case a.Status != nil || a.Result != nil || a.Payload != nil || a.ArtifactID != nil:
		return fail(CodeInvalidArgument, "unstarted gives the task back as it was claimed: no status, result, payload or artifact_id", nil)
	case t.Owner == "" || !t.leaseLive(now):
		return fail(CodeFenced, fmt.Sprintf("task %q has no live lease under token %d: only its holder may release it unstarted",
			t.ID, *a.FencingToken), map[string]any{"current_token": t.FencingToken})
	}
	return nil
}

// giveBackClaim undoes what the claim of t's lease took, once applyTaskChanges
// released it: putTask then clears ClaimedFrom (the task has no owner).
func giveBackClaim(t *Task) {
	if t.Attempt > 0 {
		t.Attempt--
	}
	if t.ClaimedFrom != "" {
		t.Status = t.ClaimedFrom
	}
}
