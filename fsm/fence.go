package fsm

import (
	"fmt"
	"reflect"
)

// Fence is the guard of docs/api.md "Fencing guards": a write carrying it applies
// only if Token is the current fencing token of task TaskID in the same
// tenant. Every guarded write of every resource calls checkFence; there is
// no other implementation.
type Fence struct {
	TaskID string `json:"task_id"`
	Token  uint64 `json:"token"`
}

// checkFence returns nil when the fence of command c holds (or there is
// none), else the fenced result with the task's current token.
//
// A principal learns nothing from a fence about a task it may not read
// (fenceHidden): in an entry of version 5 or later, such a task is answered
// exactly as a missing one, whatever the token, with one message for both.
// Older entries apply as they always did.
func checkFence(st *Store, c *Command, fc *Fence) *Result {
	if fc == nil {
		return nil
	}
	hide := c.Principal != "" && c.ver >= EntryVersion5
	t, ok := getTask(st, c.Tenant, fc.TaskID)
	if hide && ok && fenceHidden(st, c, t) {
		ok = false
	}
	if !ok {
		msg := fmt.Sprintf("fence names task %q, which does not exist", fc.TaskID)
		if hide {
			msg = fmt.Sprintf("fence names task %q, which does not exist or is outside the caller's task grants", fc.TaskID)
		}
		return fail(CodeFenced, msg, map[string]any{"current_token": 0})
	}
	if t.FencingToken != fc.Token {
		return fenced(t, fc.Token)
	}
	if t.cancelDue(c.Now) {
		return cancelledFenced(t, fc.Token)
	}
	return nil
}

// fenceHidden reports whether the principal proposing c may not read task
// t (no tasks read grant on its queue, or no longer a principal), as the
// command applies.
func fenceHidden(st *Store, c *Command, t *Task) bool {
	p, r := getPrincipal(st, c.Tenant, c.Principal)
	return r != nil || !GrantsAllow(p.Grants, "tasks", t.Queue, "read")
}

// fenceFields: for each command kind whose args have a Fence field, the
// field's index. A principal's command with a fence, also inside a
// transaction, goes in an EntryVersion5 entry (fenceEntryVersion), where
// the fence hides tasks outside the principal's grants.
var fenceFields = func() map[Kind]int {
	m := map[Kind]int{}
	for _, s := range commandTable {
		if f, ok := reflect.TypeOf(s.Args).FieldByName("Fence"); ok && f.Type == reflect.TypeFor[*Fence]() {
			m[s.Kind] = f.Index[0]
		}
	}
	return m
}()

// taskByID are the kinds that write a task named by id, which a
// principal's grants are checked against as they apply (taskDenied).
var taskByID = map[Kind]bool{KindTaskClaim: true, KindTaskRenew: true, KindTaskUpdate: true,
	KindTaskFail: true, KindTaskRetry: true, KindTaskDelete: true, KindTaskCancel: true, KindTaskWait: true}

// fenceEntryVersion is EntryVersion5 for a command of a principal that
// writes a task by id, or whose args carry a fence (a transaction's ops
// included), else 0: in those entries its grants are checked as the
// command applies (checkFence, taskDenied).
func fenceEntryVersion(kind Kind, principal string, args any) byte {
	if principal == "" {
		return 0
	}
	if taskByID[kind] {
		return EntryVersion5
	}
	if a, ok := args.(*TxnArgs); ok {
		for _, op := range a.Ops {
			if taskByID[op.Kind] {
				return EntryVersion5
			}
			t, ok := argTypes[op.Kind]
			if _, fenced := fenceFields[op.Kind]; !ok || !fenced {
				continue
			}
			v := reflect.New(t.Elem())
			if decode(op.Args, v.Interface()) == nil && !v.Elem().Field(fenceFields[op.Kind]).IsNil() {
				return EntryVersion5
			}
		}
		return 0
	}
	i, ok := fenceFields[kind]
	if !ok {
		return 0
	}
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type() != argTypes[kind] {
		return 0
	}
	if !v.Elem().Field(i).IsNil() {
		return EntryVersion5
	}
	return 0
}
