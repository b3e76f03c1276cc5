package fsm

import (
	"slices"
	"strings"
	"testing"
)

// versionsOf is the version numbers of a name, oldest first.
func versionsOf(w *world, name string) []uint64 {
	list, _ := w.f.ArtifactVersions("acme", name)
	var out []uint64
	for _, m := range list {
		out = append(out, m.Version)
	}
	return out
}

// TestArtifactDeleteVersion: a version goes with its manifest, its chunk
// references and a watch event; one a ref points at is refused with the
// ref's name until the ref moves; the guards and a missing version are
// refused without a change.
func TestArtifactDeleteVersion(t *testing.T) {
	w := newWorld(t)
	c1, c2 := chunkOf(1, 10), chunkOf(2, 20)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c1.Digest, Size: c1.Size})
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c2.Digest, Size: c2.Size})
	m1 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1, c2)).Obj.(*Manifest)
	m2 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v2", c2)).Obj.(*Manifest)
	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "a/approved", ArtifactID: m1.ArtifactID})
	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "a/draft", ArtifactID: m1.ArtifactID})

	d := w.refused(CodeReferenced, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 1})
	if refs, _ := d["refs"].([]any); len(refs) != 2 || refs[0] != "a/approved" || refs[1] != "a/draft" {
		t.Errorf("referenced details: %v, want refs a/approved and a/draft", d)
	}
	w.refused(CodeNotFound, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 3})
	w.refused(CodeNotFound, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "b", Version: 1})
	other := m2.ArtifactID
	w.refused(CodeVersionMismatch, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 1, ExpectArtifactID: &other})

	// Once both refs point elsewhere, version 1 may go.
	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "a/approved", ArtifactID: m2.ArtifactID})
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "a/draft"})
	index := w.index + 1
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 1, ExpectArtifactID: &m1.ArtifactID})
	if got := versionsOf(w, "a"); !slices.Equal(got, []uint64{2}) {
		t.Errorf("versions after deleting 1: %v, want [2]", got)
	}
	if _, _, ok := w.f.ArtifactByID("acme", m1.ArtifactID); ok {
		t.Errorf("the deleted version's artifact id still resolves")
	}
	evs := eventsAt(w, index)
	if len(evs) != 1 || evs[0].Resource != ResourceArtifacts || evs[0].Type != EventDelete || evs[0].Key != "a/"+versionHex(1) {
		t.Errorf("events of the delete: %+v, want one artifacts delete of a/%s", evs, versionHex(1))
	}
	// c1 is named by no version any more: back in the GC index, from the
	// delete's time; c2 is still named by version 2.
	if w.f.ChunkReferenced("acme", c1.Digest) || !w.f.ChunkReferenced("acme", c2.Digest) {
		t.Errorf("after the delete: c1 referenced %v (want false), c2 %v (want true)",
			w.f.ChunkReferenced("acme", c1.Digest), w.f.ChunkReferenced("acme", c2.Digest))
	}
	if got := w.f.OldestUnreferencedChunk(); got != w.now {
		t.Errorf("oldest unreferenced chunk held at %d, want the delete's time %d", got, w.now)
	}
	w.ok(KindChunkGC, "", &ChunkGCArgs{Before: w.now + 1, Max: 10})
	if missing, _ := w.f.ChunksHeld("acme", []string{c1.Digest, c2.Digest}); !slices.Equal(missing, []string{c1.Digest}) {
		t.Errorf("after chunk gc the tenant misses %v, want only c1", missing)
	}

	// The last version's delete ends the name: its next publication is 1.
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "a/approved"})
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 2})
	if m := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v3", c2)).Obj.(*Manifest); m.Version != 1 {
		t.Errorf("publish after every version went: version %d, want 1", m.Version)
	}
}

// eventsAt is the watch events of the command applied at index.
func eventsAt(w *world, index uint64) []Event {
	var out []Event
	evs, _ := w.f.History().Since(index-1, -1, 100)
	for _, e := range evs {
		if e.Index == index {
			out = append(out, e)
		}
	}
	return out
}

// TestArtifactDeleteWhole: a whole-name delete takes every version under
// its expect_version guard, refused as a whole while any version is
// referenced; an id published twice resolves to the surviving version.
func TestArtifactDeleteWhole(t *testing.T) {
	w := newWorld(t)
	c1, c2 := chunkOf(1, 10), chunkOf(2, 20)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c1.Digest, Size: c1.Size})
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c2.Digest, Size: c2.Size})
	m1 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1)).Obj.(*Manifest)
	w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v2", c2))
	m3 := w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:v1", c1)).Obj.(*Manifest) // v1's content again
	if m3.ArtifactID != m1.ArtifactID {
		t.Fatalf("republished content has id %s, want %s", m3.ArtifactID, m1.ArtifactID)
	}
	w.ok(KindArtifactPublish, "acme", publishArgs("b", "sha256:b", c1))

	// Deleting version 3 hands the id back to version 1.
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 3})
	if m, _, ok := w.f.ArtifactByID("acme", m1.ArtifactID); !ok || m.Version != 1 {
		t.Errorf("id after deleting its newest publication: %+v %v, want version 1", m, ok)
	}
	if !w.f.ChunkReferenced("acme", c1.Digest) {
		t.Errorf("c1, still named by a/1 and b/1, lost its reference")
	}

	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "pin", ArtifactID: m1.ArtifactID})
	w.refused(CodeReferenced, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a"})
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "pin"})
	d := w.refused(CodeVersionMismatch, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", ExpectVersion: ptr(uint64(3))})
	if d["current_version"] != float64(2) {
		t.Errorf("version_mismatch details %v, want current_version 2", d)
	}
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", ExpectVersion: ptr(uint64(2))})
	if got := versionsOf(w, "a"); len(got) != 0 {
		t.Errorf("versions after the whole delete: %v", got)
	}
	w.refused(CodeNotFound, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a"})
	if w.f.ChunkReferenced("acme", c2.Digest) || !w.f.ChunkReferenced("acme", c1.Digest) {
		t.Errorf("after the whole delete: c2 referenced %v (want false), c1 (named by b) %v (want true)",
			w.f.ChunkReferenced("acme", c2.Digest), w.f.ChunkReferenced("acme", c1.Digest))
	}
	if got := w.f.Status().Keys; got == 0 {
		t.Fatal("empty state")
	}
	list, _, _ := w.f.ListArtifacts("acme", "", "", 10, nil)
	if len(list) != 1 || list[0].Name != "b" {
		t.Errorf("listing after the whole delete: %+v, want only b", list)
	}
}

// TestArtifactPolicyTrims: a keep-last policy of the longest matching
// prefix trims a name's oldest versions when a new one is published,
// skipping those a ref points at; 0 clears it; a tenant's policies are
// bounded; the marker makes snapshots refuse older members.
func TestArtifactPolicyTrims(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c.Digest, Size: c.Size})
	publish := func(name, digest string) *Manifest {
		t.Helper()
		return w.ok(KindArtifactPublish, "acme", publishArgs(name, digest, c)).Obj.(*Manifest)
	}
	m1 := publish("run-a", "sha256:1")
	publish("run-a", "sha256:2")
	publish("run-a", "sha256:3")
	if hdr := snapshotHeader(t, persist(t, w.f)); hdr.Format != snapshotFormat {
		t.Errorf("snapshot format before any policy: %d, want %d", hdr.Format, snapshotFormat)
	}
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "run", KeepLast: 5})
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "run-", KeepLast: 2}) // the longer prefix wins
	if hdr := snapshotHeader(t, persist(t, w.f)); hdr.Format != snapshotFormat3 {
		t.Errorf("snapshot format with a policy: %d, want %d", hdr.Format, snapshotFormat3)
	}
	if ps, _ := w.f.ArtifactPolicies("acme"); len(ps) != 2 || ps[0].Prefix != "run" || ps[1].KeepLast != 2 {
		t.Errorf("policies: %+v", ps)
	}
	// Setting a policy trims nothing by itself.
	if got := versionsOf(w, "run-a"); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("versions after setting the policy: %v", got)
	}
	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "keep", ArtifactID: m1.ArtifactID})
	publish("run-a", "sha256:4")
	if got := versionsOf(w, "run-a"); !slices.Equal(got, []uint64{1, 3, 4}) {
		t.Errorf("versions after a publish under keep-last 2: %v, want [1 3 4] (1 is referenced)", got)
	}
	publish("other", "sha256:o1")
	publish("other", "sha256:o2")
	publish("other", "sha256:o3")
	if got := versionsOf(w, "other"); len(got) != 3 {
		t.Errorf("a name no policy covers lost versions: %v", got)
	}
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "keep"})
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "run-", KeepLast: 0}) // cleared: "run" keeps 5
	publish("run-a", "sha256:5")
	if got := versionsOf(w, "run-a"); !slices.Equal(got, []uint64{1, 3, 4, 5}) {
		t.Errorf("versions under keep-last 5: %v, want [1 3 4 5]", got)
	}
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "", KeepLast: 1})
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "run", KeepLast: 1})
	publish("run-a", "sha256:6")
	if got := versionsOf(w, "run-a"); !slices.Equal(got, []uint64{6}) {
		t.Errorf("versions under keep-last 1: %v, want [6]", got)
	}

	for i := range MaxArtifactPolicies - 2 {
		w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "p" + strings.Repeat("x", i), KeepLast: 3})
	}
	w.refused(CodeResourceExhausted, KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "one-too-many", KeepLast: 3})
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "run", KeepLast: 4}) // changing one is fine
	w.refused(CodeNotFound, KindArtifactPolicy, "ghost", &ArtifactPolicyArgs{Prefix: "run", KeepLast: 4})
}

// TestListArtifacts: names under a prefix with their newest version and
// count, paged by the last name, filtered by visible.
func TestListArtifacts(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c.Digest, Size: c.Size})
	for i, name := range []string{"r-1", "r-2", "r-2", "r-3", "s-1", "r-2"} {
		w.ok(KindArtifactPublish, "acme", publishArgs(name, "sha256:"+string(rune('a'+i)), c))
	}
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "r-2", Version: 1})
	list, next, _ := w.f.ListArtifacts("acme", "r-", "", 2, nil)
	if len(list) != 2 || *list[0] != (ArtifactSummary{"r-1", 1, 1}) || *list[1] != (ArtifactSummary{"r-2", 3, 2}) || next != "r-2" {
		t.Fatalf("first page: %+v next %q", list, next)
	}
	list, next, _ = w.f.ListArtifacts("acme", "r-", next, 2, nil)
	if len(list) != 1 || list[0].Name != "r-3" || next != "" {
		t.Fatalf("second page: %+v next %q", list, next)
	}
	list, _, _ = w.f.ListArtifacts("acme", "", "", 100, func(name string) bool { return name != "r-2" })
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"r-1", "r-3", "s-1"}) {
		t.Errorf("visible names: %v", names)
	}
	if list, _, _ := w.f.ListArtifacts("beta", "", "", 100, nil); len(list) != 0 {
		t.Errorf("another tenant's listing: %+v", list)
	}
}
