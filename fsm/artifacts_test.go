package fsm

import (
	"fmt"
	"slices"
	"testing"
)

func chunkOf(i, size int) ChunkRef {
	return ChunkRef{Digest: fmt.Sprintf("sha256:%064x", i), Size: int64(size)}
}

func publishArgs(name, digest string, chunks ...ChunkRef) *ArtifactPublishArgs {
	a := &ArtifactPublishArgs{Name: name, Digest: digest, Chunks: chunks, MediaType: "text/plain"}
	for _, ch := range chunks {
		a.Size += ch.Size
	}
	return a
}

// TestArtifactPublish: a manifest is published only over chunks the tenant
// holds, at their held sizes, adding up to the artifact's size; versions
// count up per name; a retried publish returns the same version.
func TestArtifactPublish(t *testing.T) {
	w := newWorld(t)
	w.ok(KindTenantPut, "beta", &TenantPutArgs{Name: "beta"})
	c1, c2, c3 := chunkOf(1, 10), chunkOf(2, 20), chunkOf(3, 30)
	w.refused(CodeNotFound, KindChunkHeld, "ghost", &ChunkHeldArgs{Digest: c1.Digest, Size: c1.Size})
	if r := w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c1.Digest, Size: c1.Size}); r.Outcome != OutcomeCreated {
		t.Errorf("chunk.held: outcome %d, want created", r.Outcome)
	}
	if r := w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c1.Digest, Size: 99}); r.Outcome != OutcomeOK || obj(t, r)["size"] != float64(10) {
		t.Errorf("chunk.held again: %s, want 200 with the size first held", describe(r))
	}
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c2.Digest, Size: c2.Size})
	w.ok(KindChunkHeld, "beta", &ChunkHeldArgs{Digest: c3.Digest, Size: c3.Size}) // beta's, not acme's

	d := w.refused(CodeMissingChunks, KindArtifactPublish, "acme", publishArgs("a", "sha256:x", c1, c3, chunkOf(4, 1)))
	if missing, _ := d["missing"].([]any); len(missing) != 2 || missing[0] != c3.Digest || missing[1] != chunkOf(4, 1).Digest {
		t.Errorf("missing_chunks details: %v, want [%s %s]", d, c3.Digest, chunkOf(4, 1).Digest)
	}
	w.refused(CodeInvalidArgument, KindArtifactPublish, "acme", publishArgs("a", "sha256:x", chunkOf(1, 11)))
	bad := publishArgs("a", "sha256:x", c1)
	bad.Size++
	w.refused(CodeInvalidArgument, KindArtifactPublish, "acme", bad)

	// The empty chunk needs no hold.
	empty := ChunkRef{Digest: EmptyDigest}
	r := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1, empty, c2))
	m1 := r.Obj.(*Manifest)
	if r.Outcome != OutcomeCreated || m1.Version != 1 || m1.Size != 30 || m1.ArtifactID == "" || m1.CreatedAt != FormatMillis(w.now) {
		t.Fatalf("publish: %s", describe(r))
	}
	if r := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1, empty, c2)); r.Outcome != OutcomeOK ||
		r.Obj.(*Manifest).Version != 1 {
		t.Errorf("retried publish: %s, want version 1 again", describe(r))
	}
	m2 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v2", c2)).Obj.(*Manifest)
	if m2.Version != 2 || m2.ArtifactID == m1.ArtifactID {
		t.Errorf("second version: %+v", m2)
	}
	// The same content published again after another version is a new
	// version with the same artifact id; the id then finds the newest.
	m3 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1, empty, c2)).Obj.(*Manifest)
	if m3.Version != 3 || m3.ArtifactID != m1.ArtifactID {
		t.Errorf("republished v1 content: version %d id %s, want 3 and %s", m3.Version, m3.ArtifactID, m1.ArtifactID)
	}
	if m, _, ok := w.f.ArtifactByID("acme", m1.ArtifactID); !ok || m.Version != 3 {
		t.Errorf("ArtifactByID: %+v %v, want version 3", m, ok)
	}
	if _, _, ok := w.f.ArtifactByID("beta", m1.ArtifactID); ok {
		t.Errorf("beta finds acme's artifact by id")
	}
	if m, _, ok := w.f.ArtifactVersion("acme", "a", 0); !ok || m.Version != 3 {
		t.Errorf("latest version: %+v %v", m, ok)
	}
	if m, _, ok := w.f.ArtifactVersion("acme", "a", 2); !ok || m.Digest != "sha256:v2" {
		t.Errorf("version 2: %+v %v", m, ok)
	}
	if _, _, ok := w.f.ArtifactVersion("acme", "b", 0); ok {
		t.Errorf("latest of an unknown name found")
	}
	if vs, _ := w.f.ArtifactVersions("acme", "a"); len(vs) != 3 || vs[0].Version != 1 || vs[2].Version != 3 {
		t.Errorf("ArtifactVersions: %d versions", len(vs))
	}
	found := w.f.ChunksInArtifacts("acme", "", map[string]bool{c2.Digest: true, c3.Digest: true}, func(string) bool { return true })
	if !found[c2.Digest] || found[c3.Digest] {
		t.Errorf("ChunksInArtifacts: %v, want c2 only", found)
	}
	if found := w.f.ChunksInArtifacts("acme", "", map[string]bool{c2.Digest: true}, func(string) bool { return false }); len(found) != 0 {
		t.Errorf("ChunksInArtifacts over no visible name: %v", found)
	}

	// The manifest keeps the fence's token.
	tok := w.claim("acme", "t1", "w")
	fa := publishArgs("b", "sha256:b", c1)
	fa.TaskID, fa.Fence = "t1", &Fence{TaskID: "t1", Token: tok}
	if m := w.ok(KindArtifactPublish, "acme", fa).Obj.(*Manifest); m.FencingToken != tok || m.TaskID != "t1" {
		t.Errorf("fenced publish: token %d task %q, want %d t1", m.FencingToken, m.TaskID, tok)
	}
}

// TestChunkGC: chunk.gc drops the holds no manifest names that were held
// before Before, oldest first and at most Max; a chunk stays known while
// some tenant holds it.
func TestChunkGC(t *testing.T) {
	w := newWorld(t)
	w.ok(KindTenantPut, "beta", &TenantPutArgs{Name: "beta"})
	c1, c2, c3 := chunkOf(1, 10), chunkOf(2, 20), chunkOf(3, 30)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c1.Digest, Size: c1.Size})
	held1 := w.now
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c2.Digest, Size: c2.Size})
	w.ok(KindChunkHeld, "beta", &ChunkHeldArgs{Digest: c2.Digest, Size: c2.Size})
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c3.Digest, Size: c3.Size})
	w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:a", c3))
	if got := w.f.AllChunks(); !slices.Equal(got, []string{c1.Digest, c2.Digest, c3.Digest}) {
		t.Errorf("AllChunks: %v", got)
	}
	if w.f.OldestUnreferencedChunk() != held1 || !w.f.ChunkReferenced("acme", c3.Digest) || w.f.ChunkReferenced("acme", c1.Digest) {
		t.Errorf("oldest unreferenced %d (want %d), c3 referenced %v, c1 %v", w.f.OldestUnreferencedChunk(), held1,
			w.f.ChunkReferenced("acme", c3.Digest), w.f.ChunkReferenced("acme", c1.Digest))
	}

	if n := obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: held1, Max: 10}))["collected"]; n != float64(0) {
		t.Errorf("gc before the oldest hold: collected %v", n)
	}
	if n := obj(t, w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now + 1, Max: 2}))["collected"]; n != float64(2) {
		t.Errorf("gc with Max 2: collected %v", n)
	}
	missing, _ := w.f.ChunksHeld("acme", []string{c1.Digest, c2.Digest, c3.Digest, EmptyDigest})
	if !slices.Equal(missing, []string{c1.Digest, c2.Digest}) {
		t.Errorf("acme after gc misses %v, want c1 and c2 (c3 is referenced)", missing)
	}
	if _, ok := w.f.ChunkKnown(c1.Digest); ok {
		t.Errorf("c1 still known after its only hold was collected")
	}
	if size, ok := w.f.ChunkKnown(c2.Digest); !ok || size != 20 {
		t.Errorf("c2, still held by beta: known %v size %d", ok, size)
	}
	if _, ok := w.f.ChunkKnown(EmptyDigest); !ok {
		t.Errorf("the empty chunk is not known")
	}
	w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now + 1, Max: 10})
	if _, ok := w.f.ChunkKnown(c2.Digest); ok || w.f.OldestUnreferencedChunk() != 0 {
		t.Errorf("after collecting beta's hold: c2 known %v, oldest unreferenced %d", ok, w.f.OldestUnreferencedChunk())
	}
	if _, ok := w.f.ChunkKnown(c3.Digest); !ok {
		t.Errorf("a referenced chunk was collected")
	}
	// A collected chunk must be held again before a manifest may name it.
	w.refused(CodeMissingChunks, KindArtifactPublish, "acme", publishArgs("b", "sha256:b", c1))
}
