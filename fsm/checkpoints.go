package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Checkpoint command kinds.
const (
	KindCheckpointPut    Kind = "checkpoint.put"
	KindCheckpointWrites Kind = "checkpoint.writes"
	KindThreadDelete     Kind = "thread.delete"
)

// Checkpoint is one link of the append-only chain of a thread's namespace.
type Checkpoint struct {
	Tenant, Thread, ID, ParentID string
	Data, Metadata               []byte // JSON
	Seq                          uint64 // log position: orders a namespace's checkpoints
	CreatedAt                    int64
	// NS is the checkpoint namespace (LangGraph's checkpoint_ns), "" for the
	// default one. Chunks, when set, hold Data's bytes in the chunk store
	// instead (Data is then empty): the record counts as a reference of
	// each chunk, so chunk GC keeps them until the thread is deleted. Both
	// are left out of a record that has none (omitempty), so records
	// without them are the bytes they always were; a record with either
	// puts checkpointMarkerKey.
	NS     string     `codec:",omitempty"`
	Chunks []ChunkRef `codec:",omitempty"`
	// RunID is the metadata's run_id (LangGraph's), when it has one: the
	// checkpoint is in its run's index (threads.go). Came with version 5,
	// and a record with it puts checkpoints5MarkerKey.
	RunID string `codec:",omitempty"`
	// ExpiresAt is when a retention policy's max age deletes the
	// checkpoint (cpretention.go), 0 for never. Came with version 5.
	ExpiresAt int64 `codec:",omitempty"`
	// BlobRefs names the channel values the checkpoint holds, stored once
	// per version of its namespace (cpblobs.go). Came with version 5.
	BlobRefs []BlobRef `codec:",omitempty"`
}

// PendingWrite is one write a task made in the step after a checkpoint
// (LangGraph's pending write: task id, channel, value), at index Idx of
// the task's writes. Negative indexes are LangGraph's special channels
// (error, scheduled, interrupt, resume).
//
// A write is a JSON value (Value), or bytes of a serializer's type (Type
// and Bytes, LangGraph's (type, bytes)), which came with version 6.
type PendingWrite struct {
	TaskID   string          `json:"task_id"`
	TaskPath string          `json:"task_path,omitempty"`
	Idx      int64           `json:"idx"`
	Channel  string          `json:"channel"`
	Value    json.RawMessage `json:"value,omitempty"`
	Type     string          `json:"type,omitempty"`
	Bytes    []byte          `json:"b64,omitempty"` // base64 in JSON, bin in msgpack
}

// CheckpointWrite is one write of a checkpoint.writes command.
// Type, with EntryVersion6, says Value is bytes of that serializer's type
// rather than JSON.
type CheckpointWrite struct {
	Idx     int64
	Channel string
	Value   []byte // JSON, or bytes when Type is set
	Type    string `codec:",omitempty"`
}

// cpWriteRecord is a pending write as stored, at cpWriteKey. Type, set
// only for a write of bytes, puts checkpoints6MarkerKey.
type cpWriteRecord struct {
	Channel  string
	Value    []byte
	TaskPath string `codec:",omitempty"`
	Type     string `codec:",omitempty"`
}

// checkpointJSON is the API's form. checkpoint_ns and data_chunks are
// left out when empty, so the answers for checkpoints without them (which
// idempotency records keep in the replicated state) are the bytes they
// were before namespaces. The fields before data are all strings: see
// server.writeCheckpointStreamed.
type checkpointJSON struct {
	ThreadID      string          `json:"thread_id"`
	NS            string          `json:"checkpoint_ns,omitempty"`
	CheckpointID  string          `json:"checkpoint_id"`
	ParentID      string          `json:"parent_id"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAt     string          `json:"created_at"`
	DataChunks    []ChunkRef      `json:"data_chunks,omitempty"`
	ExpiresAt     string          `json:"expires_at,omitempty"`
	Blobs         []BlobView      `json:"blobs,omitempty"`
	PendingWrites []PendingWrite  `json:"pending_writes,omitempty"`
}

// CheckpointView is a checkpoint as the API returns it, with its pending
// writes when read one at a time (LangGraph's get_tuple) or listed with
// them.
type CheckpointView struct {
	*Checkpoint
	Pending []PendingWrite
	Blobs   []BlobView // the values it names, joined (answers, not events)
}

// MarshalJSON renders the checkpoint of docs/api.md.
func (v CheckpointView) MarshalJSON() ([]byte, error) {
	c := v.Checkpoint
	out := checkpointJSON{ThreadID: c.Thread, NS: c.NS, CheckpointID: c.ID, ParentID: c.ParentID,
		Data: jsonOrNull(c.Data), Metadata: jsonOrEmpty(c.Metadata), CreatedAt: FormatMillis(c.CreatedAt),
		DataChunks: c.Chunks, PendingWrites: v.Pending, Blobs: v.Blobs}
	if c.ExpiresAt != 0 {
		out.ExpiresAt = FormatMillis(c.ExpiresAt)
	}
	return json.Marshal(out)
}

func jsonOrEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// CheckpointPutArgs appends a checkpoint. NS and Chunks came with
// EntryVersion4 (see entryVersion); Data is empty when Chunks is set.
type CheckpointPutArgs struct {
	Thread, ID, ParentID string
	Data, Metadata       []byte
	Fork                 bool
	Fence                *Fence
	NS                   string     `codec:",omitempty"`
	Chunks               []ChunkRef `codec:",omitempty"`
	// RunID is the metadata's run_id (the server reads it), with
	// EntryVersion5.
	RunID string `codec:",omitempty"`
	// Blobs are the new channel values of the put, BlobRefs every value
	// the checkpoint names (sorted by channel), with EntryVersion5.
	Blobs    []CheckpointBlob `codec:",omitempty"`
	BlobRefs []BlobRef        `codec:",omitempty"`
}

// CheckpointWritesArgs records a task's pending writes. NS came with
// EntryVersion4; Entries and TaskPath with EntryVersion5, in a command
// whose Writes is nil. Writes, a JSON array recorded whole and once per
// task, is how entries before version 5 recorded them.
type CheckpointWritesArgs struct {
	Thread, ID, TaskID string
	Writes             []byte
	Fence              *Fence
	NS                 string            `codec:",omitempty"`
	Entries            []CheckpointWrite `codec:",omitempty"`
	TaskPath           string            `codec:",omitempty"`
}

// ThreadDeleteArgs deletes a whole thread: every namespace of it, in one
// command.
type ThreadDeleteArgs struct {
	Thread string
	Fence  *Fence
}

// MaxThreadChunkRefs bounds the chunk references the checkpoints of one
// thread hold together (their data_chunks, every namespace counted): a
// thread delete releases them all in one command, so this bounds its work.
// A put past it is refused with resource_exhausted. Kept at
// threadRefsKey.
const MaxThreadChunkRefs = 65_536

// The checkpoint args' entry versions: a namespace, chunked data, or a
// thread id outside the name grammar of older members (which stored it
// unescaped in keys, see threadPrefix) need EntryVersion4, so that an
// older member refuses the entry instead of applying it to other keys.
func (a *CheckpointPutArgs) entryVersion() byte {
	for _, b := range a.Blobs {
		if len(b.Chunks) > 0 {
			return EntryVersion6
		}
	}
	if a.RunID != "" || len(a.Blobs) > 0 || len(a.BlobRefs) > 0 {
		return EntryVersion5
	}
	return cpVersion(a.Thread, a.NS, len(a.Chunks) > 0)
}
func (a *CheckpointWritesArgs) entryVersion() byte {
	for _, e := range a.Entries {
		if e.Type != "" { // bytes
			return EntryVersion6
		}
	}
	if a.Writes == nil { // writes by index, possibly none
		return EntryVersion5
	}
	return cpVersion(a.Thread, a.NS, false)
}
func (a *ThreadDeleteArgs) entryVersion() byte { return cpVersion(a.Thread, "", false) }

func cpVersion(thread, ns string, chunks bool) byte {
	if ns != "" || chunks || escapeKeySegment(thread) != thread {
		return EntryVersion4
	}
	return 0
}

// checkpointMarkerKey is present once a checkpoint record has a namespace
// or chunked data, or a thread id is escaped in keys: snapshots of such a
// state are snapshotFormat3, which an older member refuses (it would drop
// the fields, and lose the chunk references).
const checkpointMarkerKey = "cfg/checkpoints4"

// checkpoints5MarkerKey is present once a pending write is stored by
// index (cpWriteKey), which an older member would read as the writes of a
// task whose id holds a "/", or a checkpoint has a run id (which it would
// drop, leaving its run index behind): a snapshot of the state is then
// snapshotFormat4, which it refuses.
const checkpoints5MarkerKey = "cfg/checkpoints5"

// checkpoints6MarkerKey is present once a pending write of bytes (a Type)
// is stored, which an older member would answer as a JSON value, or a
// blob held in chunks, whose chunks it would never release: a snapshot of
// the state is then snapshotFormat5, which it refuses.
const checkpoints6MarkerKey = "cfg/checkpoints6"

func (f *FSM) markCheckpoints6() {
	if !f.st.Has(checkpoints6MarkerKey) {
		f.st.Put(checkpoints6MarkerKey, []byte{1})
	}
}

func (f *FSM) markCheckpoints5() {
	if !f.st.Has(checkpoints5MarkerKey) {
		f.st.Put(checkpoints5MarkerKey, []byte{1})
	}
}

func (f *FSM) markCheckpoints4(thread, ns string, chunks bool) {
	if cpVersion(thread, ns, chunks) != 0 && !f.st.Has(checkpointMarkerKey) {
		f.st.Put(checkpointMarkerKey, []byte{1})
	}
}

// Keys of a thread's namespace, <nsp> below:
//
//	t/<tenant>/th/<thread>/                    the default namespace ("")
//	t/<tenant>/th/<thread>/n/<ns>/             any other
//
// and under it
//
//	<nsp>h                       head checkpoint id
//	<nsp>c/<id>                  checkpoint
//	<nsp>o/<^seq>/<id>           newest-first order
//	<nsp>w/<id>/<task id>        pending writes
//
// and t/<tenant>/th/<thread>/r, the thread's chunk references
// (threadRefsKey).
//
// <thread> and <ns> are escaped (escapeKeySegment): any UTF-8, "/"
// included, without colliding with another thread or namespace. A name of
// the old grammar ([A-Za-z0-9._:-]) escapes to itself, so existing threads
// keep their keys. Checkpoint and task ids are names (no "/").
func threadPrefix(tenant, thread string) string {
	return "t/" + tenant + "/th/" + escapeKeySegment(thread) + "/"
}

// threadRefsKey holds the chunk references of a thread's checkpoints, a
// big-endian uint64 (absent: none). It sits under the thread's prefix, so
// a thread delete removes it with the rest.
func threadRefsKey(tenant, thread string) string { return threadPrefix(tenant, thread) + "r" }

func threadChunkRefs(st *Store, tenant, thread string) uint64 {
	if v, ok := st.Get(threadRefsKey(tenant, thread)); ok && len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func nsPrefix(tenant, thread, ns string) string {
	if ns == "" {
		return threadPrefix(tenant, thread)
	}
	return threadPrefix(tenant, thread) + "n/" + escapeKeySegment(ns) + "/"
}
func cpKey(tenant, thread, ns, id string) string { return nsPrefix(tenant, thread, ns) + "c/" + id }
func cpHeadKey(tenant, thread, ns string) string { return nsPrefix(tenant, thread, ns) + "h" }
func cpOrderKey(c *Checkpoint) string {
	return nsPrefix(c.Tenant, c.Thread, c.NS) + "o/" + fmt.Sprintf("%016x", ^c.Seq) + "/" + c.ID
}
func cpWritesPrefix(tenant, thread, ns, id string) string {
	return nsPrefix(tenant, thread, ns) + "w/" + id + "/"
}

// cpWriteKey is where a pending write is stored: under its checkpoint's
// writes, <task id>/<idx>, idx as 16 hex digits of idx+2^63, so that a
// task's writes sort by index, negative ones first (LangGraph reads them
// ordered by task id, then index). A task's writes recorded whole by an
// entry before version 5 are at <task id> alone.
func cpWriteKey(tenant, thread, ns, id, taskID string, idx int64) string {
	return cpWritesPrefix(tenant, thread, ns, id) + taskID + "/" + fmt.Sprintf("%016x", uint64(idx)^(1<<63))
}

// escapeKeySegment writes every byte outside [A-Za-z0-9._:-] as %XX
// (upper-case hex), "%" included: the result has no "/", decodes to one
// string only, and a name of the old grammar is unchanged.
func escapeKeySegment(s string) string {
	if nameBytes(s) {
		return s
	}
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); i++ {
		if c := s[i]; nameByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return string(b)
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
}

func nameBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func getCheckpoint(st *Store, tenant, thread, ns, id string) (*Checkpoint, bool) {
	raw, ok := st.Get(cpKey(tenant, thread, ns, id))
	if !ok {
		return nil, false
	}
	var c Checkpoint
	if decode(raw, &c) != nil {
		return nil, false
	}
	return &c, true
}

func threadHead(st *Store, tenant, thread, ns string) string {
	raw, _ := st.Get(cpHeadKey(tenant, thread, ns))
	return string(raw)
}

func sameCheckpoint(c *Checkpoint, a *CheckpointPutArgs) bool {
	return c.ParentID == a.ParentID && bytes.Equal(c.Data, a.Data) && bytes.Equal(c.Metadata, a.Metadata) &&
		slices.Equal(c.Chunks, a.Chunks) && slices.Equal(c.BlobRefs, a.BlobRefs)
}

// cpEventKey is a checkpoint's key in watch events: thread/id in the
// default namespace (as before namespaces), thread/ns/id in another.
func cpEventKey(thread, ns, id string) string {
	if ns == "" {
		return thread + "/" + id
	}
	return thread + "/" + ns + "/" + id
}

func applyCheckpointPut(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a CheckpointPutArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if cur, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.NS, a.ID); ok {
		if sameCheckpoint(cur, &a) {
			return okValue(OutcomeOK, CheckpointView{Checkpoint: cur})
		}
		return fail(CodeAlreadyExists, fmt.Sprintf("checkpoint %q exists with other content", a.ID), nil)
	}
	head := threadHead(f.st, c.Tenant, a.Thread, a.NS)
	switch {
	case !a.Fork && a.ParentID != head:
		return fail(CodeVersionMismatch, fmt.Sprintf("parent %q is not the head of thread %q%s (head %q)", a.ParentID, a.Thread, nsText(a.NS), head),
			map[string]any{"current_head": head})
	case a.Fork && a.ParentID != "":
		if _, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.NS, a.ParentID); !ok {
			return fail(CodeNotFound, fmt.Sprintf("fork parent %q not found", a.ParentID), nil)
		}
	}
	if len(a.Chunks) > 0 {
		if len(a.Data) > 0 {
			return fail(CodeInvalidArgument, "a checkpoint has data or data chunks, not both", nil)
		}
		refs := threadChunkRefs(f.st, c.Tenant, a.Thread)
		if refs+uint64(len(a.Chunks)) > MaxThreadChunkRefs {
			return fail(CodeResourceExhausted, fmt.Sprintf("thread %q holds %d chunk references; %d more would pass the %d a thread may hold (delete it, or use another thread)",
				a.Thread, refs, len(a.Chunks), MaxThreadChunkRefs), nil)
		}
		f.st.Put(threadRefsKey(c.Tenant, a.Thread), binary.BigEndian.AppendUint64(nil, refs+uint64(len(a.Chunks))))
		if r := f.holdCheckpointChunks(c.Tenant, a.Chunks); r != nil {
			return r
		}
	}
	if !validBlobRefs(a.BlobRefs) {
		return fail(CodeInvalidArgument, "blob_versions must be sorted by channel, each channel once", nil)
	}
	if r := f.putBlobs(c.Tenant, a.Thread, a.NS, a.Blobs, a.BlobRefs); r != nil {
		return r
	}
	cp := &Checkpoint{Tenant: c.Tenant, Thread: a.Thread, NS: a.NS, ID: a.ID, ParentID: a.ParentID, Data: a.Data,
		Metadata: a.Metadata, Chunks: a.Chunks, Seq: ctx.nextSeq(), CreatedAt: ctx.now, RunID: a.RunID, BlobRefs: a.BlobRefs}
	policy := f.retainCheckpoint(ctx, cp)
	f.markCheckpoints4(a.Thread, a.NS, len(a.Chunks) > 0)
	f.indexRun(cp)
	f.indexExpiry(cp)
	f.st.Put(cpKey(c.Tenant, a.Thread, a.NS, a.ID), encode(cp))
	f.st.Put(cpOrderKey(cp), nil)
	f.st.Put(cpHeadKey(c.Tenant, a.Thread, a.NS), []byte(a.ID))
	v := CheckpointView{Checkpoint: cp}
	f.emit(c.Tenant, ResourceCheckpoints, cpEventKey(a.Thread, a.NS, a.ID), a.Thread, EventPut, v)
	f.trimNamespace(ctx, policy, c.Tenant, a.Thread, a.NS)
	return okValue(OutcomeCreated, v)
}

// nsText names a namespace in a message ("" for the default one).
func nsText(ns string) string {
	if ns == "" {
		return ""
	}
	return fmt.Sprintf(" (namespace %q)", ns)
}

// holdCheckpointChunks checks that the tenant holds every chunk, with the
// size given, and counts the checkpoint as a reference of each: a
// referenced chunk is out of chunk GC's reach (referenceChunk) until
// releaseCheckpointChunks.
func (f *FSM) holdCheckpointChunks(tenant string, chunks []ChunkRef) *Result {
	var missing []string
	for i, ch := range chunks {
		h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, ch.Digest))
		switch {
		case !ok:
			missing = append(missing, ch.Digest)
		case h.Size != ch.Size:
			return fail(CodeInvalidArgument, fmt.Sprintf("data_chunks[%d] has size %d, the held chunk %d", i, ch.Size, h.Size), nil)
		}
	}
	if len(missing) > 0 {
		return fail(CodeMissingChunks, fmt.Sprintf("%d chunks are not held by this tenant", len(missing)),
			map[string]any{"missing": missing})
	}
	for _, ch := range chunks {
		f.referenceChunk(tenant, ch.Digest)
	}
	return nil
}

// releaseCheckpointChunks drops a deleted checkpoint's references. A chunk
// nothing references any more goes back into the GC index as if held
// now, so a client that was told the tenant holds it has the whole grace
// period to name it again.
func (f *FSM) releaseCheckpointChunks(ctx *applyCtx, tenant string, chunks []ChunkRef) {
	for _, ch := range chunks {
		h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, ch.Digest))
		if !ok || h.Refs == 0 {
			continue
		}
		h.Refs--
		if h.Refs == 0 {
			h.HeldAt = ctx.now
			f.st.Put(chunkGCKey(h.HeldAt, tenant, ch.Digest), nil)
		}
		f.st.Put(chunkHoldKey(tenant, ch.Digest), encode(h))
	}
}

func applyCheckpointWrites(f *FSM, _ *applyCtx, c *Command) *Result {
	var a CheckpointWritesArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if a.Writes != nil {
		if _, ok := getCheckpoint(f.st, c.Tenant, a.Thread, a.NS, a.ID); !ok {
			return fail(CodeNotFound, fmt.Sprintf("checkpoint %q not found in thread %q%s", a.ID, a.Thread, nsText(a.NS)), nil)
		}
		return f.applyWholeWrites(c, &a)
	}
	// Writes by index may come before their checkpoint: LangGraph saves a
	// step's checkpoint in the background while the next step's tasks
	// record their writes on it (as its own savers, which have no such
	// constraint, allow).
	// A write at an index >= 0 that is recorded stays (a step retried
	// writes the same); one at a negative index, a special channel, is
	// replaced (a resume writes under the same task again).
	changed := false
	for _, e := range a.Entries {
		key := cpWriteKey(c.Tenant, a.Thread, a.NS, a.ID, a.TaskID, e.Idx)
		rec := encode(cpWriteRecord{Channel: e.Channel, Value: e.Value, TaskPath: a.TaskPath, Type: e.Type})
		if cur, ok := f.st.Get(key); ok && (e.Idx >= 0 || bytes.Equal(cur, rec)) {
			continue
		}
		f.st.Put(key, rec)
		changed = true
		if e.Type != "" {
			f.markCheckpoints6()
		}
	}
	if changed {
		f.markCheckpoints5()
	}
	v := taskWritesView{TaskID: a.TaskID, Writes: taskWrites(f.st, c.Tenant, a.Thread, a.NS, a.ID, a.TaskID)}
	if !changed {
		return okValue(OutcomeOK, v)
	}
	f.emit(c.Tenant, ResourceCheckpoints, cpEventKey(a.Thread, a.NS, a.ID)+"/writes/"+a.TaskID, a.Thread, EventPut, v)
	return okValue(OutcomeCreated, v)
}

// applyWholeWrites applies the writes of an entry before version 5: a
// task's JSON array recorded once, the same again a no-op, others refused.
func (f *FSM) applyWholeWrites(c *Command, a *CheckpointWritesArgs) *Result {
	key := cpWritesPrefix(c.Tenant, a.Thread, a.NS, a.ID) + a.TaskID
	v := taskWritesView{TaskID: a.TaskID, Writes: expandWholeWrites(a.TaskID, a.Writes)}
	if cur, ok := f.st.Get(key); ok {
		if bytes.Equal(cur, a.Writes) {
			return okValue(OutcomeOK, v)
		}
		return fail(CodeAlreadyExists, fmt.Sprintf("task %q already recorded other writes for checkpoint %q", a.TaskID, a.ID), nil)
	}
	f.st.Put(key, a.Writes)
	f.emit(c.Tenant, ResourceCheckpoints, cpEventKey(a.Thread, a.NS, a.ID)+"/writes/"+a.TaskID, a.Thread, EventPut, v)
	return okValue(OutcomeCreated, v)
}

// taskWritesView is the answer to recording pending writes: the task's
// writes on the checkpoint, as now recorded.
type taskWritesView struct {
	TaskID string         `json:"task_id"`
	Writes []PendingWrite `json:"writes"`
}

// taskWrites is one task's pending writes on a checkpoint, by index.
func taskWrites(st *Store, tenant, thread, ns, id, taskID string) []PendingWrite {
	out := []PendingWrite{}
	prefix := cpWritesPrefix(tenant, thread, ns, id)
	st.Scan(prefix+taskID+"/", "", func(k string, v []byte) bool {
		if w, ok := decodePendingWrite(k[len(prefix):], v); ok {
			out = append(out, w)
		}
		return true
	})
	return out
}

// pendingWrites is every pending write of a checkpoint, by task id, then
// index.
func pendingWrites(st *Store, tenant, thread, ns, id string) []PendingWrite {
	out := []PendingWrite{}
	prefix := cpWritesPrefix(tenant, thread, ns, id)
	st.Scan(prefix, "", func(k string, v []byte) bool {
		rest := k[len(prefix):]
		if !strings.Contains(rest, "/") { // a whole array, before version 5
			out = append(out, expandWholeWrites(rest, v)...)
		} else if w, ok := decodePendingWrite(rest, v); ok {
			out = append(out, w)
		}
		return true
	})
	return out
}

// decodePendingWrite reads the write stored at <task id>/<idx>.
func decodePendingWrite(rest string, v []byte) (PendingWrite, bool) {
	taskID, hexIdx, ok := strings.Cut(rest, "/")
	if !ok {
		return PendingWrite{}, false
	}
	u, err := strconv.ParseUint(hexIdx, 16, 64)
	var rec cpWriteRecord
	if err != nil || decode(v, &rec) != nil {
		return PendingWrite{}, false
	}
	w := PendingWrite{TaskID: taskID, TaskPath: rec.TaskPath, Idx: int64(u ^ (1 << 63)), Channel: rec.Channel}
	if rec.Type != "" {
		w.Type, w.Bytes = rec.Type, rec.Value
	} else {
		w.Value = rec.Value
	}
	return w, true
}

// expandWholeWrites shows a task's writes recorded as one JSON array
// before version 5 as writes of no channel at indexes 0, 1, ...
func expandWholeWrites(taskID string, arr []byte) []PendingWrite {
	var elems []json.RawMessage
	if json.Unmarshal(arr, &elems) != nil {
		return nil
	}
	out := make([]PendingWrite, len(elems))
	for i, e := range elems {
		out[i] = PendingWrite{TaskID: taskID, Idx: int64(i), Value: e}
	}
	return out
}

func applyThreadDelete(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ThreadDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if f.deleteThread(ctx, c.Tenant, a.Thread) == 0 {
		return fail(CodeNotFound, fmt.Sprintf("thread %q not found", a.Thread), nil)
	}
	return okValue(OutcomeNoContent, nil)
}

// deleteThread deletes every key of a thread, in every namespace, with its
// checkpoints' run index entries, and releases their chunks. It returns
// the checkpoints deleted (0: the thread had none). Every namespace of the thread is under its prefix,
// and so is its chunk reference count (at most MaxThreadChunkRefs to
// release here).
func (f *FSM) deleteThread(ctx *applyCtx, tenant, thread string) int {
	prefix := threadPrefix(tenant, thread)
	var keys []string
	var records []*cpRefs
	var blobChunks []ChunkRef
	f.st.Scan(prefix, "", func(k string, v []byte) bool {
		keys = append(keys, k)
		if isCheckpointRecordKey(k[len(prefix):]) {
			cp := &cpRefs{}
			if decode(v, cp) == nil {
				records = append(records, cp)
			}
		} else if isBlobRecordKey(k[len(prefix):]) {
			var b struct{ Chunks []ChunkRef }
			if decode(v, &b) == nil {
				blobChunks = append(blobChunks, b.Chunks...)
			}
		}
		return true
	})
	for _, k := range keys {
		f.st.Delete(k)
	}
	f.releaseCheckpointChunks(ctx, tenant, blobChunks)
	for _, cp := range records {
		f.releaseCheckpointChunks(ctx, tenant, cp.Chunks)
		gone := &Checkpoint{Tenant: tenant, RunID: cp.RunID, ExpiresAt: cp.ExpiresAt, Thread: thread, NS: cp.NS, ID: cp.ID}
		if cp.RunID != "" {
			f.st.Delete(cpRunKey(tenant, gone))
		}
		if cp.ExpiresAt != 0 {
			f.st.Delete(cpExpiryKey(tenant, gone))
		}
		f.emit(tenant, ResourceCheckpoints, cpEventKey(thread, cp.NS, cp.ID), thread, EventDelete, nil)
	}
	return len(records)
}

// cpRefs is what deleting a checkpoint needs of its record: decoding it
// leaves the data, which may be large, where it is.
type cpRefs struct {
	ID, NS    string
	Chunks    []ChunkRef
	RunID     string
	ExpiresAt int64
}

// isCheckpointRecordKey reports whether rest, a key after its thread's
// prefix, is a checkpoint record: c/<id>, or n/<ns>/c/<id> (an escaped ns
// has no "/").
func isCheckpointRecordKey(rest string) bool {
	if after, ok := strings.CutPrefix(rest, "n/"); ok {
		_, rest, _ = strings.Cut(after, "/")
	}
	return strings.HasPrefix(rest, "c/")
}

// GetCheckpoint returns a checkpoint of a thread's namespace with its
// pending writes; id "latest" is not special here (the server resolves it
// with ThreadHead).
func (f *FSM) GetCheckpoint(tenant, thread, ns, id string) (*CheckpointView, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := getCheckpoint(f.st, tenant, thread, ns, id)
	if !ok {
		return nil, f.applied, false
	}
	return &CheckpointView{Checkpoint: c, Pending: pendingWrites(f.st, tenant, thread, ns, id), Blobs: blobViews(f.st, c)}, f.applied, true
}

// ThreadHead is the id of the newest checkpoint of a thread's namespace
// ("" if none).
func (f *FSM) ThreadHead(tenant, thread, ns string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return threadHead(f.st, tenant, thread, ns)
}

// CheckpointChunks is the chunks of a checkpoint's data (nil when it has
// none, or there is no such checkpoint).
func (f *FSM) CheckpointChunks(tenant, thread, ns, id string) []ChunkRef {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if c, ok := getCheckpoint(f.st, tenant, thread, ns, id); ok {
		return c.Chunks
	}
	return nil
}

// maxListWalkBytes bounds the bytes of checkpoint records one page of
// ListCheckpoints examines, besides MaxListWalk records (artifactlife.go).
const maxListWalkBytes = 64 << 20

// ListCheckpoints lists the checkpoints of a thread's namespace newest
// first, older than before (a checkpoint id) when given, at most limit of
// those whose metadata match accepts (nil: all), each with its pending
// writes when writes is set. A page examines at most MaxListWalk
// checkpoints and maxListWalkBytes of them and of their writes, matching
// or not; next is the id of the last one examined when more may follow
// (to pass as before), even when the page is empty. ok is false when
// before is not a checkpoint of the namespace.
func (f *FSM) ListCheckpoints(tenant, thread, ns, before string, limit int, match func(metadata []byte) bool, writes bool) (out []CheckpointView, next string, index uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := nsPrefix(tenant, thread, ns) + "o/"
	from := ""
	if before != "" {
		c, ok := getCheckpoint(f.st, tenant, thread, ns, before)
		if !ok {
			return nil, "", f.applied, false
		}
		from = cpOrderKey(c) + "\x00"
	}
	out = []CheckpointView{}
	walked, size, last := 0, 0, ""
	f.st.Scan(prefix, from, func(k string, _ []byte) bool {
		if len(out) == limit || walked == MaxListWalk || size >= maxListWalkBytes {
			next = last // another follows
			return false
		}
		id := k[strings.LastIndexByte(k, '/')+1:]
		walked, last = walked+1, id
		raw, ok := f.st.Get(cpKey(tenant, thread, ns, id))
		if !ok {
			return true
		}
		size += len(raw)
		if match != nil {
			// The metadata alone, without copying the data, for the
			// many a filter may refuse.
			var md struct{ Metadata []byte }
			if decode(raw, &md) != nil || !match(md.Metadata) {
				return true
			}
		}
		var c Checkpoint
		if decode(raw, &c) != nil {
			return true
		}
		v := CheckpointView{Checkpoint: &c, Blobs: blobViews(f.st, &c)}
		for _, b := range v.Blobs {
			size += len(b.Data) + int(chunksSize(b.Chunks))
		}
		if writes {
			v.Pending = pendingWrites(f.st, tenant, thread, ns, id)
			for _, w := range v.Pending {
				size += len(w.Value) + len(w.Bytes) + len(w.Channel) + len(w.TaskID)
			}
		}
		out = append(out, v)
		return true
	})
	return out, next, f.applied, true
}

func (a *CheckpointPutArgs) jsonFields() [][]byte { return [][]byte{a.Data, a.Metadata} }
func (a *CheckpointWritesArgs) jsonFields() [][]byte {
	out := [][]byte{a.Writes}
	for _, e := range a.Entries {
		if e.Type == "" { // bytes are not JSON
			out = append(out, e.Value)
		}
	}
	return out
}

// TenantCheckpointsQuery selects the checkpoints of ListTenantCheckpoints.
type TenantCheckpointsQuery struct {
	Thread   *string // one thread; nil: every thread
	NS       *string // one namespace; nil: every namespace
	BeforeID string  // only ids that sort before it (LangGraph's before); "": all
	// From is where the walk resumes: the last key a previous page
	// examined (its next), exclusive; "": the start.
	From    string
	Limit   int
	Match   func(metadata []byte) bool // nil: all
	Visible func(thread string) bool   // the caller's read grants
	Writes  bool                       // with each checkpoint's pending writes
}

// ListTenantCheckpoints lists a tenant's checkpoints across threads and
// namespaces (LangGraph's list with no thread or no checkpoint_ns): in the
// key order of threads, then of namespaces (every other namespace of a
// thread before its default one), newest first within a namespace. A page
// examines at most MaxListWalk keys of the threads (records, writes and
// order entries alike) and maxListWalkBytes of records; next is the last
// key examined when more may follow, even when the page is empty.
func (f *FSM) ListTenantCheckpoints(tenant string, q TenantCheckpointsQuery) (out []CheckpointView, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := "t/" + tenant + "/th/"
	if q.Thread != nil {
		prefix = threadPrefix(tenant, *q.Thread)
	}
	out = []CheckpointView{}
	walked, size, last := 0, 0, ""
	f.st.Scan(prefix, q.From, func(k string, _ []byte) bool {
		if k == q.From {
			return true
		}
		if len(out) == q.Limit || walked == MaxListWalk || size >= maxListWalkBytes {
			next = last
			return false
		}
		walked, last = walked+1, k
		nsp, id, ok := orderKeyParts(k)
		if !ok || (q.BeforeID != "" && id >= q.BeforeID) {
			return true
		}
		raw, ok := f.st.Get(nsp + "c/" + id)
		if !ok {
			return true
		}
		size += len(raw)
		var c Checkpoint
		if decode(raw, &c) != nil || (q.NS != nil && c.NS != *q.NS) || (q.Visible != nil && !q.Visible(c.Thread)) ||
			(q.Match != nil && !q.Match(c.Metadata)) {
			return true
		}
		v := CheckpointView{Checkpoint: &c, Blobs: blobViews(f.st, &c)}
		for _, b := range v.Blobs {
			size += len(b.Data) + int(chunksSize(b.Chunks))
		}
		if q.Writes {
			v.Pending = pendingWrites(f.st, tenant, c.Thread, c.NS, c.ID)
		}
		out = append(out, v)
		return true
	})
	return out, next, f.applied
}

// orderKeyParts splits a namespace's order key, <nsp>o/<^seq>/<id>, into
// the namespace's prefix and the checkpoint id; ok is false for any other
// key of a thread. An escaped thread or namespace has no "/", and ids are
// names, so the key's shape is unambiguous.
func orderKeyParts(k string) (nsp, id string, ok bool) {
	i := strings.LastIndex(k, "/o/")
	if i < 0 {
		return "", "", false
	}
	rest := k[i+3:]
	seq, id, ok := strings.Cut(rest, "/")
	if !ok || len(seq) != 16 || strings.Contains(id, "/") {
		return "", "", false
	}
	return k[:i+1], id, true
}
