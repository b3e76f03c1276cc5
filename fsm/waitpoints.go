package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Waitpoints (docs/api.md "Waitpoints"): a point a task or a plain caller
// waits on, for a person or another system, completed once with a JSON
// payload or timed out. A task holder parks its task on one (task.wait):
// the lease ends, the token is retired, and the task sits in its queue's
// b/ index (blocked) until the waitpoint resolves; it is then claimable
// again, and its claim answers the waitpoint's state and payload. The
// leader proposes waitpoint.expire once a timeout passed by its clock.
//
// Keys:
//
//	t/<tenant>/wp/<id>                      the waitpoint
//	wpx/<timeout ms, 16 hex>/<tenant>/<id>  a pending waitpoint's timeout
//	cfg/waitpoints                          present once a task record had Waitpoint
const (
	KindWaitpointCreate   Kind = "waitpoint.create"
	KindWaitpointComplete Kind = "waitpoint.complete"
	KindWaitpointExpire   Kind = "waitpoint.expire"
	KindTaskWait          Kind = "task.wait"
)

// Waitpoint states.
const (
	WaitpointPending   = "pending"
	WaitpointCompleted = "completed"
	WaitpointTimedOut  = "timed_out"
)

// MaxWaitpointExpire bounds the waitpoints one waitpoint.expire times out.
const MaxWaitpointExpire = 1000

// Waitpoint is a waitpoint record; times are Unix ms of commands.
type Waitpoint struct {
	Tenant     string
	ID         string
	State      string
	Payload    []byte // JSON; nil until completed
	Version    uint64
	CreatedAt  int64
	TimeoutAt  int64
	ResolvedAt int64
	TaskID     string // the task parked on it, "" if none
}

type waitpointJSON struct {
	Tenant     string          `json:"tenant_id"`
	ID         string          `json:"waitpoint_id"`
	State      string          `json:"state"`
	Payload    json.RawMessage `json:"payload"`
	Version    uint64          `json:"version"`
	TaskID     string          `json:"task_id"`
	CreatedAt  string          `json:"created_at"`
	TimeoutAt  string          `json:"timeout_at"`
	ResolvedAt *string         `json:"resolved_at"`
}

// MarshalJSON renders the wire form: times as RFC 3339.
func (w *Waitpoint) MarshalJSON() ([]byte, error) {
	j := waitpointJSON{Tenant: w.Tenant, ID: w.ID, State: w.State, Payload: w.Payload, Version: w.Version, TaskID: w.TaskID,
		CreatedAt: FormatMillis(w.CreatedAt), TimeoutAt: FormatMillis(w.TimeoutAt)}
	if w.ResolvedAt != 0 {
		s := FormatMillis(w.ResolvedAt)
		j.ResolvedAt = &s
	}
	if len(j.Payload) == 0 {
		j.Payload = json.RawMessage("null")
	}
	return json.Marshal(&j)
}

// WaitpointCreateArgs creates a pending waitpoint that times out TimeoutMs
// after the command's time.
type WaitpointCreateArgs struct {
	ID        string
	TimeoutMs int64
}

// WaitpointCompleteArgs completes a waitpoint with Payload (JSON).
type WaitpointCompleteArgs struct {
	ID      string
	Payload []byte
}

// WaitpointExpireArgs bounds one expiry sweep.
type WaitpointExpireArgs struct{ Max int }

// TaskWaitArgs parks task ID, held under FencingToken, on a waitpoint.
type TaskWaitArgs struct {
	ID           string
	FencingToken uint64
	WaitpointID  string
}

const (
	wpTimeoutPrefix    = "wpx/"
	waitpointMarkerKey = "cfg/waitpoints"
)

func waitpointKey(tenant, id string) string { return "t/" + tenant + "/wp/" + id }
func wpTimeoutKey(at int64, tenant, id string) string {
	return wpTimeoutPrefix + hex16(at) + "/" + tenant + "/" + id
}

func getWaitpoint(st *Store, tenant, id string) (*Waitpoint, bool) {
	raw, ok := st.Get(waitpointKey(tenant, id))
	if !ok {
		return nil, false
	}
	var w Waitpoint
	if decode(raw, &w) != nil {
		return nil, false
	}
	return &w, true
}

// putWaitpoint stores w and emits it.
func (f *FSM) putWaitpoint(w *Waitpoint) {
	f.st.Put(waitpointKey(w.Tenant, w.ID), encode(w))
	f.emit(w.Tenant, ResourceWaitpoints, w.ID, w.ID, EventPut, w)
}

func waitpointNotFound(id string) *Result {
	return fail(CodeNotFound, fmt.Sprintf("waitpoint %q not found", id), nil)
}

func applyWaitpointCreate(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a WaitpointCreateArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if !f.st.Has(tenantKey(c.Tenant)) {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if a.TimeoutMs <= 0 {
		return fail(CodeInvalidArgument, fmt.Sprintf("timeout_ms must be positive, not %d", a.TimeoutMs), nil)
	}
	if f.st.Has(waitpointKey(c.Tenant, a.ID)) {
		return fail(CodeAlreadyExists, fmt.Sprintf("waitpoint %q already exists", a.ID), nil)
	}
	w := &Waitpoint{Tenant: c.Tenant, ID: a.ID, State: WaitpointPending, Version: 1, CreatedAt: ctx.now, TimeoutAt: ctx.now + a.TimeoutMs}
	f.st.Put(wpTimeoutKey(w.TimeoutAt, w.Tenant, w.ID), nil)
	f.putWaitpoint(w)
	return okValue(OutcomeCreated, w)
}

// resolveWaitpoint moves a pending w to state and resumes its parked task.
func (f *FSM) resolveWaitpoint(ctx *applyCtx, w *Waitpoint, state string, payload []byte) {
	f.st.Delete(wpTimeoutKey(w.TimeoutAt, w.Tenant, w.ID))
	w.State, w.Payload, w.ResolvedAt = state, payload, ctx.now
	w.Version++
	f.putWaitpoint(w)
	if w.TaskID == "" {
		return
	}
	t, ok := getTask(f.st, w.Tenant, w.TaskID)
	if !ok || !t.Parked || t.Waitpoint != w.ID {
		return
	}
	old := *t
	t.Parked = false
	t.Version++
	t.UpdatedAt = ctx.now
	f.putTask(&old, t)
}

func applyWaitpointComplete(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a WaitpointCompleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	w, ok := getWaitpoint(f.st, c.Tenant, a.ID)
	if !ok {
		return waitpointNotFound(a.ID)
	}
	switch w.State {
	case WaitpointCompleted:
		if bytes.Equal(w.Payload, a.Payload) {
			return okValue(OutcomeOK, w) // the same completion again: answered as it was
		}
		return fail(CodeVersionMismatch, fmt.Sprintf("waitpoint %q was completed with another payload", a.ID),
			map[string]any{"current_state": w.State})
	case WaitpointTimedOut:
		return fail(CodeVersionMismatch, fmt.Sprintf("waitpoint %q timed out at %s", a.ID, FormatMillis(w.ResolvedAt)),
			map[string]any{"current_state": w.State})
	}
	f.resolveWaitpoint(ctx, w, WaitpointCompleted, a.Payload)
	return okValue(OutcomeOK, w)
}

func applyWaitpointExpire(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a WaitpointExpireArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	limit := min(max(a.Max, 0), MaxWaitpointExpire)
	ran := dueEntries(f.st, wpTimeoutPrefix, ctx.now, limit)
	for _, d := range ran {
		if w, ok := getWaitpoint(f.st, d.tenant, d.id); ok && w.State == WaitpointPending {
			f.resolveWaitpoint(ctx, w, WaitpointTimedOut, nil)
		} else {
			f.st.Delete(d.key)
		}
	}
	return okValue(OutcomeOK, map[string]int{"timed_out": len(ran)})
}

// NextWaitpointTimeout is the earliest pending waitpoint's timeout, 0 if
// none.
func (f *FSM) NextWaitpointTimeout() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(wpTimeoutPrefix, "", func(k string, _ []byte) bool {
		if rest := k[len(wpTimeoutPrefix):]; len(rest) >= 16 {
			next = max(parseHex16(rest[:16]), 1)
		}
		return false
	})
	return next
}

// GetWaitpoint returns a waitpoint and the applied index.
func (f *FSM) GetWaitpoint(tenant, id string) (*Waitpoint, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := getWaitpoint(f.st, tenant, id)
	return w, f.applied, ok
}

func applyTaskWait(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a TaskWaitArgs
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
	w, ok := getWaitpoint(f.st, c.Tenant, a.WaitpointID)
	if !ok || c.Principal != "" && waitpointHidden(f.st, c, a.WaitpointID) {
		return fail(CodeNotFound, fmt.Sprintf("waitpoint %q not found (or outside the caller's waitpoint grants)", a.WaitpointID), nil)
	}
	if w.TaskID != "" && w.TaskID != t.ID {
		return fail(CodeVersionMismatch, fmt.Sprintf("waitpoint %q already has task %q parked on it", w.ID, w.TaskID),
			map[string]any{"current_state": w.State})
	}
	old := *t
	if t.CancelRequested {
		// Cancelled meanwhile: parking gives the task up, so the
		// cancellation ends here (cancel.go) instead.
		finishCancel(ctx, t, "")
		t.Version++
		t.UpdatedAt = ctx.now
		f.putTask(&old, t)
		return okValue(OutcomeOK, t)
	}
	t.Owner, t.LeaseUntil = "", 0
	t.FencingToken = ctx.nextToken() // the lease ends here: its token is retired
	t.Waitpoint = w.ID
	t.Parked = w.State == WaitpointPending
	t.Version++
	t.UpdatedAt = ctx.now
	if !f.st.Has(waitpointMarkerKey) {
		f.st.Put(waitpointMarkerKey, []byte{1})
	}
	if w.TaskID != t.ID {
		w.TaskID = t.ID
		w.Version++
		f.putWaitpoint(w)
	}
	f.putTask(&old, t)
	return okValue(OutcomeOK, t)
}

// waitpointHidden reports whether the principal proposing c may not read
// waitpoint id.
func waitpointHidden(st *Store, c *Command, id string) bool {
	p, r := getPrincipal(st, c.Tenant, c.Principal)
	return r != nil || !GrantsAllow(p.Grants, ResourceWaitpoints, id, "read")
}

// waitpointOutput is the waitpoint part of a claim's answer.
type waitpointOutput struct {
	ID      string          `json:"waitpoint_id"`
	State   string          `json:"state"`
	Payload json.RawMessage `json:"payload"`
}

func waitpointOf(st *Store, t *Task) *waitpointOutput {
	if t.Waitpoint == "" {
		return nil
	}
	o := &waitpointOutput{ID: t.Waitpoint, State: "deleted", Payload: json.RawMessage("null")}
	if w, ok := getWaitpoint(st, t.Tenant, t.Waitpoint); ok {
		o.State = w.State
		if len(w.Payload) != 0 {
			o.Payload = w.Payload
		}
	}
	return o
}

func (a *WaitpointCompleteArgs) jsonFields() [][]byte { return [][]byte{a.Payload} }
