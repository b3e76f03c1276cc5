package fsm

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Thread lifecycle past delete, as LangGraph's savers have it: copy a
// thread, prune threads to their latest checkpoints, and delete the
// checkpoints of runs. Each is one command, whatever the threads' size:
// MaxThreadCopyKeys bounds a copy; a prune and a run delete do no more
// than deleting the same threads would.
const (
	KindThreadCopy           Kind = "thread.copy"
	KindThreadPrune          Kind = "thread.prune"
	KindCheckpointDeleteRuns Kind = "checkpoint.delete_runs"
)

// Bounds of the thread lifecycle commands (docs/api.md "Checkpoints").
const (
	// MaxThreadCopyKeys bounds the keys (checkpoints, their order and
	// head entries, pending writes) one copy writes: a larger thread is
	// refused before anything is written.
	MaxThreadCopyKeys = 100_000
	// MaxPruneThreads bounds the threads of one prune, MaxDeleteRuns the
	// run ids of one run delete.
	MaxPruneThreads = 100
	MaxDeleteRuns   = 100
)

// ThreadCopyArgs copies every checkpoint and pending write of thread
// Source, in every namespace, to Target, which must have none.
type ThreadCopyArgs struct {
	Source, Target string
	Fence          *Fence
}

// ThreadPruneArgs prunes threads: with KeepLatest, every namespace keeps
// its head with its pending writes and loses the rest; without, the
// threads are deleted. A thread without checkpoints is left alone.
type ThreadPruneArgs struct {
	Threads    []string
	KeepLatest bool
	Fence      *Fence
}

// CheckpointDeleteRunsArgs deletes, in every thread of the tenant, the
// checkpoints whose metadata's run_id is one of RunIDs (as indexed when
// they were put), with their pending writes.
type CheckpointDeleteRunsArgs struct {
	RunIDs []string
	Fence  *Fence
}

// A checkpoint put with a run id (its metadata's run_id, CheckpointPutArgs
// .RunID) is indexed at
//
//	t/<tenant>/cprun/<run id>/<thread>/<ns>/<id>
//
// (run id, thread and namespace escaped), the value naming the checkpoint
// (cpRunRef), so that deleting a run's checkpoints reads no other thread.
type cpRunRef struct{ Thread, NS, ID string }

func cpRunPrefix(tenant, runID string) string {
	return "t/" + tenant + "/cprun/" + escapeKeySegment(runID) + "/"
}

func cpRunKey(tenant string, cp *Checkpoint) string {
	return cpRunPrefix(tenant, cp.RunID) + escapeKeySegment(cp.Thread) + "/" + escapeKeySegment(cp.NS) + "/" + cp.ID
}

// indexRun records a checkpoint with a run id in its run's index.
func (f *FSM) indexRun(cp *Checkpoint) {
	if cp.RunID == "" {
		return
	}
	f.st.Put(cpRunKey(cp.Tenant, cp), encode(cpRunRef{Thread: cp.Thread, NS: cp.NS, ID: cp.ID}))
	f.markCheckpoints5()
}

// threadKeys is every key and value under a thread's prefix, in key order,
// the prefix cut off the keys.
type threadKey struct {
	rest string
	val  []byte
}

func scanThread(st *Store, tenant, thread string) []threadKey {
	prefix := threadPrefix(tenant, thread)
	var out []threadKey
	st.Scan(prefix, "", func(k string, v []byte) bool {
		out = append(out, threadKey{rest: k[len(prefix):], val: v})
		return true
	})
	return out
}

// splitNS splits a key after its thread's prefix into its namespace's
// part ("" or "n/<ns>/") and the rest (h, c/<id>, o/<seq>/<id>,
// w/<id>/..., or r, the thread's chunk references).
func splitNS(rest string) (nsPart, sub string) {
	if after, ok := strings.CutPrefix(rest, "n/"); ok {
		if ns, sub, ok := strings.Cut(after, "/"); ok {
			return "n/" + ns + "/", sub
		}
	}
	return "", rest
}

func applyThreadCopy(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ThreadCopyArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if a.Source == a.Target {
		return fail(CodeInvalidArgument, "a thread cannot be copied onto itself", nil)
	}
	if len(scanThreadLimit(f.st, c.Tenant, a.Target, 1)) > 0 {
		return fail(CodeAlreadyExists, fmt.Sprintf("thread %q has checkpoints: copy into a thread that has none", a.Target), nil)
	}
	keys := scanThreadLimit(f.st, c.Tenant, a.Source, MaxThreadCopyKeys+1)
	switch {
	case len(keys) == 0:
		return fail(CodeNotFound, fmt.Sprintf("thread %q not found", a.Source), nil)
	case len(keys) > MaxThreadCopyKeys:
		return fail(CodeInvalidArgument, fmt.Sprintf("thread %q has more than %d keys (checkpoints and their writes), more than one copy writes", a.Source, MaxThreadCopyKeys), nil)
	}
	dst := threadPrefix(c.Tenant, a.Target)
	copied := 0
	for _, k := range keys {
		_, sub := splitNS(k.rest)
		if strings.HasPrefix(sub, "b/") { // a value: the copy's holds its chunks too
			var b struct{ Chunks []ChunkRef }
			if decode(k.val, &b) == nil {
				for _, ch := range b.Chunks {
					f.referenceChunk(c.Tenant, ch.Digest)
				}
			}
		}
		if !strings.HasPrefix(sub, "c/") {
			f.st.Put(dst+k.rest, k.val) // head, order, writes, values and the chunk reference count as they are
			continue
		}
		var cp Checkpoint
		if decode(k.val, &cp) != nil {
			return fail(CodeInvalidArgument, fmt.Sprintf("checkpoint record %q of thread %q does not decode", k.rest, a.Source), nil)
		}
		cp.Thread = a.Target
		for _, ch := range cp.Chunks {
			f.referenceChunk(c.Tenant, ch.Digest) // the copy holds them too
		}
		f.indexRun(&cp)
		f.indexExpiry(&cp)
		f.markCheckpoints4(cp.Thread, cp.NS, len(cp.Chunks) > 0)
		f.st.Put(dst+k.rest, encode(&cp))
		copied++
		f.emit(c.Tenant, ResourceCheckpoints, cpEventKey(cp.Thread, cp.NS, cp.ID), cp.Thread, EventPut, CheckpointView{Checkpoint: &cp})
	}
	return okValue(OutcomeOK, map[string]any{"source": a.Source, "target": a.Target, "checkpoints": copied})
}

// scanThreadLimit is scanThread stopping after n keys.
func scanThreadLimit(st *Store, tenant, thread string, n int) []threadKey {
	prefix := threadPrefix(tenant, thread)
	var out []threadKey
	st.Scan(prefix, "", func(k string, v []byte) bool {
		out = append(out, threadKey{rest: k[len(prefix):], val: v})
		return len(out) < n
	})
	return out
}

func applyThreadPrune(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ThreadPruneArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	deleted := 0
	for _, th := range a.Threads {
		if !a.KeepLatest {
			deleted += f.deleteThread(ctx, c.Tenant, th)
			continue
		}
		heads := map[string]string{} // namespace part -> head id
		var ids, writes []cpAt
		for _, k := range scanThread(f.st, c.Tenant, th) {
			nsPart, sub := splitNS(k.rest)
			switch {
			case sub == "h":
				heads[nsPart] = string(k.val)
			case strings.HasPrefix(sub, "c/"):
				ids = append(ids, cpAt{nsPart: nsPart, id: sub[2:]})
			case strings.HasPrefix(sub, "w/"):
				writes = append(writes, cpAt{nsPart: nsPart, id: k.rest}) // the key, for writes of no checkpoint
			}
		}
		for _, x := range ids { // every namespace's head is read before any delete
			if heads[x.nsPart] != x.id && f.deleteCheckpointAt(ctx, c.Tenant, th, x.nsPart, x.id) {
				deleted++
			}
		}
		// Writes recorded on a checkpoint that was never put (its put
		// failed) go too, but the head's.
		for _, x := range writes {
			_, sub := splitNS(x.id)
			if id, _, _ := strings.Cut(sub[2:], "/"); id != heads[x.nsPart] {
				f.st.Delete(threadPrefix(c.Tenant, th) + x.id)
			}
		}
	}
	return okValue(OutcomeOK, map[string]any{"deleted": deleted})
}

// cpAt is a checkpoint by its namespace's key part and id.
type cpAt struct{ nsPart, id string }

func applyCheckpointDeleteRuns(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a CheckpointDeleteRunsArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	deleted := 0
	for _, run := range a.RunIDs {
		var refs []cpRunRef
		f.st.Scan(cpRunPrefix(c.Tenant, run), "", func(_ string, v []byte) bool {
			var r cpRunRef
			if decode(v, &r) == nil {
				refs = append(refs, r)
			}
			return true
		})
		for _, r := range refs {
			if f.deleteCheckpoint(ctx, c.Tenant, r.Thread, r.NS, r.ID) {
				deleted++
			}
		}
	}
	return okValue(OutcomeOK, map[string]any{"deleted": deleted})
}

// deleteCheckpointAt deletes a checkpoint named by its namespace's key
// part, reading the namespace from its record.
func (f *FSM) deleteCheckpointAt(ctx *applyCtx, tenant, thread, nsPart, id string) bool {
	raw, ok := f.st.Get(threadPrefix(tenant, thread) + nsPart + "c/" + id)
	if !ok {
		return false
	}
	var r cpRefs
	if decode(raw, &r) != nil {
		return false
	}
	return f.deleteCheckpoint(ctx, tenant, thread, r.NS, id)
}

// deleteCheckpoint deletes one checkpoint with its pending writes, its
// order entry and its run index entry, releases its chunks, and moves its
// namespace's head to the newest checkpoint left (none: no head).
func (f *FSM) deleteCheckpoint(ctx *applyCtx, tenant, thread, ns, id string) bool {
	cp, ok := getCheckpoint(f.st, tenant, thread, ns, id)
	if !ok {
		return false
	}
	f.st.Delete(cpKey(tenant, thread, ns, id))
	f.st.Delete(cpOrderKey(cp))
	var writes []string
	f.st.Scan(cpWritesPrefix(tenant, thread, ns, id), "", func(k string, _ []byte) bool {
		writes = append(writes, k)
		return true
	})
	for _, k := range writes {
		f.st.Delete(k)
	}
	if cp.RunID != "" {
		f.st.Delete(cpRunKey(tenant, cp))
	}
	f.releaseBlobs(ctx, tenant, thread, ns, cp.BlobRefs)
	if cp.ExpiresAt != 0 {
		f.st.Delete(cpExpiryKey(tenant, cp))
	}
	if len(cp.Chunks) > 0 {
		f.releaseCheckpointChunks(ctx, tenant, cp.Chunks)
		refs := threadChunkRefs(f.st, tenant, thread) - min(threadChunkRefs(f.st, tenant, thread), uint64(len(cp.Chunks)))
		if refs == 0 {
			f.st.Delete(threadRefsKey(tenant, thread))
		} else {
			f.st.Put(threadRefsKey(tenant, thread), binary.BigEndian.AppendUint64(nil, refs))
		}
	}
	if threadHead(f.st, tenant, thread, ns) == id {
		prefix := nsPrefix(tenant, thread, ns) + "o/"
		newest := ""
		f.st.Scan(prefix, "", func(k string, _ []byte) bool {
			newest = k[strings.LastIndexByte(k, '/')+1:]
			return false
		})
		if newest == "" {
			f.st.Delete(cpHeadKey(tenant, thread, ns))
		} else {
			f.st.Put(cpHeadKey(tenant, thread, ns), []byte(newest))
		}
	}
	f.emit(tenant, ResourceCheckpoints, cpEventKey(thread, ns, id), thread, EventDelete, nil)
	return true
}
