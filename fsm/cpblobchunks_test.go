package fsm

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckpointBlobChunks: a value held in chunks is one blob that
// references its chunks while any checkpoint names it, whatever deletes
// the checkpoints (prune, run delete, retention, thread delete), a copy
// holds them too, equal values share them, and the last release gives
// them back to chunk GC. Unheld chunks are missing_chunks, nothing
// written. Version 6, snapshot format 5.
func TestCheckpointBlobChunks(t *testing.T) {
	w := newWorld(t)
	a := ChunkRef{Digest: "sha256:" + strings.Repeat("a", 64), Size: 300}
	b := ChunkRef{Digest: "sha256:" + strings.Repeat("b", 64), Size: 200}
	refs := func(ch ChunkRef) uint64 {
		h, ok := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", ch.Digest))
		if !ok {
			return 0
		}
		return h.Refs
	}
	put := func(thread, id, parent, version string, chunks []ChunkRef, runID string) *CheckpointPutArgs {
		p := &CheckpointPutArgs{Thread: thread, ID: id, ParentID: parent, Data: []byte(`{}`), RunID: runID,
			BlobRefs: []BlobRef{{Channel: "big", Version: version}}}
		if chunks != nil {
			p.Blobs = []CheckpointBlob{{Channel: "big", Version: version, Type: "msgpack", Chunks: chunks}}
		}
		return p
	}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: a.Digest, Size: a.Size})
	c1 := put("th", "c1", "", "1", []ChunkRef{a, b}, "r1")
	if d := w.refused(CodeMissingChunks, KindCheckpointPut, "acme", c1); fmt.Sprint(d["missing"]) != "["+b.Digest+"]" {
		t.Errorf("missing chunks: %v", d)
	}
	if refs(a) != 0 || w.f.st.Has(cpBlobKey("acme", "th", "", "big", "1")) || w.f.st.Has(checkpoints6MarkerKey) {
		t.Fatalf("a refused put left something: refs %d", refs(a))
	}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: b.Digest, Size: b.Size})
	if v := NewCommand(KindCheckpointPut, 1, "acme", "", c1).ver; v != EntryVersion6 {
		t.Errorf("entry version of a blob in chunks: %d, want 6", v)
	}
	if v := NewCommand(KindCheckpointPut, 1, "acme", "", put("th", "c1", "", "1", nil, "")).ver; v != EntryVersion5 {
		t.Errorf("entry version of a put naming it: %d, want 5", v)
	}
	w.ok(KindCheckpointPut, "acme", c1)
	// c2 names the same value (stored once), c3 the same bytes as a new
	// version: the same chunks, referenced by a second blob.
	w.ok(KindCheckpointPut, "acme", put("th", "c2", "c1", "1", nil, "r2"))
	w.ok(KindCheckpointPut, "acme", put("th", "c3", "c2", "2", []ChunkRef{a, b}, "r3"))
	if refs(a) != 2 || refs(b) != 2 || threadChunkRefs(w.f.st, "acme", "th") != 4 {
		t.Fatalf("refs %d %d, thread refs %d; want 2 2 4", refs(a), refs(b), threadChunkRefs(w.f.st, "acme", "th"))
	}
	v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c2")
	if len(v.Blobs) != 1 || len(v.Blobs[0].Chunks) != 2 || v.Blobs[0].Data != nil {
		t.Errorf("blob view: %+v", v.Blobs)
	}
	if got := w.f.CheckpointBlobChunks("acme", "th", "", "c3"); len(got) != 2 {
		t.Errorf("CheckpointBlobChunks: %v", got)
	}
	if f := snapshotFormatOf(w.f.st); f != snapshotFormat5 {
		t.Errorf("snapshot format: %d, want 5", f)
	}
	// A copy holds them too.
	w.ok(KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "th2"})
	if refs(a) != 4 {
		t.Fatalf("refs after copy: %d, want 4", refs(a))
	}
	// Run delete of c1 (in both threads): big@1 is still named by c2.
	w.ok(KindCheckpointDeleteRuns, "acme", &CheckpointDeleteRunsArgs{RunIDs: []string{"r1"}})
	if refs(a) != 4 {
		t.Fatalf("refs after deleting c1: %d, want 4", refs(a))
	}
	// Prune keep_latest: th keeps c3 (big@2); big@1 goes with c2.
	w.ok(KindThreadPrune, "acme", &ThreadPruneArgs{Threads: []string{"th"}, KeepLatest: true})
	if refs(a) != 3 || threadChunkRefs(w.f.st, "acme", "th") != 2 {
		t.Fatalf("refs after prune: %d, thread refs %d; want 3 2", refs(a), threadChunkRefs(w.f.st, "acme", "th"))
	}
	// Retention: keep the last 1 of th2; the next put deletes the others
	// (big@1 goes with th2's c2).
	w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "th2", KeepLast: 1})
	w.ok(KindCheckpointPut, "acme", put("th2", "c4", "c3", "2", nil, ""))
	if refs(a) != 2 {
		t.Fatalf("refs after retention: %d, want 2 (th's c3, th2's big@2)", refs(a))
	}
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th"})
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th2"})
	if refs(a) != 0 || refs(b) != 0 {
		t.Fatalf("refs after the threads' deletes: %d %d", refs(a), refs(b))
	}
	w.now += 100_000
	if n := obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now, Max: 10}))["collected"]; n != float64(2) {
		t.Errorf("GC after the last release: collected %v, want 2", n)
	}
	// A value held in chunks cannot have bytes too.
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: a.Digest, Size: a.Size})
	both := put("th3", "c1", "", "1", []ChunkRef{a}, "")
	both.Blobs[0].Data = []byte{1}
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", both)
}

// TestCheckpointBlobChunksShared: a chunk named by an artifact version,
// by a value held in chunks, and twice within one value is held once per
// naming; no delete of the checkpoints (re-put of the same checkpoint,
// max-age purge, thread delete) lets chunk GC take it while the artifact
// still names it, and the artifact's delete then gives it back.
func TestCheckpointBlobChunksShared(t *testing.T) {
	w := newWorld(t)
	a := ChunkRef{Digest: "sha256:" + strings.Repeat("c", 64), Size: 300}
	refs := func() uint64 {
		h, ok := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", a.Digest))
		if !ok {
			return 0
		}
		return h.Refs
	}
	gc := func() float64 {
		w.now += 10 * 3600_000
		return obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now, Max: 10}))["collected"].(float64)
	}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: a.Digest, Size: a.Size})
	w.ok(KindArtifactPublish, "acme", publishArgs("model", a.Digest, a))
	w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "th", MaxAgeMs: 1000})
	c1 := &CheckpointPutArgs{Thread: "th", ID: "c1", Data: []byte(`{}`), BlobRefs: []BlobRef{{Channel: "v", Version: "1"}},
		Blobs: []CheckpointBlob{{Channel: "v", Version: "1", Type: "bytes", Chunks: []ChunkRef{a, a}}}}
	w.ok(KindCheckpointPut, "acme", c1)
	if refs() != 3 || threadChunkRefs(w.f.st, "acme", "th") != 2 {
		t.Fatalf("refs %d, thread refs %d; want 3 (the artifact, the value twice) and 2", refs(), threadChunkRefs(w.f.st, "acme", "th"))
	}
	// The same put again is answered as done: nothing held twice.
	if r := w.ok(KindCheckpointPut, "acme", c1); r.Outcome != OutcomeOK || refs() != 3 {
		t.Fatalf("re-put: outcome %v, refs %d; want OK and 3", r.Outcome, refs())
	}
	w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "other", ID: "c1", Data: []byte(`{}`),
		BlobRefs: []BlobRef{{Channel: "v", Version: "9"}}, Blobs: []CheckpointBlob{{Channel: "v", Version: "9", Type: "bytes", Chunks: []ChunkRef{a}}}})
	// c1 expires (max age) and is purged: the value goes, its two
	// references with it; the other thread's and the artifact's stay.
	w.now += 2000
	if r := w.ok(KindCheckpointPurge, "", &CheckpointPurgeArgs{Max: 10}); string(mustJSON(r.Obj)) != `{"deleted":1}` {
		t.Fatalf("purge: %s", mustJSON(r.Obj))
	}
	if refs() != 2 || threadChunkRefs(w.f.st, "acme", "th") != 0 || w.f.st.Has(cpBlobKey("acme", "th", "", "v", "1")) {
		t.Fatalf("after the purge: refs %d, thread refs %d; want 2 and 0, the value gone", refs(), threadChunkRefs(w.f.st, "acme", "th"))
	}
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "other"})
	if refs() != 1 || gc() != 0 {
		t.Fatalf("after the threads: refs %d; want 1 (the artifact), and nothing collected", refs())
	}
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "model"})
	if refs() != 0 || gc() != 1 {
		t.Fatalf("after the artifact's delete: refs %d, want 0 and the chunk collected", refs())
	}
}
