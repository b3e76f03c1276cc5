package fsm

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// Bounded work: these tests count the keys a command or a read reads
// (Store.reads), never time, and hold each to a bound that does not grow
// with what the command leaves alone.

// readsOf is how many keys fn made the store read.
func (w *world) readsOf(fn func()) int64 {
	var n atomic.Int64
	w.f.st.reads = &n
	defer func() { w.f.st.reads = nil }()
	fn()
	w.t.Logf("%d keys read", n.Load())
	return n.Load()
}

// publishN publishes n versions of name, each naming chunks.
func (w *world) publishN(name string, n int, chunks ...ChunkRef) {
	w.t.Helper()
	for _, c := range chunks {
		w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c.Digest, Size: c.Size})
	}
	for v := range n {
		w.ok(KindArtifactPublish, "acme", publishArgs(name, fmt.Sprintf("sha256:%032x%032x", len(name), v+1), chunks...))
	}
}

func TestArtifactWholeDeleteReadsEachVersionOnce(t *testing.T) {
	w := newWorld(t)
	var chunks []ChunkRef
	for i := range 10 {
		chunks = append(chunks, chunkOf(i+1, 10))
	}
	const versions = 300
	w.publishN("a", versions, chunks...)
	reads := w.readsOf(func() { w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a"}) })
	// Each version: its manifest, its chunks' holds, its id's entry.
	if bound := int64(versions*(len(chunks)+4) + 100); reads > bound {
		t.Errorf("a whole-name delete of %d versions read %d keys, more than %d: some are read again per version", versions, reads, bound)
	}
	for _, c := range chunks {
		if h, _ := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", c.Digest)); h == nil || h.Refs != 0 {
			t.Fatalf("chunk %s after the delete: %+v, want held without references", c.Digest, h)
		}
	}
	if vs, _ := w.f.ArtifactVersions("acme", "a"); len(vs) != 0 {
		t.Errorf("versions of a deleted name: %d", len(vs))
	}
}

func TestArtifactDeleteCapReadsNoVersion(t *testing.T) {
	w := newWorld(t)
	w.publishN("big", MaxArtifactDeleteVersions+1, chunkOf(1, 10))
	reads := w.readsOf(func() { w.refused(CodeInvalidArgument, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "big"}) })
	if reads > 50 {
		t.Errorf("refusing a delete of %d versions read %d keys: the cap must be checked before reading versions", MaxArtifactDeleteVersions+1, reads)
	}
}

func TestArtifactVersionDeleteReadsNoOtherVersionOrRef(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	w.publishN("a", 2000, c)
	newest, _, _ := w.f.ArtifactVersion("acme", "a", 0)
	for i := range 500 {
		w.ok(KindRefSet, "acme", &RefSetArgs{Ref: fmt.Sprintf("r/%d", i), ArtifactID: newest.ArtifactID})
	}
	reads := w.readsOf(func() { w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 1}) })
	if reads > 50 {
		t.Errorf("deleting one version of 2,000 in a tenant of 500 refs read %d keys", reads)
	}
	// The refs still pin the newest: refused, with their count and the
	// first names in name order.
	d := w.refused(CodeReferenced, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: newest.Version})
	refs := d["refs"].([]any)
	if len(refs) != maxReferencedRefs || refs[0] != "r/0" || refs[1] != "r/1" || refs[2] != "r/10" {
		t.Errorf("referenced refs: %d, first %v", len(refs), refs[:3])
	}
}

func TestArtifactIDMovesToTheNextNewestVersion(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c.Digest, Size: c.Size})
	a := publishArgs("a", "sha256:"+strings.Repeat("a", 64), c)
	b := publishArgs("a", "sha256:"+strings.Repeat("b", 64), c)
	m1 := w.ok(KindArtifactPublish, "acme", a).Obj.(*Manifest)
	w.ok(KindArtifactPublish, "acme", b)
	w.ok(KindArtifactPublish, "acme", a) // version 3, the id of version 1
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 3})
	if m, _, ok := w.f.ArtifactByID("acme", m1.ArtifactID); !ok || m.Version != 1 {
		t.Fatalf("id after deleting its newest version: %+v, want version 1", m)
	}
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "a", Version: 1})
	if _, _, ok := w.f.ArtifactByID("acme", m1.ArtifactID); ok {
		t.Fatal("id after deleting its last version: still found")
	}
}

func TestTrimReadsTheOldestVersionsOnly(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	const versions = 3000
	w.publishN("a", versions, c)
	newest, _, _ := w.f.ArtifactVersion("acme", "a", 0)
	for i := range 500 {
		w.ok(KindRefSet, "acme", &RefSetArgs{Ref: fmt.Sprintf("r/%d", i), ArtifactID: newest.ArtifactID})
	}
	w.ok(KindArtifactPolicy, "acme", &ArtifactPolicyArgs{Prefix: "a", KeepLast: 1})
	reads := w.readsOf(func() { w.ok(KindArtifactPublish, "acme", publishArgs("a", "sha256:"+strings.Repeat("f", 64), c)) })
	if bound := int64(artifactTrimPerPublish*8 + 100); reads > bound {
		t.Errorf("a publish trimming %d of %d versions read %d keys, more than %d", artifactTrimPerPublish, versions, reads, bound)
	}
	if vs, _ := w.f.ArtifactVersions("acme", "a"); len(vs) != versions+1-artifactTrimPerPublish {
		t.Errorf("versions after one trim: %d, want %d", len(vs), versions+1-artifactTrimPerPublish)
	}
	if _, _, ok := w.f.ArtifactVersion("acme", "a", artifactTrimPerPublish); ok {
		t.Errorf("version %d (among the oldest) survived the trim", artifactTrimPerPublish)
	}
	if _, _, ok := w.f.ArtifactVersion("acme", "a", artifactTrimPerPublish+1); !ok {
		t.Errorf("version %d was trimmed: more than %d in one publish", artifactTrimPerPublish+1, artifactTrimPerPublish)
	}
}

// TestThreadChunkRefsCapped: the checkpoints of one thread hold at most
// MaxThreadChunkRefs chunk references together, so the one command that
// deletes the thread releases at most that many; a put past it is refused
// and changes nothing, and the delete frees the thread for more.
func TestThreadChunkRefsCapped(t *testing.T) {
	skipUnderRace(t)
	w := newWorld(t)
	const per = 1024
	var chunks []ChunkRef
	for i := range per {
		c := chunkOf(i+1, 10)
		w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: c.Digest, Size: c.Size})
		chunks = append(chunks, c)
	}
	put := func(i int) *Result {
		ns := fmt.Sprintf("ns%d", i%3) // the count is the thread's, over its namespaces
		return w.do(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: ns, ID: fmt.Sprintf("c%03d", i), ParentID: "", Fork: true, Chunks: chunks})
	}
	n := MaxThreadChunkRefs / per
	for i := range n {
		if r := put(i); !r.OK() {
			t.Fatalf("put %d of %d chunks: %s %s", i, per, r.Code, r.Message)
		}
	}
	w.refused(CodeResourceExhausted, KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: "ns0", ID: "over", Fork: true, Chunks: chunks})
	var r *Result
	reads := w.readsOf(func() { r = w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th"}) })
	if bound := int64(2*MaxThreadChunkRefs + 20*n + 64); reads > bound {
		t.Errorf("the thread delete read %d keys, more than %d", reads, bound)
	}
	if r.Outcome != OutcomeNoContent {
		t.Fatalf("thread delete: %+v", r)
	}
	for _, c := range chunks {
		if h, _ := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", c.Digest)); h == nil || h.Refs != 0 {
			t.Fatalf("chunk %s after the delete: %+v, want held without references", c.Digest, h)
		}
	}
	w.f.st.Scan(threadPrefix("acme", "th"), "", func(k string, _ []byte) bool {
		t.Errorf("key left after the delete: %s", k)
		return true
	})
	if r := put(0); !r.OK() {
		t.Fatalf("a put after the delete: %s %s", r.Code, r.Message)
	}
}

func TestListCheckpointsBoundsItsWalk(t *testing.T) {
	w := newWorld(t)
	parent := ""
	for i := range MaxListWalk + 5 {
		id := fmt.Sprintf("c%06d", i)
		w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: id, ParentID: parent, Data: []byte(`1`)})
		parent = id
	}
	examined := 0
	none := func([]byte) bool { examined++; return false }
	out, next, _, _ := w.f.ListCheckpoints("acme", "th", "", "", 10, none, false)
	if len(out) != 0 || next == "" || examined != MaxListWalk {
		t.Fatalf("a filter that matches nothing: %d answered, next %q, %d examined; want none, a next, %d examined", len(out), next, examined, MaxListWalk)
	}
	out, next, _, _ = w.f.ListCheckpoints("acme", "th", "", next, 10, none, false)
	if len(out) != 0 || next != "" || examined != MaxListWalk+5 {
		t.Fatalf("the next page: %d answered, next %q, %d examined in all; want the last 5 examined and no next", len(out), next, examined)
	}
	// Without a filter, limit ends the page as before, with a next.
	out, next, _, _ = w.f.ListCheckpoints("acme", "th", "", "", 3, nil, false)
	if len(out) != 3 || next != out[2].ID {
		t.Errorf("limit 3: %d, next %q", len(out), next)
	}
}

func TestListArtifactsBoundsItsWalk(t *testing.T) {
	w := newWorld(t)
	c := chunkOf(1, 10)
	w.publishN("many", 5000, c)
	var out []*ArtifactSummary
	reads := w.readsOf(func() { out, _, _ = w.f.ListArtifacts("acme", "", "", 10, nil) })
	if len(out) != 1 || out[0].Versions != 5000 || out[0].LatestVersion != 5000 {
		t.Fatalf("list: %+v", out)
	}
	if reads > 10 {
		t.Errorf("listing one name of 5,000 versions read %d keys", reads)
	}
	for i := range MaxListWalk + 5 {
		w.ok(KindArtifactPublish, "acme", publishArgs(fmt.Sprintf("n%05d", i), "sha256:"+strings.Repeat("e", 64), c))
	}
	examined := 0
	hidden := func(string) bool { examined++; return false }
	out, next, _ := w.f.ListArtifacts("acme", "n", "", 10, hidden)
	if len(out) != 0 || next == "" || examined != MaxListWalk {
		t.Fatalf("nothing visible: %d answered, next %q, %d examined; want none, a next, %d examined", len(out), next, examined, MaxListWalk)
	}
	out, next, _ = w.f.ListArtifacts("acme", "n", next, 10, hidden)
	if len(out) != 0 || next != "" || examined != MaxListWalk+5 {
		t.Fatalf("the next page: %d answered, next %q, %d examined in all", len(out), next, examined)
	}
}

func TestListQueuesBoundsItsWalk(t *testing.T) {
	w := newWorld(t)
	for i := range MaxListWalk + 5 {
		w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: fmt.Sprintf("t%05d", i), Queue: fmt.Sprintf("q%05d", i)})
	}
	examined := 0
	hidden := func(string) bool { examined++; return false }
	out, next, _ := w.f.ListQueues("acme", "", 10, hidden)
	if len(out) != 0 || next == "" || examined != MaxListWalk {
		t.Fatalf("nothing visible: %d answered, next %q, %d examined; want none, a next, %d examined", len(out), next, examined, MaxListWalk)
	}
	out, next, _ = w.f.ListQueues("acme", next, 10, hidden)
	if len(out) != 0 || next != "" || examined != MaxListWalk+5 {
		t.Fatalf("the next page: %d answered, next %q, %d examined in all", len(out), next, examined)
	}
}

// TestArtIndexMatchesState holds the artifact index the store keeps
// through commands, failed ones and transactions included, to one rebuilt
// from its keys, as a restore does.
func TestArtIndexMatchesState(t *testing.T) {
	refs, versions := 0, 0
	for seed := range uint64(8) {
		f := New()
		for _, l := range randomLog(seed, 400) {
			f.Apply(l)
		}
		rebuilt := newStore()
		f.st.ascend(func(k string, v []byte) bool {
			rebuilt.Put(k, v)
			return true
		})
		if got, want := dumpArtIndex(f.st.arts), dumpArtIndex(rebuilt.arts); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: kept index\n%v\nrebuilt from the keys\n%v", seed, got, want)
		}
		refs += f.st.arts.refs.Len()
		versions += len(f.st.arts.versions)
	}
	if refs == 0 || versions == 0 {
		t.Fatalf("the logs left %d refs and %d names: they exercise too little", refs, versions)
	}
}

func dumpArtIndex(x *artIndex) map[string]any {
	var ids, refs []string
	x.ids.Ascend(func(k string) bool { ids = append(ids, k); return true })
	x.refs.Ascend(func(k string) bool { refs = append(refs, k); return true })
	return map[string]any{"versions": x.versions, "ids": ids, "refs": refs, "refCount": x.refCount}
}

// TestListTasksBoundsItsWalk: a filter or grants that refuse every task
// end a page after MaxListWalk tasks examined, empty, with a token that
// carries on from there.
func TestListTasksBoundsItsWalk(t *testing.T) {
	w := newWorld(t)
	const n = MaxListWalk + 100
	for i := range n {
		q := "a"
		if i >= n-2 {
			q = "b" // the last two ids
		}
		w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: fmt.Sprintf("t%05d", i), Queue: q})
	}
	for _, tc := range []struct {
		name string
		flt  TaskFilter
	}{
		{"queue filter", TaskFilter{Queue: "b", Limit: 10}},
		{"status filter", TaskFilter{Status: "done", Limit: 10}},
		{"owner filter", TaskFilter{Owner: "w", Limit: 10}},
		{"no grant", TaskFilter{Limit: 10, Visible: func(t *Task) bool { return t.Queue == "b" }}},
	} {
		var out []*Task
		var next string
		reads := w.readsOf(func() { out, next, _ = w.f.ListTasks("acme", tc.flt) })
		if len(out) != 0 || next == "" || reads > MaxListWalk+10 {
			t.Fatalf("%s: %d answered, next %q, %d keys read; want none, a next, at most %d read", tc.name, len(out), next, reads, MaxListWalk+10)
		}
		flt := tc.flt
		flt.PageToken = next
		out, next, _ = w.f.ListTasks("acme", flt)
		if tc.flt.Queue == "b" || tc.flt.Visible != nil {
			if len(out) != 2 || out[0].ID != fmt.Sprintf("t%05d", n-2) || next != "" {
				t.Errorf("%s, the next page: %d answered, next %q; want the last two and no next", tc.name, len(out), next)
			}
		} else if len(out) != 0 || next != "" {
			t.Errorf("%s, the next page: %d answered, next %q; want none and no next", tc.name, len(out), next)
		}
	}
	// A page full at its limit has a token only when another task matches.
	out, next, _ := w.f.ListTasks("acme", TaskFilter{Queue: "b", Limit: 1, PageToken: base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("t%05d", n-3)))})
	if len(out) != 1 || next == "" {
		t.Fatalf("limit 1 of 2: %d answered, next %q", len(out), next)
	}
	out, next, _ = w.f.ListTasks("acme", TaskFilter{Queue: "b", Limit: 1, PageToken: next})
	if len(out) != 1 || out[0].ID != fmt.Sprintf("t%05d", n-1) || next != "" {
		t.Errorf("the second of 2: %d answered, next %q", len(out), next)
	}
}

// TestListKVBoundsItsWalk: grants that refuse every entry, or entries past
// their TTL, end a page after MaxListWalk entries examined, empty, with a
// key that carries on from there.
func TestListKVBoundsItsWalk(t *testing.T) {
	w := newWorld(t)
	const n = MaxListWalk + 100
	for i := range n {
		a := &KVPutArgs{Namespace: "ns", Key: fmt.Sprintf("k%05d", i), Value: []byte(`1`)}
		if i < MaxListWalk {
			a.TTLMs = 1000 // expired below, not yet purged
		}
		w.ok(KindKVPut, "acme", a)
	}
	hidden := func(*KVEntry) bool { return false }
	for _, tc := range []struct {
		name    string
		now     int64
		visible func(*KVEntry) bool
		want    int // on the next page
	}{
		{"nothing visible", w.now, hidden, 0},
		{"expired entries", w.now + 2000, nil, 100},
	} {
		var out []*KVEntry
		var next string
		reads := w.readsOf(func() { out, next, _ = w.f.ListKV("acme", "ns", "", "", 10, tc.now, tc.visible) })
		if len(out) != 0 || next == "" || reads > MaxListWalk+10 {
			t.Fatalf("%s: %d answered, next %q, %d keys read; want none, a next, at most %d read", tc.name, len(out), next, reads, MaxListWalk+10)
		}
		out, next, _ = w.f.ListKV("acme", "ns", "", next, 1000, tc.now, tc.visible)
		if len(out) != tc.want || next != "" {
			t.Errorf("%s, the next page: %d answered, next %q; want %d and no next", tc.name, len(out), next, tc.want)
		}
	}
}

// TestArtifactWholeDeleteChunkRefsCapped: a whole-name delete that would
// release more than MaxArtifactDeleteChunkRefs chunk references is refused
// before any version is deleted, from the front of each manifest, with the
// detail that sends the SDK to delete version by version; under the cap
// the name goes in one command.
func TestArtifactWholeDeleteChunkRefsCapped(t *testing.T) {
	skipUnderRace(t)
	w := newWorld(t)
	const per = 10_000 // about what a manifest within the 1 MiB request limit names
	chunks := make([]ChunkRef, per)
	for i := range chunks {
		chunks[i] = chunkOf(i+1, 10)
	}
	versions := 65_536/per + 1 // past MaxArtifactDeleteChunkRefs
	w.publishN("big", versions, chunks...)
	var d map[string]any
	reads := w.readsOf(func() {
		d = w.refused(CodeInvalidArgument, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "big"})
	})
	if bound := int64(versions + 20); reads > bound {
		t.Errorf("refusing a delete of %d chunk references read %d keys, more than %d: the count must come from the manifests' fronts", versions*per, reads, bound)
	}
	if d["delete_by_version"] != true || d["chunk_refs"] != float64(versions*per) || d["versions"] != float64(versions) {
		t.Errorf("details %v, want delete_by_version, chunk_refs %d, versions %d", d, versions*per, versions)
	}
	// A ref is the first refusal: deleting version by version would stop at it.
	oldest, _, _ := w.f.ArtifactVersion("acme", "big", 1)
	w.ok(KindRefSet, "acme", &RefSetArgs{Ref: "pin", ArtifactID: oldest.ArtifactID})
	w.refused(CodeReferenced, KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "big"})
	w.ok(KindRefDelete, "acme", &RefDeleteArgs{Ref: "pin"})
	// One version fewer is within the cap: one command deletes the rest.
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "big", Version: 1})
	w.ok(KindArtifactDelete, "acme", &ArtifactDeleteArgs{Name: "big"})
	if h, _ := getRecord[chunkHold](w.f.st, chunkHoldKey("acme", chunks[0].Digest)); h == nil || h.Refs != 0 {
		t.Fatalf("a chunk after the delete: %+v, want held without references", h)
	}
}

// TestManifestHead: the id and chunk count read from a manifest's front
// are those of the decoded manifest, for every array header the codec
// writes (nil, fixarray, array 16, array 32).
func TestManifestHead(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 15, 16, 65_535, 65_536, 70_000} {
		m := &Manifest{ArtifactID: "sha256:" + strings.Repeat("a", 64), Name: "n", Version: 3}
		if n >= 0 {
			m.Chunks = make([]ChunkRef, n)
			for i := range m.Chunks {
				m.Chunks[i] = chunkOf(i, 1)
			}
		}
		id, chunks, ok := manifestHead(encode(m))
		if !ok || id != m.ArtifactID || chunks != len(m.Chunks) {
			t.Errorf("%d chunks: head %q %d %v", n, id, chunks, ok)
		}
	}
}
