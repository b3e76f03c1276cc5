package fsm

import (
	"encoding/json"
	"strconv"
)

// Task is a task record. Times are Unix ms stamped by the leader.
type Task struct {
	Tenant       string
	ID           string
	Queue        string
	Status       string
	Owner        string
	LeaseUntil   int64 // 0: no lease
	FencingToken uint64
	Version      uint64
	Attempt      uint64
	Priority     int64
	ArtifactID   string
	Payload      []byte // JSON
	Result       []byte // JSON, nil = null
	CreatedAt    int64
	UpdatedAt    int64
	// Seq orders tasks of equal priority by age: the log position (index<<16
	// | sequence) of the command that created the task.
	Seq uint64
	// Life holds attempts, backoff and availability (lifecycle.go); nil
	// for a task that uses none, whose record then has the 16 fields it
	// had before.
	Life *TaskLife `codec:",omitempty"`
	// ClaimedFrom is the status the task had before a claim set another
	// (set_status, in an EntryVersion5 entry), while that claim's holder
	// has it: with a lease, the task is also indexed under this status
	// (claimedKey), so that once the lease runs out a claim of that status
	// takes it again. Cleared by a write that changes the status without
	// a claim, or leaves the task without an owner.
	ClaimedFrom string `codec:",omitempty"`
	// CancelRequested: a cancellation was asked while the task was leased
	// (cancel.go); its holder ends it. Only on a task with an owner.
	CancelRequested bool `codec:",omitempty"`
	// Deps: the task's dependencies (deps.go); nil for a task created
	// without any.
	Deps *TaskDeps `codec:",omitempty"`
	// Waitpoint: the waitpoint the task was last parked on
	// (waitpoints.go); Parked while it waits there.
	Waitpoint string `codec:",omitempty"`
	Parked    bool   `codec:",omitempty"`
	// ConcurrencyKey groups tasks for their queue's per-key limit of
	// leased tasks (flow.go); set at creation.
	ConcurrencyKey string `codec:",omitempty"`
}

// taskJSON is the wire form of a task (docs/api.md "Tasks").
type taskJSON struct {
	TenantID     string          `json:"tenant_id"`
	TaskID       string          `json:"task_id"`
	Queue        string          `json:"queue"`
	Status       string          `json:"status"`
	Owner        string          `json:"owner"`
	LeaseUntil   *string         `json:"lease_until"`
	FencingToken uint64          `json:"fencing_token"`
	Version      uint64          `json:"version"`
	Attempt      uint64          `json:"attempt"`
	Priority     int64           `json:"priority"`
	ArtifactID   string          `json:"artifact_id"`
	Payload      json.RawMessage `json:"payload"`
	Result       json.RawMessage `json:"result"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
	MaxAttempts  uint64          `json:"max_attempts"`
	BackoffInit  int64           `json:"backoff_initial_ms"`
	BackoffMax   int64           `json:"backoff_max_ms"`
	AvailableAt  *string         `json:"available_at"`
	LastError    string          `json:"last_error"`
	FailedAt     *string         `json:"failed_at"`
	// Retention: left out when unset, so that the answer about a task
	// without it (which an Idempotency-Key record keeps) is the bytes it
	// was before.
	RetentionMs int64   `json:"retention_ms,omitempty"`
	ExpiresAt   *string `json:"expires_at,omitempty"`
	// Cancellation (cancel.go): left out unless requested, likewise.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Dependencies (deps.go): left out for a task created without any.
	DependsOnCount   uint64  `json:"depends_on_count,omitempty"`
	DependenciesLeft *uint64 `json:"dependencies_left,omitempty"`
	DependencyPolicy string  `json:"dependency_policy,omitempty"`
	// Waitpoints (waitpoints.go): left out unless parked on one.
	WaitpointID string `json:"waitpoint_id,omitempty"`
	Parked      bool   `json:"parked,omitempty"`
	// Flow control (flow.go): left out unless set.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
}

// MarshalJSON renders the wire form, taskJSON.
func (t *Task) MarshalJSON() ([]byte, error) {
	w := t.wire()
	if b, ok := w.appendPlain(make([]byte, 0, 640+len(w.Payload)+len(w.Result))); ok {
		return b, nil
	}
	return json.Marshal(w)
}

// wire is t's wire form.
func (t *Task) wire() *taskJSON {
	w := &taskJSON{TenantID: t.Tenant, TaskID: t.ID, Queue: t.Queue, Status: t.Status, Owner: t.Owner,
		FencingToken: t.FencingToken, Version: t.Version, Attempt: t.Attempt, Priority: t.Priority,
		ArtifactID: t.ArtifactID, Payload: t.Payload, Result: t.Result,
		CreatedAt: FormatMillis(t.CreatedAt), UpdatedAt: FormatMillis(t.UpdatedAt), CancelRequested: t.CancelRequested,
		WaitpointID: t.Waitpoint, Parked: t.Parked, ConcurrencyKey: t.ConcurrencyKey}
	if t.LeaseUntil != 0 {
		s := FormatMillis(t.LeaseUntil)
		w.LeaseUntil = &s
	}
	if l := t.Life; l != nil {
		w.MaxAttempts, w.BackoffInit, w.BackoffMax, w.LastError = l.MaxAttempts, l.BackoffInitialMs, l.BackoffMaxMs, l.LastError
		if l.AvailableAt != 0 {
			s := FormatMillis(l.AvailableAt)
			w.AvailableAt = &s
		}
		if l.FailedAt != 0 {
			s := FormatMillis(l.FailedAt)
			w.FailedAt = &s
		}
		w.RetentionMs = l.RetentionMs
		if l.ExpiresAt != 0 {
			s := FormatMillis(l.ExpiresAt)
			w.ExpiresAt = &s
		}
	}
	if d := t.Deps; d != nil {
		left := d.Left
		w.DependsOnCount, w.DependenciesLeft, w.DependencyPolicy = d.Total, &left, d.Policy
		if w.DependencyPolicy == "" {
			w.DependencyPolicy = DepPolicyFail
		}
	}
	if len(w.Payload) == 0 {
		w.Payload = json.RawMessage("{}")
	}
	if len(w.Result) == 0 {
		w.Result = json.RawMessage("null")
	}
	return w
}

// appendPlain appends json.Marshal(w)'s bytes to b when every string of w
// is plain ASCII that encoding/json writes as is, and the payload and the
// result are valid JSON that it would copy unchanged (no spaces to
// compact, nothing to escape); false otherwise, for json.Marshal to
// write. Every replica encodes the answer to every task write (its client
// session keeps it); encoding/json's reflection was most of that cost
// (perf, cas C=64 and queue W=64). TestMustJSONTask checks the bytes.
func (w *taskJSON) appendPlain(b []byte) ([]byte, bool) {
	p := plainJSON{b: b, ok: true}
	str, optStr, raw := p.str, p.optStr, p.raw
	str(`{"tenant_id":`, w.TenantID)
	str(`,"task_id":`, w.TaskID)
	str(`,"queue":`, w.Queue)
	str(`,"status":`, w.Status)
	str(`,"owner":`, w.Owner)
	optStr(`,"lease_until":`, w.LeaseUntil)
	p.b = strconv.AppendUint(append(p.b, `,"fencing_token":`...), w.FencingToken, 10)
	p.b = strconv.AppendUint(append(p.b, `,"version":`...), w.Version, 10)
	p.b = strconv.AppendUint(append(p.b, `,"attempt":`...), w.Attempt, 10)
	p.b = strconv.AppendInt(append(p.b, `,"priority":`...), w.Priority, 10)
	str(`,"artifact_id":`, w.ArtifactID)
	raw(`,"payload":`, w.Payload)
	raw(`,"result":`, w.Result)
	str(`,"created_at":`, w.CreatedAt)
	str(`,"updated_at":`, w.UpdatedAt)
	p.b = strconv.AppendUint(append(p.b, `,"max_attempts":`...), w.MaxAttempts, 10)
	p.b = strconv.AppendInt(append(p.b, `,"backoff_initial_ms":`...), w.BackoffInit, 10)
	p.b = strconv.AppendInt(append(p.b, `,"backoff_max_ms":`...), w.BackoffMax, 10)
	optStr(`,"available_at":`, w.AvailableAt)
	str(`,"last_error":`, w.LastError)
	optStr(`,"failed_at":`, w.FailedAt)
	if w.RetentionMs != 0 {
		p.b = strconv.AppendInt(append(p.b, `,"retention_ms":`...), w.RetentionMs, 10)
	}
	if w.ExpiresAt != nil {
		str(`,"expires_at":`, *w.ExpiresAt)
	}
	if w.CancelRequested {
		p.b = append(p.b, `,"cancel_requested":true`...)
	}
	if w.DependsOnCount != 0 {
		p.b = strconv.AppendUint(append(p.b, `,"depends_on_count":`...), w.DependsOnCount, 10)
	}
	if w.DependenciesLeft != nil {
		p.b = strconv.AppendUint(append(p.b, `,"dependencies_left":`...), *w.DependenciesLeft, 10)
	}
	if w.DependencyPolicy != "" {
		str(`,"dependency_policy":`, w.DependencyPolicy)
	}
	if w.WaitpointID != "" {
		str(`,"waitpoint_id":`, w.WaitpointID)
	}
	if w.Parked {
		p.b = append(p.b, `,"parked":true`...)
	}
	if w.ConcurrencyKey != "" {
		str(`,"concurrency_key":`, w.ConcurrencyKey)
	}
	return append(p.b, '}'), p.ok
}

// plainJSON is appendPlain's writer: ok turns false at the first value
// that it does not write as encoding/json would.
type plainJSON struct {
	b  []byte
	ok bool
}

// str writes name and v, a string of plain ASCII.
func (p *plainJSON) str(name, v string) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			p.ok = false
			return
		}
	}
	p.b = append(append(append(append(p.b, name...), '"'), v...), '"')
}

// optStr writes name and v, or null.
func (p *plainJSON) optStr(name string, v *string) {
	if v == nil {
		p.b = append(append(p.b, name...), "null"...)
		return
	}
	p.str(name, *v)
}

// raw writes name and v, valid JSON of plain ASCII with no space outside
// its strings (encoding/json's compact form) and nothing to escape.
func (p *plainJSON) raw(name string, v json.RawMessage) {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c > 0x7e || c == '<' || c == '>' || c == '&':
			p.ok = false
			return
		case c <= ' ' && !inString: // compacted away (or invalid)
			p.ok = false
			return
		case c == '\\' && inString:
			i++
		case c == '"':
			inString = !inString
		}
	}
	if !json.Valid(v) {
		p.ok = false
		return
	}
	p.b = append(append(p.b, name...), v...)
}

// leaseLive reports whether someone holds a live lease at now.
func (t *Task) leaseLive(now int64) bool { return t.Owner != "" && t.LeaseUntil > now }

// Keys of tasks and their queue indexes. A task is in exactly one of:
//
//	t/<tenant>/q/<queue>/<status>/r/<prio>/<seq>/<id>    no lease: ready
//	t/<tenant>/q/<queue>/<status>/l/<lease until>/<id>   leased (live or expired)
//	t/<tenant>/q/<queue>/<status>/d/<available at>/<id>  no lease, delayed (due or not)
//	t/<tenant>/q/<queue>/<status>/b/<id>                 no lease, waits on dependencies (deps.go)
//
// <prio> sorts the highest priority first, <seq> the oldest first, so a
// queue claim reads the first ready key of each asked status plus the
// leases that already expired, never every task.
func taskKey(tenant, id string) string { return "t/" + tenant + "/task/" + id }
func taskPrefix(tenant string) string  { return "t/" + tenant + "/task/" }
func queuePrefix(tenant, queue, status string) string {
	return "t/" + tenant + "/q/" + queue + "/" + status + "/"
}

// appendQueuePrefix appends queuePrefix(tenant, queue, status) (one
// allocation fewer in indexKey; TestKeyFormats holds the two together).
func appendQueuePrefix(b []byte, tenant, queue, status string) []byte {
	b = append(b, "t/"...)
	b = append(b, tenant...)
	b = append(b, "/q/"...)
	b = append(b, queue...)
	b = append(b, '/')
	b = append(b, status...)
	return append(b, '/')
}

func prioKey(p int64) string { return hexU16(prioBits(p)) }

// prioBits orders priorities high to low as unsigned keys.
func prioBits(p int64) uint64 { return ^(uint64(p) ^ (1 << 63)) }

func (t *Task) indexKey() string {
	// One allocation: queuePrefix(...) + "r/" + prio + "/" + seq + "/" + id
	// or queuePrefix(...) + "l/" + lease + "/" + id.
	b := make([]byte, 0, 2+len(t.Tenant)+3+len(t.Queue)+1+len(t.Status)+1+2+34+1+len(t.ID))
	b = appendQueuePrefix(b, t.Tenant, t.Queue, t.Status)
	if t.blocked() {
		b = append(b, "b/"...) // waits on dependencies (deps.go): no claim reads b/
		return string(append(b, t.ID...))
	}
	if at := t.availableAt(); at != 0 && t.Owner == "" && t.LeaseUntil == 0 {
		b = append(b, "d/"...)
		b = appendHex16(b, uint64(at))
	} else if t.Owner == "" && t.LeaseUntil == 0 {
		b = append(b, "r/"...)
		b = appendHex16(b, prioBits(t.Priority))
		b = append(b, '/')
		b = appendHex16(b, t.Seq)
	} else {
		b = append(b, "l/"...)
		b = appendHex16(b, uint64(t.LeaseUntil))
	}
	b = append(b, '/')
	return string(append(b, t.ID...))
}

// claimedKey is the task's entry in the index of tasks whose claim moved
// them out of a status (ClaimedFrom), by lease end:
//
//	t/<tenant>/qx/<queue>/<claimed from>/<lease until>/<id>
//
// or "" when it has none. A queue claim of that status reads the leases of
// it that ran out (bestClaimable).
func (t *Task) claimedKey() string {
	if t.ClaimedFrom == "" || t.ClaimedFrom == t.Status || t.Owner == "" || t.LeaseUntil == 0 {
		return ""
	}
	return string(appendHex16([]byte(claimedPrefix(t.Tenant, t.Queue, t.ClaimedFrom)), uint64(t.LeaseUntil))) + "/" + t.ID
}

func claimedPrefix(tenant, queue, status string) string {
	return "t/" + tenant + "/qx/" + queue + "/" + status + "/"
}

// claimedMarkerKey is present once a task record has ClaimedFrom, which an
// older member would drop: a snapshot of the state is then
// snapshotFormat4, which it refuses.
const claimedMarkerKey = "cfg/claimedfrom"

func getTask(st *Store, tenant, id string) (*Task, bool) {
	raw, ok := st.getStored(taskKey(tenant, id))
	if !ok {
		return nil, false
	}
	var t Task
	// From the stored form when it can (no copy of the record); what it
	// reads is what decoding the record reads (FuzzCodecs).
	if !decodeStoredTask(raw, &t) && decode(unpackVal(raw), &t) != nil {
		return nil, false
	}
	return &t, true
}

// claimedKeyOrNone is t.claimedKey(), or "" for no task.
func (t *Task) claimedKeyOrNone() string {
	if t == nil {
		return ""
	}
	return t.claimedKey()
}

// putTask stores t and moves its index entry from old's (nil: new task).
// An update that keeps the task's queue position keeps the entry as it is.
func (f *FSM) putTask(old, t *Task) {
	if t.ClaimedFrom != "" && (t.Owner == "" || old != nil && old.Status != t.Status && old.FencingToken == t.FencingToken) {
		// Released, finished, failed or given another status by its
		// holder: the claim that moved it is over.
		t.ClaimedFrom = ""
	}
	if ck, oldCK := t.claimedKey(), old.claimedKeyOrNone(); ck != oldCK {
		if oldCK != "" {
			f.st.Delete(oldCK)
		}
		if ck != "" {
			f.st.Put(ck, nil)
		}
	}
	if t.Owner == "" {
		t.CancelRequested = false // ended with the lease (releaseCancelled)
	}
	f.moveCancel(old, t)
	if t.ClaimedFrom != "" && !f.st.Has(claimedMarkerKey) {
		f.st.Put(claimedMarkerKey, []byte{1})
	}
	f.retain(old, t, f.clock) // f.clock is the command's time (ctx.now)
	f.stats.noteTask(old, t, f.clock)
	f.queues.note(old, t)
	f.moveExpiry(old, t)
	if t.Life != nil && !f.st.Has(lifecycleMarkerKey) {
		f.st.Put(lifecycleMarkerKey, []byte{1})
	}
	f.st.Put(taskKey(t.Tenant, t.ID), encode(t))
	idx := t.indexKey()
	var oldIdx string
	if old != nil {
		oldIdx = old.indexKey()
	}
	if oldIdx != idx {
		if old != nil {
			f.st.Delete(oldIdx)
		}
		f.st.Put(idx, nil)
	}
	f.emit(t.Tenant, ResourceTasks, t.ID, t.Queue, EventPut, t)
	f.noteDependents(old, t)
}

func (f *FSM) deleteTask(t *Task) {
	f.stats.noteTask(t, nil, f.clock)
	f.queues.note(t, nil)
	f.moveExpiry(t, nil)
	f.moveCancel(t, nil)
	f.st.Delete(t.indexKey())
	if ck := t.claimedKey(); ck != "" {
		f.st.Delete(ck)
	}
	f.st.Delete(taskKey(t.Tenant, t.ID))
	f.emit(t.Tenant, ResourceTasks, t.ID, t.Queue, EventDelete, nil)
	f.noteDependents(t, nil)
}

// Watchable resources (docs/api.md "Watch").
const (
	ResourceTasks       = "tasks"
	ResourceKV          = "kv"
	ResourceCheckpoints = "checkpoints"
	ResourceOps         = "ops"
	ResourceRefs        = "refs"
	ResourceArtifacts   = "artifacts"
	ResourceWaitpoints  = "waitpoints"
)
