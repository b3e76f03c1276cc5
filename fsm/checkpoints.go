package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Checkpoint command kinds.
const (
	KindCheckpointPut    Kind = "checkpoint.put"
	KindCheckpointWrites Kind = "checkpoint.writes"
	KindThreadDelete     Kind = "thread.delete"
)

// Checkpoint is one link of a thread's append-only chain.
type Checkpoint struct {
	Tenant, Thread, ID, ParentID string
	Data, Metadata               []byte // JSON
	Seq                          uint64 // log position: orders a thread's checkpoints
	CreatedAt                    int64
}

// PendingWrites are the writes one task made in the step after a checkpoint.
type PendingWrites struct {
	TaskID string          `json:"task_id"`
	Writes json.RawMessage `json:"writes"`
}

type checkpointJSON struct {
	ThreadID      string          `json:"thread_id"`
	CheckpointID  string          `json:"checkpoint_id"`
	ParentID      string          `json:"parent_id"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAt     string          `json:"created_at"`
	PendingWrites []PendingWrites `json:"pending_writes,omitempty"`
}

// CheckpointView is a checkpoint as the API returns it, with its pending
// writes when read one at a time (LangGraph's get_tuple).
type CheckpointView struct {
	*Checkpoint
	Pending []PendingWrites
}

// MarshalJSON renders the checkpoint of docs/api.md.
func (v CheckpointView) MarshalJSON() ([]byte, error) {
	c := v.Checkpoint
	return json.Marshal(checkpointJSON{ThreadID: c.Thread, CheckpointID: c.ID, ParentID: c.ParentID,
		Data: jsonOrNull(c.Data), Metadata: jsonOrEmpty(c.Metadata), CreatedAt: FormatMillis(c.CreatedAt),
		PendingWrites: v.Pending})
}

func jsonOrEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// CheckpointPutArgs appends a checkpoint.
type CheckpointPutArgs struct {
	Thread, ID, ParentID string
	Data, Metadata       []byte
	Fork                 bool
	Fence                *Fence
}

// CheckpointWritesArgs records a task's pending writes.
type CheckpointWritesArgs struct {
	Thread, ID, TaskID string
	Writes             []byte
	Fence              *Fence
}

// ThreadDeleteArgs deletes a whole thread.
type ThreadDeleteArgs struct {
	Thread string
	Fence  *Fence
}

// t/<tenant>/th/<thread>/h                    head checkpoint id
// t/<tenant>/th/<thread>/c/<id>               checkpoint
// t/<tenant>/th/<thread>/o/<^seq>/<id>        newest-first order
// t/<tenant>/th/<thread>/w/<id>/<task id>     pending writes
func threadPrefix(tenant, thread string) string { return "t/" + tenant + "/th/" + thread + "/" }
func cpKey(tenant, thread, id string) string    { return threadPrefix(tenant, thread) + "c/" + id }
func cpHeadKey(tenant, thread string) string    { return threadPrefix(tenant, thread) + "h" }
func cpOrderKey(c *Checkpoint) string {
	return threadPrefix(c.Tenant, c.Thread) + "o/" + fmt.Sprintf("%016x", ^c.Seq) + "/" + c.ID
}
func cpWritesPrefix(tenant, thread, id string) string {
	return threadPrefix(tenant, thread) + "w/" + id + "/"
}

func getCheckpoint(st *Store, tenant, thread, id string) (*Checkpoint, bool) {
	raw, ok := st.Get(cpKey(tenant, thread, id))
	if !ok {
		return nil, false
	}
	var c Checkpoint
	if decode(raw, &c) != nil {
		return nil, false
	}
	return &c, true
}

func threadHead(st *Store, tenant, thread string) string {
	raw, _ := st.Get(cpHeadKey(tenant, thread))
	return string(raw)
}

func sameCheckpoint(c *Checkpoint, a *CheckpointPutArgs) bool {
	return c.ParentID == a.ParentID && bytes.Equal(c.Data, a.Data) && bytes.Equal(c.Metadata, a.Metadata)
}

func applyCheckpointPut(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a CheckpointPutArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c.Tenant, a.Fence); r != nil {
		return r
	}
	if cur, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.ID); ok {
		if sameCheckpoint(cur, &a) {
			return okValue(OutcomeOK, CheckpointView{Checkpoint: cur})
		}
		return fail(CodeAlreadyExists, fmt.Sprintf("checkpoint %q exists with other content", a.ID), nil)
	}
	head := threadHead(f.st, c.Tenant, a.Thread)
	switch {
	case !a.Fork && a.ParentID != head:
		return fail(CodeVersionMismatch, fmt.Sprintf("parent %q is not the head of thread %q (head %q)", a.ParentID, a.Thread, head),
			map[string]any{"current_head": head})
	case a.Fork && a.ParentID != "":
		if _, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.ParentID); !ok {
			return fail(CodeNotFound, fmt.Sprintf("fork parent %q not found", a.ParentID), nil)
		}
	}
	cp := &Checkpoint{Tenant: c.Tenant, Thread: a.Thread, ID: a.ID, ParentID: a.ParentID, Data: a.Data,
		Metadata: a.Metadata, Seq: ctx.nextSeq(), CreatedAt: ctx.now}
	f.st.Put(cpKey(c.Tenant, a.Thread, a.ID), encode(cp))
	f.st.Put(cpOrderKey(cp), nil)
	f.st.Put(cpHeadKey(c.Tenant, a.Thread), []byte(a.ID))
	v := CheckpointView{Checkpoint: cp}
	f.emit(c.Tenant, ResourceCheckpoints, a.Thread+"/"+a.ID, a.Thread, EventPut, v)
	return okValue(OutcomeCreated, v)
}

func applyCheckpointWrites(f *FSM, _ *applyCtx, c *Command) *Result {
	var a CheckpointWritesArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c.Tenant, a.Fence); r != nil {
		return r
	}
	if _, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.ID); !ok {
		return fail(CodeNotFound, fmt.Sprintf("checkpoint %q not found in thread %q", a.ID, a.Thread), nil)
	}
	key := cpWritesPrefix(c.Tenant, a.Thread, a.ID) + a.TaskID
	pw := PendingWrites{TaskID: a.TaskID, Writes: a.Writes}
	if cur, ok := f.st.Get(key); ok {
		if bytes.Equal(cur, a.Writes) {
			return okValue(OutcomeOK, pw)
		}
		return fail(CodeAlreadyExists, fmt.Sprintf("task %q already recorded other writes for checkpoint %q", a.TaskID, a.ID), nil)
	}
	f.st.Put(key, a.Writes)
	f.emit(c.Tenant, ResourceCheckpoints, a.Thread+"/"+a.ID+"/writes/"+a.TaskID, a.Thread, EventPut, pw)
	return okValue(OutcomeCreated, pw)
}

func applyThreadDelete(f *FSM, _ *applyCtx, c *Command) *Result {
	var a ThreadDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c.Tenant, a.Fence); r != nil {
		return r
	}
	prefix := threadPrefix(c.Tenant, a.Thread)
	var keys []string
	f.st.Scan(prefix, "", func(k string, _ []byte) bool { keys = append(keys, k); return true })
	if len(keys) == 0 {
		return fail(CodeNotFound, fmt.Sprintf("thread %q not found", a.Thread), nil)
	}
	for _, k := range keys {
		f.st.Delete(k)
		if id, ok := strings.CutPrefix(k, prefix+"c/"); ok {
			f.emit(c.Tenant, ResourceCheckpoints, a.Thread+"/"+id, a.Thread, EventDelete, nil)
		}
	}
	return okValue(OutcomeNoContent, nil)
}

// GetCheckpoint returns a checkpoint with its pending writes; id "latest"
// is not special here (the server resolves it with ThreadHead).
func (f *FSM) GetCheckpoint(tenant, thread, id string) (*CheckpointView, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := getCheckpoint(f.st, tenant, thread, id)
	if !ok {
		return nil, f.applied, false
	}
	v := &CheckpointView{Checkpoint: c, Pending: []PendingWrites{}}
	prefix := cpWritesPrefix(tenant, thread, id)
	f.st.Scan(prefix, "", func(k string, val []byte) bool {
		v.Pending = append(v.Pending, PendingWrites{TaskID: k[len(prefix):], Writes: val})
		return true
	})
	return v, f.applied, true
}

// ThreadHead is the id of a thread's newest checkpoint ("" if none).
func (f *FSM) ThreadHead(tenant, thread string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return threadHead(f.st, tenant, thread)
}

// ListCheckpoints lists a thread's checkpoints newest first, older than
// before (a checkpoint id) when given, at most limit.
func (f *FSM) ListCheckpoints(tenant, thread, before string, limit int) ([]CheckpointView, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := threadPrefix(tenant, thread) + "o/"
	from := ""
	if before != "" {
		c, ok := getCheckpoint(f.st, tenant, thread, before)
		if !ok {
			return nil, f.applied, false
		}
		from = cpOrderKey(c) + "\x00"
	}
	out := []CheckpointView{}
	f.st.Scan(prefix, from, func(k string, _ []byte) bool {
		id := k[strings.LastIndexByte(k, '/')+1:]
		if c, ok := getCheckpoint(f.st, tenant, thread, id); ok {
			out = append(out, CheckpointView{Checkpoint: c})
		}
		return len(out) < limit
	})
	return out, f.applied, true
}

func (a *CheckpointPutArgs) jsonFields() [][]byte    { return [][]byte{a.Data, a.Metadata} }
func (a *CheckpointWritesArgs) jsonFields() [][]byte { return [][]byte{a.Writes} }
