package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxClaimBatch bounds QueueClaimArgs.Max, the tasks one queue claim may
// take, and MaxBatchUpdates the updates of one task.update_batch. Each
// claimed task takes one position of its entry (applyCtx.nextSeq): with
// MaxCommandsPerEntry commands of at most MaxClaimBatch claims and
// MaxBatchUpdates updates, an entry stays far below 2^16 positions.
const (
	MaxClaimBatch   = 64
	MaxBatchUpdates = 64
)

// ClaimBatch is the answer to a queue claim with Max: the tasks claimed,
// best first, each with its own fencing token and lease.
type ClaimBatch struct {
	Tasks []any `json:"tasks"`
}

// Max asks for up to Max tasks in one claim (EntryVersion6).
func (a *QueueClaimArgs) maxVersion() byte {
	if a.Max != 0 {
		return EntryVersion6
	}
	return 0
}

// queueClaimMax claims up to a.Max tasks of the queue: Max queue claims
// one after the other in the command, each with queueClaim's rules
// (priorities, flow control, expired leases, dead letters, statistics)
// and its own fencing token and lease; it stops at the first that finds
// nothing. The answer lists the claimed tasks, or is no content when
// none was claimable (as a claim of one task is).
func queueClaimMax(f *FSM, ctx *applyCtx, c *Command, a *QueueClaimArgs) *Result {
	if r := maxClaimRefusal(a); r != nil {
		return r
	}
	tasks := claimUpTo(f, ctx, c, a)
	if len(tasks) == 0 {
		return okValue(OutcomeNoContent, nil)
	}
	return okValue(OutcomeOK, &ClaimBatch{Tasks: tasks})
}

// maxClaimRefusal refuses a claim of up to a.Max tasks whose Max is out
// of bounds, or whose lease would not be live once made (LeaseMs < 1):
// the task it claims would be claimable again at once, and the next claim
// of the same command would take it again, with another attempt. The
// server refuses such a lease_ms; this is the state machine's own check,
// for a command however it came into the log.
func maxClaimRefusal(a *QueueClaimArgs) *Result {
	if a.Max < 1 || a.Max > MaxClaimBatch {
		return fail(CodeInvalidArgument, fmt.Sprintf("max must be between 1 and %d, not %d", MaxClaimBatch, a.Max), nil)
	}
	if a.LeaseMs < 1 {
		return fail(CodeInvalidArgument, fmt.Sprintf("a claim of up to max tasks needs lease_ms of at least 1, not %d", a.LeaseMs), nil)
	}
	return nil
}

// claimUpTo makes up to a.Max claims and returns the claimed tasks'
// answers (an empty list: none).
func claimUpTo(f *FSM, ctx *applyCtx, c *Command, a *QueueClaimArgs) []any {
	tasks := []any{}
	for range a.Max {
		r := queueClaim(f, ctx, c, a)
		if r.Outcome == OutcomeNoContent || r.Obj == nil {
			break
		}
		tasks = append(tasks, r.Obj)
	}
	return tasks
}

// KindTaskUpdateBatch applies several task updates and, optionally, a
// queue claim of up to Max tasks in one command (docs/api.md "Tasks",
// the queue batch): a worker finishes the tasks it has done and takes
// its next ones in one round trip and one log entry. Each update follows
// task.update's rules exactly, in order, as if sent alone one after the
// other, and has its own outcome: a refused one (a stale fencing token,
// a live lease, a guard) writes nothing (updateTask refuses before any
// write) and does not stop the others. The claim comes last and sees
// every update (a release frees its slot for the claim). Only in
// EntryVersion6 entries.
const KindTaskUpdateBatch Kind = "task.update_batch"

// TaskUpdateBatchArgs are the updates and the claim (nil: none) of a
// task.update_batch, all of the command's tenant.
type TaskUpdateBatchArgs struct {
	Updates []TaskUpdateArgs
	Claim   *QueueClaimArgs
}

// UpdateOutcome is one update's outcome in a batch: the updated task, or
// the error a task.update alone would have answered.
type UpdateOutcome struct {
	Task  *Task       `json:"task,omitempty"`
	Error *BatchError `json:"error,omitempty"`
}

// BatchError is a refused update of a batch, encoded as the "error"
// member of docs/api.md's error body: code, message and the details.
type BatchError struct {
	Code    string
	Message string
	Details json.RawMessage
}

// MarshalJSON writes code, message and the details' members in one
// object, keys sorted; numbers are kept as written.
func (e *BatchError) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if len(e.Details) > 0 {
		d := json.NewDecoder(bytes.NewReader(e.Details))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			return nil, err
		}
	}
	m["code"], m["message"] = e.Code, e.Message
	return json.Marshal(m)
}

// UpdateBatchAnswer answers a task.update_batch: one outcome per update,
// in order, and the claimed tasks (empty: none, or no claim asked).
type UpdateBatchAnswer struct {
	Results []UpdateOutcome `json:"results"`
	Next    []any           `json:"next"`
}

func applyTaskUpdateBatch(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskUpdateBatchArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if len(a.Updates) > MaxBatchUpdates {
		return fail(CodeInvalidArgument, fmt.Sprintf("a batch has at most %d updates, not %d", MaxBatchUpdates, len(a.Updates)), nil)
	}
	if len(a.Updates) == 0 && a.Claim == nil {
		return fail(CodeInvalidArgument, "a batch has updates or a claim", nil)
	}
	if a.Claim != nil {
		if r := maxClaimRefusal(a.Claim); r != nil {
			return r
		}
	}
	out := &UpdateBatchAnswer{Results: make([]UpdateOutcome, len(a.Updates)), Next: []any{}}
	for i := range a.Updates {
		r := updateTask(f, ctx, c, &a.Updates[i])
		if r.OK() {
			out.Results[i].Task = r.Obj.(*Task)
			continue
		}
		out.Results[i].Error = &BatchError{Code: r.Code, Message: r.Message, Details: r.Details}
	}
	if a.Claim != nil {
		out.Next = claimUpTo(f, ctx, c, a.Claim)
	}
	return okValue(OutcomeOK, out)
}

func (a *TaskUpdateBatchArgs) jsonFields() [][]byte {
	var out [][]byte
	for i := range a.Updates {
		out = append(out, a.Updates[i].jsonFields()...)
	}
	return out
}
