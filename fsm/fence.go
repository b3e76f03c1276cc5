package fsm

import "fmt"

// Fence is the guard of docs/api.md "Fencing guards": a write carrying it applies
// only if Token is the current fencing token of task TaskID in the same
// tenant. Every guarded write of every resource calls checkFence; there is
// no other implementation.
type Fence struct {
	TaskID string `json:"task_id"`
	Token  uint64 `json:"token"`
}

// checkFence returns nil when the fence holds (or there is none), else the
// fenced result with the task's current token.
func checkFence(st *Store, tenant string, fc *Fence) *Result {
	if fc == nil {
		return nil
	}
	t, ok := getTask(st, tenant, fc.TaskID)
	if !ok {
		return fail(CodeFenced, fmt.Sprintf("fence names task %q, which does not exist", fc.TaskID),
			map[string]any{"current_token": 0})
	}
	if t.FencingToken != fc.Token {
		return fenced(t, fc.Token)
	}
	return nil
}
