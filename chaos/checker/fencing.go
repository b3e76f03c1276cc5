package checker

import (
	"fmt"
	"sort"

	"github.com/baton-dev/baton/chaos/history"
)

// fencedWrite is a write accepted under a task's fencing token.
type fencedWrite struct {
	op    *history.Op
	task  string
	token uint64
}

// tokenSighting is a moment the client knew a task's current token: the
// return of an op whose answer named it (a claim, a read, a fenced error).
type tokenSighting struct {
	op    *history.Op
	token uint64
	at    int64
}

// Fencing checks the fencing protocol from the client's side, per task:
//
//  1. No write is accepted with a token older than one the client had
//     already seen as current before the write was invoked: once a claim
//     with token T is acknowledged (or any answer shows T as current),
//     every later write under a token below T must be fenced.
//  2. In the log (X-Baton-Index), accepted fenced writes never go back in
//     token order, and none is applied after a newer claim's index (a
//     token is raft_index<<16 | position, see docs/api-notes.md).
//
// Attempts that share an Idempotency-Key are judged as one operation
// (Logical): a retry replayed after a newer claim was applied before it.
// Idempotent replays are left out of rule 2: their index is the replay's.
func Fencing(h *history.History) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	writes := map[string][]fencedWrite{}
	sightings := map[string][]tokenSighting{}
	for i := range ops {
		op := &ops[i]
		if w, ok := acceptedFenced(op); ok {
			writes[w.task] = append(writes[w.task], w)
		}
		if task, tok, ok := sighting(op); ok {
			sightings[task] = append(sightings[task], tokenSighting{op: op, token: tok, at: op.Return})
		}
	}
	var out []Anomaly
	tasks := make([]string, 0, len(writes))
	for t := range writes {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, task := range tasks {
		out = append(out, staleWrites(task, writes[task], sightings[task])...)
		out = append(out, logOrder(task, writes[task], sightings[task])...)
	}
	return out
}

// acceptedFenced returns the token an acknowledged write was accepted
// under, if it carried one.
func acceptedFenced(op *history.Op) (fencedWrite, bool) {
	if op.Outcome != history.OK {
		return fencedWrite{}, false
	}
	switch {
	case op.In.FenceTask != "":
		return fencedWrite{op: op, task: op.In.FenceTask, token: op.In.FenceToken}, true
	case (op.Kind == history.TaskUpdate || op.Kind == history.TaskRenew || op.Kind == history.TaskFail ||
		op.Kind == history.TaskCancel) && op.In.Token != nil:
		return fencedWrite{op: op, task: op.In.Key, token: *op.In.Token}, true
	}
	return fencedWrite{}, false
}

// sighting returns the token an answer showed as a task's current one.
func sighting(op *history.Op) (string, uint64, bool) {
	if op.Out.CurrentToken != nil && *op.Out.CurrentToken != 0 {
		task := op.In.Key
		if op.In.FenceTask != "" {
			task = op.In.FenceTask
		}
		return task, *op.Out.CurrentToken, true
	}
	if op.Outcome != history.OK || op.Out.Token == 0 {
		return "", 0, false
	}
	switch op.Kind {
	case history.TaskClaim, history.TaskGet, history.TaskRenew, history.TaskUpdate, history.TaskFail, history.TaskRetry,
		history.TaskCancel:
		return op.In.Key, op.Out.Token, true
	case history.TaskQueueClaim:
		return op.Out.TaskID, op.Out.Token, op.Out.TaskID != ""
	}
	return "", 0, false
}

func staleWrites(task string, writes []fencedWrite, seen []tokenSighting) []Anomaly {
	var out []Anomaly
	for _, w := range writes {
		for _, s := range seen {
			if s.token > w.token && s.at < w.op.Invoke {
				out = append(out, Anomaly{Checker: NameFencing, Key: "task:" + task,
					Message: fmt.Sprintf("%s accepted under token %d, but token %d was current before it was invoked (%s)",
						w.op.Kind, w.token, s.token, s.op.String()),
					Ops: []int{s.op.ID, w.op.ID}})
				break
			}
		}
	}
	return out
}

func logOrder(task string, writes []fencedWrite, seen []tokenSighting) []Anomaly {
	var applied []fencedWrite
	for _, w := range writes {
		if !w.op.Replay && w.op.Index != 0 {
			applied = append(applied, w)
		}
	}
	sort.SliceStable(applied, func(i, j int) bool { return applied[i].op.Index < applied[j].op.Index })
	var out []Anomaly
	// Writes in one log entry (group commit) share an index: compare each
	// write only with those at strictly smaller indexes.
	var best *fencedWrite // the highest token accepted at a smaller index
	var pending *fencedWrite
	for i := range applied {
		cur := &applied[i]
		if i > 0 && applied[i-1].op.Index < cur.op.Index {
			for j := i - 1; j >= 0 && applied[j].op.Index == applied[i-1].op.Index; j-- {
				if pending == nil || applied[j].token > pending.token {
					pending = &applied[j]
				}
			}
			if best == nil || pending.token > best.token {
				best = pending
			}
			pending = nil
		}
		if best != nil && cur.token < best.token {
			out = append(out, Anomaly{Checker: NameFencing, Key: "task:" + task,
				Message: fmt.Sprintf("token order went back in the log: token %d accepted at index %d after token %d at index %d",
					cur.token, cur.op.Index, best.token, best.op.Index),
				Ops: []int{best.op.ID, cur.op.ID}})
		}
	}
	for _, w := range applied {
		for _, s := range seen {
			claimIndex := s.token >> 16
			if s.token > w.token && claimIndex < w.op.Index {
				out = append(out, Anomaly{Checker: NameFencing, Key: "task:" + task,
					Message: fmt.Sprintf("%s under token %d applied at index %d, after the claim of token %d at index %d",
						w.op.Kind, w.token, w.op.Index, s.token, claimIndex),
					Ops: []int{s.op.ID, w.op.ID}})
				break
			}
		}
	}
	return out
}
