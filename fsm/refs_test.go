package fsm

import (
	"fmt"
	"testing"
)

// publish holds one chunk and publishes an artifact of it; it returns the
// manifest.
func (w *world) publish(tenant, name, digest string) *Manifest {
	w.t.Helper()
	ch := ChunkRef{Digest: fmt.Sprintf("sha256:%064x", len(digest)), Size: 3}
	w.ok(KindChunkHeld, tenant, &ChunkHeldArgs{Digest: ch.Digest, Size: ch.Size})
	return w.ok(KindArtifactPublish, tenant, &ArtifactPublishArgs{Name: name, Digest: digest, Size: ch.Size,
		Chunks: []ChunkRef{ch}}).Obj.(*Manifest)
}

// TestRefCompareAndSet: a ref moves only when its expectation holds ("":
// absent), a refused move reports where the ref points, a move to where it
// already points is a no-op whatever the expectation, and the revision
// grows by one per move.
func TestRefCompareAndSet(t *testing.T) {
	w := newWorld(t)
	a1 := w.publish("acme", "report", "sha256:r1")
	a2 := w.publish("acme", "report", "sha256:r22")
	other := w.publish("acme", "other", "sha256:o")

	w.refused(CodeNotFound, KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: "sha256:none"})
	w.refused(CodeVersionMismatch, KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a1.ArtifactID, ExpectArtifactID: ptr(a2.ArtifactID)})
	ref := w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a1.ArtifactID, ExpectArtifactID: ptr("")}).Obj.(*Ref)
	if ref.Revision != 1 || ref.Name != "report" || ref.Version != 1 || ref.ArtifactID != a1.ArtifactID {
		t.Fatalf("new ref: %+v, want revision 1 at report v1", ref)
	}
	d := w.refused(CodeVersionMismatch, KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a2.ArtifactID, ExpectArtifactID: ptr("")})
	if d["artifact_id"] != a1.ArtifactID {
		t.Errorf("refused create: details artifact_id %v, want %s", d["artifact_id"], a1.ArtifactID)
	}
	w.refused(CodeVersionMismatch, KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a2.ArtifactID, ExpectArtifactID: ptr(other.ArtifactID)})

	// A retried move: already there, so answered as it is, same revision.
	same := w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a1.ArtifactID, ExpectArtifactID: ptr("")}).Obj.(*Ref)
	if *same != *ref {
		t.Errorf("move to where the ref points: got %+v, want it unchanged %+v", same, ref)
	}
	moved := w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: a2.ArtifactID, ExpectArtifactID: ptr(a1.ArtifactID)}).Obj.(*Ref)
	if moved.Revision != 2 || moved.Version != 2 || moved.UpdatedAt != FormatMillis(w.now) {
		t.Errorf("moved ref: %+v, want revision 2 at report v2, updated now", moved)
	}
	moved = w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "cur", ArtifactID: other.ArtifactID}).Obj.(*Ref) // unconditional
	if moved.Revision != 3 || moved.Name != "other" {
		t.Errorf("unconditional move: %+v, want revision 3 at other", moved)
	}
	if got, _, ok := w.f.GetRef("acme", "cur"); !ok || *got != *moved {
		t.Errorf("GetRef: %+v %v, want %+v", got, ok, moved)
	}

	// Another tenant neither sees the ref nor can point at acme's artifact.
	w.ok(KindTenantPut, "beta", &TenantPutArgs{Name: "beta"})
	if _, _, ok := w.f.GetRef("beta", "cur"); ok {
		t.Errorf("beta sees acme's ref")
	}
	w.refused(CodeNotFound, KindRefSet, "beta", &RefSetArgs{Ref: "cur", ArtifactID: a1.ArtifactID})
}

func TestRefDeleteAndList(t *testing.T) {
	w := newWorld(t)
	a := w.publish("acme", "report", "sha256:r1")
	for _, r := range []string{"x/1", "x/2", "y/1"} {
		w.ok(KindRefSet, "acme", &RefSetArgs{Ref: r, ArtifactID: a.ArtifactID})
	}
	if refs, _ := w.f.ListRefs("acme", "x/", nil); len(refs) != 2 || refs[0].Ref != "x/1" || refs[1].Ref != "x/2" {
		t.Errorf("ListRefs x/: got %d refs, want x/1 and x/2", len(refs))
	}
	if refs, _ := w.f.ListRefs("acme", "", func(r *Ref) bool { return r.Ref != "x/2" }); len(refs) != 2 {
		t.Errorf("ListRefs with visible: got %d refs, want 2", len(refs))
	}
	w.refused(CodeNotFound, KindRefDelete, "acme", &RefDeleteArgs{Ref: "z"})
	d := w.refused(CodeVersionMismatch, KindRefDelete, "acme", &RefDeleteArgs{Ref: "x/1", ExpectArtifactID: ptr("")})
	if d["artifact_id"] != a.ArtifactID {
		t.Errorf("refused delete: details artifact_id %v, want %s", d["artifact_id"], a.ArtifactID)
	}
	if r := w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "x/1", ExpectArtifactID: &a.ArtifactID}); r.Outcome != OutcomeNoContent {
		t.Errorf("delete: outcome %d, want no content", r.Outcome)
	}
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "x/2"})
	if refs, _ := w.f.ListRefs("acme", "", nil); len(refs) != 1 || refs[0].Ref != "y/1" {
		t.Errorf("after deletes: %d refs, want y/1 only", len(refs))
	}
	// Re-created, a ref starts again at revision 1.
	if r := w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "x/1", ArtifactID: a.ArtifactID, ExpectArtifactID: ptr("")}).Obj.(*Ref); r.Revision != 1 {
		t.Errorf("re-created ref: revision %d, want 1", r.Revision)
	}
}
