package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func cpPut(thread, id, parent string, data string) *CheckpointPutArgs {
	return &CheckpointPutArgs{Thread: thread, ID: id, ParentID: parent, Data: []byte(data)}
}

func cpIDs(vs []CheckpointView) (out []string) {
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

// TestCheckpointChain: a thread is an append-only chain whose next link
// names the head as parent; a stale parent is refused with the current
// head, a retried append is answered again, and other content under a
// used id is refused. A fork may start from any checkpoint of the thread.
func TestCheckpointChain(t *testing.T) {
	w := newWorld(t)
	w.refused(CodeVersionMismatch, KindCheckpointPut, "acme", cpPut("th", "c1", "c0", `1`))
	r := w.ok(KindCheckpointPut, "acme", cpPut("th", "c1", "", `1`))
	if r.Outcome != OutcomeCreated || w.f.ThreadHead("acme", "th", "") != "c1" {
		t.Fatalf("first checkpoint: outcome %d head %q", r.Outcome, w.f.ThreadHead("acme", "th", ""))
	}
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c2", "c1", `2`))
	if d := w.refused(CodeVersionMismatch, KindCheckpointPut, "acme", cpPut("th", "c3", "c1", `3`)); d["current_head"] != "c2" {
		t.Errorf("stale parent: details %v, want current_head c2", d)
	}
	if r := w.ok(KindCheckpointPut, "acme", cpPut("th", "c2", "c1", `2`)); r.Outcome != OutcomeOK {
		t.Errorf("retried append: outcome %d, want 200", r.Outcome)
	}
	w.refused(CodeAlreadyExists, KindCheckpointPut, "acme", cpPut("th", "c2", "c1", `"other"`))
	w.refused(CodeAlreadyExists, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: "c2", ParentID: "c1",
		Data: []byte(`2`), Metadata: []byte(`{"m":1}`)})

	// Forks: from an existing checkpoint, or a new root; not from nowhere.
	w.refused(CodeNotFound, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: "f1", ParentID: "zz", Fork: true})
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: "f1", ParentID: "c1", Fork: true, Data: []byte(`3`)})
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: "root2", Fork: true})
	if h := w.f.ThreadHead("acme", "th", ""); h != "root2" {
		t.Errorf("head after forks: %q, want root2", h)
	}
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c4", "root2", `4`))

	all, _, _, ok := w.f.ListCheckpoints("acme", "th", "", "", 10, nil, false)
	if want := []string{"c4", "root2", "f1", "c2", "c1"}; !ok || !slices.Equal(cpIDs(all), want) {
		t.Errorf("ListCheckpoints: %v, want newest first %v", cpIDs(all), want)
	}
	page, _, _, _ := w.f.ListCheckpoints("acme", "th", "", "f1", 1, nil, false)
	if !slices.Equal(cpIDs(page), []string{"c2"}) {
		t.Errorf("ListCheckpoints before f1, limit 1: %v, want [c2]", cpIDs(page))
	}
	if _, _, _, ok := w.f.ListCheckpoints("acme", "th", "", "nope", 1, nil, false); ok {
		t.Errorf("ListCheckpoints before an unknown checkpoint: ok")
	}
	v, _, ok := w.f.GetCheckpoint("acme", "th", "", "f1")
	if !ok || v.ParentID != "c1" || string(v.Data) != `3` {
		t.Errorf("GetCheckpoint f1: %+v %v", v, ok)
	}
	m := obj(t, &Result{Obj: *v})
	if m["thread_id"] != "th" || m["checkpoint_id"] != "f1" || m["parent_id"] != "c1" || m["data"] != float64(3) {
		t.Errorf("checkpoint JSON: %v", m)
	}
}

// TestCheckpointThreadScope: checkpoint ids, heads, pending writes and
// deletes belong to one thread of one tenant.
func TestCheckpointThreadScope(t *testing.T) {
	w := newWorld(t)
	w.ok(KindTenantPut, "beta", &TenantPutArgs{Name: "beta"})
	w.ok(KindCheckpointPut, "acme", cpPut("a", "c1", "", `1`))
	// The same id in another thread, or another tenant's thread of the
	// same name, is another checkpoint with a chain of its own.
	w.ok(KindCheckpointPut, "acme", cpPut("b", "c1", "", `"b"`))
	w.ok(KindCheckpointPut, "beta", cpPut("a", "c1", "", `"beta"`))
	w.ok(KindCheckpointPut, "acme", cpPut("b", "c2", "c1", `2`))
	if h := w.f.ThreadHead("acme", "a", ""); h != "c1" {
		t.Errorf("thread a's head: %q, want c1 (b's append is not a's)", h)
	}
	if v, _, _ := w.f.GetCheckpoint("beta", "a", "", "c1"); v == nil || string(v.Data) != `"beta"` {
		t.Errorf("beta's a/c1: %+v", v)
	}

	// Pending writes: per checkpoint and task, first answer kept.
	w.refused(CodeNotFound, KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "a", ID: "c2", TaskID: "t1", Writes: []byte(`[1]`)})
	w.refused(CodeNotFound, KindCheckpointWrites, "beta", &CheckpointWritesArgs{Thread: "b", ID: "c1", TaskID: "t1", Writes: []byte(`[1]`)})
	if r := w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "a", ID: "c1", TaskID: "t2", Writes: []byte(`[2]`)}); r.Outcome != OutcomeCreated {
		t.Errorf("writes: outcome %d, want created", r.Outcome)
	}
	w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "a", ID: "c1", TaskID: "t1", Writes: []byte(`[1]`)})
	if r := w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "a", ID: "c1", TaskID: "t1", Writes: []byte(`[1]`)}); r.Outcome != OutcomeOK {
		t.Errorf("retried writes: outcome %d, want 200", r.Outcome)
	}
	w.refused(CodeAlreadyExists, KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "a", ID: "c1", TaskID: "t1", Writes: []byte(`[9]`)})
	v, _, _ := w.f.GetCheckpoint("acme", "a", "", "c1")
	if len(v.Pending) != 2 || v.Pending[0].TaskID != "t1" || string(v.Pending[1].Value) != `2` || v.Pending[1].Idx != 0 {
		t.Errorf("pending writes of a/c1: %+v, want t1 [1] and t2 [2] (one write each, at index 0)", v.Pending)
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "b", "", "c1"); len(v.Pending) != 0 {
		t.Errorf("b/c1 has a/c1's pending writes: %+v", v.Pending)
	}

	// Deleting a thread removes it all, and nothing else.
	w.refused(CodeNotFound, KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "c"})
	if r := w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "a"}); r.Outcome != OutcomeNoContent {
		t.Errorf("thread delete: outcome %d, want no content", r.Outcome)
	}
	if _, _, ok := w.f.GetCheckpoint("acme", "a", "", "c1"); ok || w.f.ThreadHead("acme", "a", "") != "" {
		t.Errorf("deleted thread still readable")
	}
	for _, k := range []struct{ tenant, thread, head string }{{"acme", "b", "c2"}, {"beta", "a", "c1"}} {
		if h := w.f.ThreadHead(k.tenant, k.thread, ""); h != k.head {
			t.Errorf("%s/%s after deleting acme/a: head %q, want %q", k.tenant, k.thread, h, k.head)
		}
	}
	w.f.st.Scan(threadPrefix("acme", "a"), "", func(k string, _ []byte) bool {
		t.Errorf("key %q of the deleted thread left", k)
		return true
	})
	// A deleted thread starts again from an empty head.
	w.ok(KindCheckpointPut, "acme", cpPut("a", "c9", "", `9`))
}

// TestCheckpointNamespaces: each namespace of a thread has a chain, head,
// pending writes and list of its own; the default namespace ("") is the
// one of the keys every thread had before namespaces. Deleting the thread
// deletes every namespace.
func TestCheckpointNamespaces(t *testing.T) {
	w := newWorld(t)
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c1", "", `1`))
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "sub:1", ID: "c1", Data: []byte(`"sub"`)})
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "sub:1", ID: "s2", ParentID: "c1", Data: []byte(`2`)})
	// The default namespace's head is still c1: a child of it is no fork.
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c2", "c1", `2`))
	w.refused(CodeVersionMismatch, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "sub:1", ID: "s3", ParentID: "c2"})
	if h := w.f.ThreadHead("acme", "th", "sub:1"); h != "s2" {
		t.Errorf("head of sub:1: %q, want s2", h)
	}
	if v, _, ok := w.f.GetCheckpoint("acme", "th", "sub:1", "c1"); !ok || string(v.Data) != `"sub"` || v.NS != "sub:1" {
		t.Errorf("c1 of sub:1: %+v", v)
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c1"); string(v.Data) != `1` {
		t.Errorf("c1 of the default namespace: %s", v.Data)
	}
	w.refused(CodeNotFound, KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "th", NS: "sub:1", ID: "c2", TaskID: "k", Writes: []byte(`[]`)})
	w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "th", NS: "sub:1", ID: "c1", TaskID: "k", Writes: []byte(`[1]`)})
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c1"); len(v.Pending) != 0 {
		t.Errorf("writes of sub:1's c1 show on the default namespace's: %v", v.Pending)
	}
	if l, _, _, _ := w.f.ListCheckpoints("acme", "th", "sub:1", "", 10, nil, false); !slices.Equal(cpIDs(l), []string{"s2", "c1"}) {
		t.Errorf("list of sub:1: %v", cpIDs(l))
	}
	if l, _, _, _ := w.f.ListCheckpoints("acme", "th", "", "", 10, nil, false); !slices.Equal(cpIDs(l), []string{"c2", "c1"}) {
		t.Errorf("list of the default namespace: %v", cpIDs(l))
	}
	// The default namespace's keys are the ones of before namespaces.
	if _, ok := w.f.st.Get("t/acme/th/th/c/c1"); !ok {
		t.Errorf("the default namespace's c1 is not at t/acme/th/th/c/c1")
	}
	m := obj(t, w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "sub:1", ID: "s3", ParentID: "s2", Data: []byte(`3`)}))
	if m["checkpoint_ns"] != "sub:1" {
		t.Errorf("checkpoint JSON in a namespace: %v", m)
	}
	if m := obj(t, w.ok(KindCheckpointPut, "acme", cpPut("th", "c3", "c2", `3`))); m["checkpoint_ns"] != nil || m["data_chunks"] != nil {
		t.Errorf("checkpoint JSON in the default namespace has new fields: %v", m)
	}

	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th"})
	w.f.st.Scan(threadPrefix("acme", "th"), "", func(k string, _ []byte) bool {
		t.Errorf("key %q of the deleted thread left", k)
		return true
	})
}

// TestCheckpointThreadIDsEscaped: thread ids and namespaces of any UTF-8
// are escaped in keys, so that one holding "/" or "%" never reads or
// deletes another thread's or namespace's keys; ids of the old grammar
// keep their keys.
func TestCheckpointThreadIDsEscaped(t *testing.T) {
	if got := escapeKeySegment("chat-7:a.b_c"); got != "chat-7:a.b_c" {
		t.Errorf("an old-grammar id escaped to %q", got)
	}
	for _, pair := range [][2]string{{"a/b", "a%2Fb"}, {"a%2Fb", "a%252Fb"}, {"u@example.com", "u%40example.com"}, {"é", "%C3%A9"}} {
		if got := escapeKeySegment(pair[0]); got != pair[1] {
			t.Errorf("escape %q = %q, want %q", pair[0], got, pair[1])
		}
	}
	w := newWorld(t)
	// Unescaped, thread "a/c" would be thread "a"'s checkpoint "h"...;
	// "a/n/x" its namespace "x".
	threads := []string{"a", "a/c", "a/n/x", "a%2Fc", "user@example.com", "with space", "ünï/cødé 🎉"}
	for i, th := range threads {
		w.ok(KindCheckpointPut, "acme", cpPut(th, "c1", "", strconv.Itoa(i)))
	}
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "a", NS: "x", ID: "c1", Data: []byte(`"ns"`)})
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "a", NS: "x/c", ID: "c1", Data: []byte(`"ns2"`)})
	check := func(deleted string) {
		t.Helper()
		for i, th := range threads {
			if th == "" {
				continue
			}
			v, _, ok := w.f.GetCheckpoint("acme", th, "", "c1")
			if th == deleted {
				if ok {
					t.Errorf("thread %q readable after its delete", th)
				}
				continue
			}
			if !ok || string(v.Data) != strconv.Itoa(i) || v.Thread != th {
				t.Errorf("thread %q: %+v %v, want data %d", th, v, ok, i)
			}
			if l, _, _, _ := w.f.ListCheckpoints("acme", th, "", "", 10, nil, false); len(l) != 1 {
				t.Errorf("thread %q lists %v", th, cpIDs(l))
			}
		}
	}
	check("")
	if v, _, _ := w.f.GetCheckpoint("acme", "a", "x", "c1"); v == nil || string(v.Data) != `"ns"` {
		t.Errorf("namespace x of a: %+v", v)
	}
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "a/c"})
	check("a/c")
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "a"})
	if _, _, ok := w.f.GetCheckpoint("acme", "a", "", "c1"); ok {
		t.Errorf("thread a readable after its delete")
	}
	threads[0] = "" // deleted, with its namespaces; the others stay
	check("a/c")
	if _, _, ok := w.f.GetCheckpoint("acme", "a", "x/c", "c1"); ok {
		t.Errorf("namespace x/c of a left after a's delete")
	}
}

// TestCheckpointChunks: a checkpoint whose data is in held chunks counts
// as a reference of each, so chunk GC leaves them while it exists; its
// thread's delete releases them, to be collected a grace period later.
// Unheld chunks are missing_chunks, a wrong size invalid_argument.
func TestCheckpointChunks(t *testing.T) {
	w := newWorld(t)
	a, b := ChunkRef{Digest: "sha256:" + strings.Repeat("a", 64), Size: 10}, ChunkRef{Digest: "sha256:" + strings.Repeat("b", 64), Size: 20}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: a.Digest, Size: a.Size})
	put := &CheckpointPutArgs{Thread: "u@example.com", ID: "c1", Chunks: []ChunkRef{a, b}}
	if d := w.refused(CodeMissingChunks, KindCheckpointPut, "acme", put); fmt.Sprint(d["missing"]) != "["+b.Digest+"]" {
		t.Errorf("missing chunks: %v", d)
	}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: b.Digest, Size: b.Size})
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "u@example.com", ID: "c1",
		Chunks: []ChunkRef{a, {Digest: b.Digest, Size: 21}}})
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "u@example.com", ID: "c1",
		Chunks: []ChunkRef{a}, Data: []byte(`1`)})
	m := obj(t, w.ok(KindCheckpointPut, "acme", put))
	if m["data"] != nil || len(m["data_chunks"].([]any)) != 2 {
		t.Errorf("chunked checkpoint JSON: %v", m)
	}
	// A retry is answered again, without a second reference.
	if r := w.ok(KindCheckpointPut, "acme", put); r.Outcome != OutcomeOK {
		t.Errorf("retried chunked put: outcome %d", r.Outcome)
	}
	// The same chunks in another checkpoint of another namespace.
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "u@example.com", NS: "sub", ID: "c1", Chunks: []ChunkRef{a}})
	if got := w.f.CheckpointChunks("acme", "u@example.com", "", "c1"); !slices.Equal(got, []ChunkRef{a, b}) {
		t.Errorf("CheckpointChunks: %v", got)
	}
	gc := func() int {
		t.Helper()
		w.now += 100_000
		return int(obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now, Max: 10}))["collected"].(float64))
	}
	refs := func(ch ChunkRef) uint64 {
		h, ok := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", ch.Digest))
		if !ok {
			return 0
		}
		return h.Refs
	}
	if n := gc(); n != 0 || refs(a) != 2 || refs(b) != 1 {
		t.Fatalf("GC while referenced: collected %d, refs %d %d", n, refs(a), refs(b))
	}
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "u@example.com"})
	if refs(a) != 0 || refs(b) != 0 {
		t.Fatalf("refs after the thread's delete: %d %d", refs(a), refs(b))
	}
	// Released now: not collected before the grace period from now ends.
	if n := obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now - 1, Max: 10}))["collected"]; n != float64(0) {
		t.Errorf("GC within the grace period after the release collected %d", n)
	}
	if n := gc(); n != 2 {
		t.Errorf("GC after the grace period: collected %d, want 2", n)
	}
}

// TestCheckpointEntriesAndRecords: checkpoints without a namespace, chunks
// or an escaped thread id are the entries (version 1) and records (bytes)
// they were, and their state's snapshot the format it was; with any of
// them the entry is version 4 and the snapshot format 3, which an older
// member refuses, and it round-trips.
func TestCheckpointEntriesAndRecords(t *testing.T) {
	for name, args := range map[string]any{
		"put":    cpPut("th", "c1", "", `1`),
		"writes": &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "k", Writes: []byte(`[]`)},
		"delete": &ThreadDeleteArgs{Thread: "th"},
	} {
		kind := map[string]Kind{"put": KindCheckpointPut, "writes": KindCheckpointWrites, "delete": KindThreadDelete}[name]
		if e := EncodeEntry([]*Command{NewCommand(kind, 1, "acme", "", args)}); e[0] != EntryVersion {
			t.Errorf("plain %s: entry version %d, want %d", name, e[0], EntryVersion)
		}
	}
	for name, c := range map[string]*Command{
		"put in a namespace":       NewCommand(KindCheckpointPut, 1, "acme", "", &CheckpointPutArgs{Thread: "th", NS: "n", ID: "c1"}),
		"put with chunks":          NewCommand(KindCheckpointPut, 1, "acme", "", &CheckpointPutArgs{Thread: "th", ID: "c1", Chunks: []ChunkRef{{Digest: "d", Size: 1}}}),
		"put to an e-mail thread":  NewCommand(KindCheckpointPut, 1, "acme", "", cpPut("u@example.com", "c1", "", `1`)),
		"writes in a namespace":    NewCommand(KindCheckpointWrites, 1, "acme", "", &CheckpointWritesArgs{Thread: "th", NS: "n", ID: "c1", TaskID: "k", Writes: []byte(`[]`)}),
		"delete of a slash thread": NewCommand(KindThreadDelete, 1, "acme", "", &ThreadDeleteArgs{Thread: "a/b"}),
	} {
		if e := EncodeEntry([]*Command{c}); e[0] != EntryVersion4 {
			t.Errorf("%s: entry version %d, want %d", name, e[0], EntryVersion4)
		}
	}
	// The record as it was before namespaces, field for field.
	type oldCheckpoint struct {
		Tenant, Thread, ID, ParentID string
		Data, Metadata               []byte
		Seq                          uint64
		CreatedAt                    int64
	}
	cp := &Checkpoint{Tenant: "acme", Thread: "th", ID: "c1", ParentID: "c0", Data: []byte(`1`), Metadata: []byte(`{}`), Seq: 7, CreatedAt: 9}
	if old := encode(&oldCheckpoint{"acme", "th", "c1", "c0", []byte(`1`), []byte(`{}`), 7, 9}); !bytes.Equal(encode(cp), old) {
		t.Errorf("a checkpoint without the new fields encodes to other bytes than before")
	}

	w := newWorld(t)
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c1", "", `1`))
	if hdr := snapshotHeader(t, persist(t, w.f)); hdr.Format != snapshotFormat {
		t.Errorf("plain checkpoints: snapshot format %d, want %d", hdr.Format, snapshotFormat)
	}
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "sub", ID: "c1", Data: []byte(`2`)})
	snap := persist(t, w.f)
	if hdr := snapshotHeader(t, snap); hdr.Format != snapshotFormat3 {
		t.Errorf("a checkpoint in a namespace: snapshot format %d, want %d", hdr.Format, snapshotFormat3)
	}
	g := New()
	restoreFrom(t, g, snap)
	if v, _, ok := g.GetCheckpoint("acme", "th", "sub", "c1"); !ok || v.NS != "sub" || string(v.Data) != `2` {
		t.Errorf("restored checkpoint of a namespace: %+v", v)
	}
}

// TestCheckpointListFilter: ListCheckpoints keeps the checkpoints whose
// metadata the match accepts, still newest first, before and limit
// counting only those.
func TestCheckpointListFilter(t *testing.T) {
	w := newWorld(t)
	parent := ""
	for i := range 6 {
		id := "c" + strconv.Itoa(i)
		w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: id, ParentID: parent, Data: []byte(`1`),
			Metadata: []byte(fmt.Sprintf(`{"step":%d}`, i%2))})
		parent = id
	}
	odd := func(md []byte) bool { return string(md) == `{"step":1}` }
	if l, _, _, _ := w.f.ListCheckpoints("acme", "th", "", "", 2, odd, false); !slices.Equal(cpIDs(l), []string{"c5", "c3"}) {
		t.Errorf("filter, limit 2: %v", cpIDs(l))
	}
	if l, _, _, _ := w.f.ListCheckpoints("acme", "th", "", "c3", 10, odd, false); !slices.Equal(cpIDs(l), []string{"c1"}) {
		t.Errorf("filter, before c3: %v", cpIDs(l))
	}
}

// TestCheckpointWritesByIndex: pending writes recorded by (task, index),
// as LangGraph keeps them: an index >= 0 already recorded is kept, a
// negative one (error, interrupt, resume...) is replaced, calls for one
// task accumulate, and a checkpoint's writes read by task id, then index.
func TestCheckpointWritesByIndex(t *testing.T) {
	w := newWorld(t)
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c1", "", `1`))
	wr := func(task string, entries ...CheckpointWrite) *CheckpointWritesArgs {
		return &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: task, TaskPath: "p:" + task, Entries: entries}
	}
	cw := func(idx int64, ch, v string) CheckpointWrite {
		return CheckpointWrite{Idx: idx, Channel: ch, Value: []byte(v)}
	}

	if r := w.ok(KindCheckpointWrites, "acme", wr("t2", cw(0, "a", `"x"`), cw(1, "b", `2`))); r.Outcome != OutcomeCreated {
		t.Errorf("first writes: outcome %d, want created", r.Outcome)
	}
	// The same again changes nothing; another value at a recorded index
	// >= 0 is not recorded (the first wins), a new index is added.
	if r := w.ok(KindCheckpointWrites, "acme", wr("t2", cw(0, "a", `"x"`), cw(1, "b", `2`))); r.Outcome != OutcomeOK {
		t.Errorf("retried writes: outcome %d, want 200", r.Outcome)
	}
	if r := w.ok(KindCheckpointWrites, "acme", wr("t2", cw(0, "a", `"other"`))); r.Outcome != OutcomeOK {
		t.Errorf("other value at a recorded index: outcome %d, want 200 (kept as it was)", r.Outcome)
	}
	w.ok(KindCheckpointWrites, "acme", wr("t2", cw(2, "c", `3`)))
	// Special channels: an interrupt, then a resume under the same task,
	// then a second resume value replacing the first.
	w.ok(KindCheckpointWrites, "acme", wr("t1", cw(-3, "__interrupt__", `{"q":1}`)))
	w.ok(KindCheckpointWrites, "acme", wr("t1", cw(-4, "__resume__", `"yes"`)))
	if r := w.ok(KindCheckpointWrites, "acme", wr("t1", cw(-4, "__resume__", `"no"`))); r.Outcome != OutcomeCreated {
		t.Errorf("replaced resume: outcome %d, want created", r.Outcome)
	}
	v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c1")
	var got []string
	for _, p := range v.Pending {
		got = append(got, fmt.Sprintf("%s/%d/%s=%s/%s", p.TaskID, p.Idx, p.Channel, p.Value, p.TaskPath))
	}
	want := []string{`t1/-4/__resume__="no"/p:t1`, `t1/-3/__interrupt__={"q":1}/p:t1`,
		`t2/0/a="x"/p:t2`, `t2/1/b=2/p:t2`, `t2/2/c=3/p:t2`}
	if !slices.Equal(got, want) {
		t.Errorf("pending writes:\n got %q\nwant %q", got, want)
	}
	// A snapshot of a state with writes by index is format 4.
	if f := snapshotFormatOf(w.f.st); f != snapshotFormat4 {
		t.Errorf("snapshot format %d, want %d", f, snapshotFormat4)
	}
	// An entry with writes by index is version 5.
	if v := NewCommand(KindCheckpointWrites, 1, "acme", "", wr("t", cw(0, "a", `1`))).ver; v != EntryVersion5 {
		t.Errorf("entry version of writes by index: %d, want %d", v, EntryVersion5)
	}
	// Writes may come before their checkpoint (LangGraph puts a step's
	// checkpoint in the background): the checkpoint has them once put.
	w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "th", ID: "c2", TaskID: "t9", Entries: []CheckpointWrite{cw(0, "a", `9`)}})
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c2", "c1", `2`))
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c2"); len(v.Pending) != 1 || string(v.Pending[0].Value) != `9` {
		t.Errorf("writes recorded before their checkpoint: %+v", v.Pending)
	}
	// Deleting the thread removes them with the rest.
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th"})
	w.f.st.Scan(threadPrefix("acme", "th"), "", func(k string, _ []byte) bool {
		t.Errorf("key %q of the deleted thread left", k)
		return true
	})
}
