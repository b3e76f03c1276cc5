package fsm

// KindTaskUpdateClaim updates one task and claims the next task of a queue
// in one command (docs/api.md "Tasks", claim_next): a worker finishes its
// task and gets the next one in one round trip and one log entry instead
// of two. Both parts follow their own kind's rules exactly (updateTask,
// queueClaim: fencing, guards, flow control, dependencies, priorities,
// expired leases, ClaimedFrom, statistics, watch events); the claim sees
// the update's changes, so a release frees its slot of max_leased or of a
// concurrency key for the claim. A refused update is the command's answer
// and nothing is claimed; a claim that finds nothing answers next null.
// Only in EntryVersion6 entries.
const KindTaskUpdateClaim Kind = "task.update_claim"

// TaskUpdateClaimArgs are an update's args and a queue claim's, both of
// the command's tenant.
type TaskUpdateClaimArgs struct {
	Update TaskUpdateArgs
	Claim  QueueClaimArgs
}

// UpdateClaimAnswer is the answer to a task.update_claim: the updated
// task, and the claimed one (nil: nothing was claimable).
type UpdateClaimAnswer struct {
	Task *Task `json:"task"`
	Next any   `json:"next"`
}

func applyTaskUpdateClaim(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskUpdateClaimArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	r := updateTask(f, ctx, c, &a.Update)
	if !r.OK() {
		return r
	}
	if a.Claim.Max != 0 {
		// claim_next with max: up to Max tasks, next is their list.
		if r := maxClaimRefusal(&a.Claim); r != nil {
			return r
		}
		return okValue(OutcomeOK, &UpdateClaimAnswer{Task: r.Obj.(*Task), Next: claimUpTo(f, ctx, c, &a.Claim)})
	}
	n := queueClaim(f, ctx, c, &a.Claim)
	if !n.OK() {
		return n
	}
	return okValue(OutcomeOK, &UpdateClaimAnswer{Task: r.Obj.(*Task), Next: n.Obj})
}

func (a *TaskUpdateClaimArgs) jsonFields() [][]byte { return a.Update.jsonFields() }
