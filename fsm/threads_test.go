package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// threadWorld puts thread th: c1 <- c2 <- c3 in the default namespace
// (c2 with run r1, c3 with run r2) and s1 <- s2 in namespace sub (s2 with
// run r1), with pending writes on c2 and c3.
func threadWorld(t *testing.T) *world {
	w := newWorld(t)
	put := func(ns, id, parent, run string) {
		w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", NS: ns, ID: id, ParentID: parent, Data: []byte(`"` + id + `"`), RunID: run})
	}
	put("", "c1", "", "")
	put("", "c2", "c1", "r1")
	put("", "c3", "c2", "r2")
	put("sub", "s1", "", "")
	put("sub", "s2", "s1", "r1")
	for _, id := range []string{"c2", "c3"} {
		w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "th", ID: id, TaskID: "t", Entries: []CheckpointWrite{{Channel: "ch", Value: []byte(`1`)}}})
	}
	return w
}

func listIDs(t *testing.T, w *world, thread, ns string) []string {
	t.Helper()
	l, _, _, _ := w.f.ListCheckpoints("acme", thread, ns, "", 100, nil, false)
	return cpIDs(l)
}

// threadKeys is every key of a thread and every run index key.
func threadKeysOf(w *world, thread string) (keys []string) {
	for _, p := range []string{threadPrefix("acme", thread), "t/acme/cprun/"} {
		w.f.st.Scan(p, "", func(k string, _ []byte) bool {
			keys = append(keys, k)
			return true
		})
	}
	return keys
}

// TestThreadCopy: a copy has every checkpoint, namespace, head and pending
// write of its source, in the same order, is a thread of its own (its
// runs indexed), and the source is unchanged; a target with checkpoints,
// a missing source and a copy onto itself are refused.
func TestThreadCopy(t *testing.T) {
	w := threadWorld(t)
	before := threadKeysOf(w, "th")
	if r := w.ok(KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "copy/1"}); string(mustJSON(r.Obj)) != `{"checkpoints":5,"source":"th","target":"copy/1"}` {
		t.Errorf("copy answered %s", mustJSON(r.Obj))
	}
	for _, ns := range []string{"", "sub"} {
		if got, want := listIDs(t, w, "copy/1", ns), listIDs(t, w, "th", ns); !slices.Equal(got, want) {
			t.Errorf("namespace %q of the copy: %v, want %v", ns, got, want)
		}
		if got, want := w.f.ThreadHead("acme", "copy/1", ns), w.f.ThreadHead("acme", "th", ns); got != want {
			t.Errorf("head of namespace %q of the copy: %q, want %q", ns, got, want)
		}
	}
	v, _, _ := w.f.GetCheckpoint("acme", "copy/1", "", "c3")
	if v == nil || v.Thread != "copy/1" || len(v.Pending) != 1 || string(v.Data) != `"c3"` {
		t.Errorf("c3 of the copy: %+v", v)
	}
	if got := threadKeysOf(w, "th"); len(got) != len(before)+3 { // the copy's 3 run index entries
		t.Errorf("keys of th and the run index after the copy: %d, want %d", len(got), len(before)+3)
	}
	w.refused(CodeAlreadyExists, KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "copy/1"})
	w.refused(CodeNotFound, KindThreadCopy, "acme", &ThreadCopyArgs{Source: "nope", Target: "x"})
	w.refused(CodeInvalidArgument, KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "th"})
	// Deleting the copy leaves the source and its run index as they were.
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "copy/1"})
	if got := threadKeysOf(w, "th"); !slices.Equal(got, before) {
		t.Errorf("after deleting the copy:\n got %q\nwant %q", got, before)
	}
}

// TestThreadPrune: keep_latest leaves each namespace its head with its
// writes; delete removes the threads; threads without checkpoints are
// passed over.
func TestThreadPrune(t *testing.T) {
	w := threadWorld(t)
	w.ok(KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "th2"})
	// Writes of a checkpoint whose put never came: pruned with the rest.
	w.ok(KindCheckpointWrites, "acme", &CheckpointWritesArgs{Thread: "th", ID: "never-put", TaskID: "t", Entries: []CheckpointWrite{{Channel: "ch", Value: []byte(`1`)}}})
	r := w.ok(KindThreadPrune, "acme", &ThreadPruneArgs{Threads: []string{"th", "missing"}, KeepLatest: true})
	if got := string(mustJSON(r.Obj)); got != `{"deleted":3}` {
		t.Errorf("prune answered %s, want 3 deleted", got)
	}
	if got := listIDs(t, w, "th", ""); !slices.Equal(got, []string{"c3"}) {
		t.Errorf("default namespace after keep_latest: %v, want [c3]", got)
	}
	if got := listIDs(t, w, "th", "sub"); !slices.Equal(got, []string{"s2"}) {
		t.Errorf("namespace sub after keep_latest: %v, want [s2]", got)
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c3"); v == nil || len(v.Pending) != 1 {
		t.Errorf("the kept head lost its writes: %+v", v)
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "never-put"); v != nil {
		t.Errorf("a checkpoint that was never put: %+v", v)
	}
	for _, k := range threadKeysOf(w, "th") {
		if strings.Contains(k, "th2") {
			continue
		}
		if strings.Contains(k, "/c2") || strings.Contains(k, "/c1") || strings.Contains(k, "/s1") || strings.Contains(k, "never-put") {
			t.Errorf("key %q of a pruned checkpoint left", k)
		}
	}
	if got := listIDs(t, w, "th2", ""); len(got) != 3 {
		t.Errorf("th2, not pruned: %v", got)
	}
	w.ok(KindThreadPrune, "acme", &ThreadPruneArgs{Threads: []string{"th2"}})
	if keys := w.f.ThreadHead("acme", "th2", ""); keys != "" {
		t.Errorf("th2 after a delete prune: head %q", keys)
	}
}

// TestCheckpointDeleteRuns: a run's checkpoints go in every thread and
// namespace, with their writes and index entries; a deleted head moves to
// the newest checkpoint left, and a namespace left empty has no head.
func TestCheckpointDeleteRuns(t *testing.T) {
	w := threadWorld(t)
	w.ok(KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "th2"})
	r := w.ok(KindCheckpointDeleteRuns, "acme", &CheckpointDeleteRunsArgs{RunIDs: []string{"r2", "nope"}})
	if got := string(mustJSON(r.Obj)); got != `{"deleted":2}` {
		t.Errorf("delete r2 answered %s, want 2 (th's and th2's c3)", got)
	}
	for _, th := range []string{"th", "th2"} {
		if got := listIDs(t, w, th, ""); !slices.Equal(got, []string{"c2", "c1"}) {
			t.Errorf("%s after deleting run r2: %v, want [c2 c1]", th, got)
		}
		if h := w.f.ThreadHead("acme", th, ""); h != "c2" {
			t.Errorf("%s's head after deleting its head's run: %q, want c2", th, h)
		}
	}
	w.ok(KindCheckpointDeleteRuns, "acme", &CheckpointDeleteRunsArgs{RunIDs: []string{"r1"}})
	if got := listIDs(t, w, "th", "sub"); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("sub after deleting run r1: %v, want [s1]", got)
	}
	w.f.st.Scan("t/acme/cprun/", "", func(k string, _ []byte) bool {
		t.Errorf("run index key %q left after deleting every run", k)
		return true
	})
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c4", "c1", `4`)) // c1 is the head again
	if v := NewCommand(KindCheckpointPut, 1, "acme", "", &CheckpointPutArgs{Thread: "th", ID: "x", RunID: "r"}).ver; v != EntryVersion5 {
		t.Errorf("entry version of a put with a run id: %d, want %d", v, EntryVersion5)
	}
}

// TestCheckpointRetention: keep_last trims a namespace's oldest
// checkpoints as puts come, never the head; max_age gives a checkpoint an
// expiry from its put, and checkpoint.purge deletes what is due by its
// command's time, heads included; the longest prefix's policy applies.
func TestCheckpointRetention(t *testing.T) {
	w := newWorld(t)
	w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "", KeepLast: 2})
	w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "tmp/", MaxAgeMs: 1000})
	parent := ""
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		w.ok(KindCheckpointPut, "acme", cpPut("long", id, parent, `1`))
		parent = id
	}
	if got := listIDs(t, w, "long", ""); !slices.Equal(got, []string{"c4", "c3"}) {
		t.Errorf("keep_last 2 after 4 puts: %v, want [c4 c3]", got)
	}
	w.ok(KindCheckpointPut, "acme", cpPut("tmp/a", "t1", "", `1`))
	w.ok(KindCheckpointPut, "acme", cpPut("tmp/a", "t2", "t1", `2`))
	v, _, _ := w.f.GetCheckpoint("acme", "tmp/a", "", "t1")
	if v == nil || v.ExpiresAt != w.now-10+1000 {
		t.Fatalf("t1's expiry: %+v, want its put's time + 1000", v)
	}
	if !strings.Contains(string(mustJSON(v)), `"expires_at":"`) {
		t.Errorf("a checkpoint with an expiry answers no expires_at: %s", mustJSON(v))
	}
	if next := w.f.NextCheckpointExpiry(); next != v.ExpiresAt {
		t.Errorf("next expiry %d, want t1's %d", next, v.ExpiresAt)
	}
	// A purge before the expiry deletes nothing; after t1's, t1 only.
	if r := w.ok(KindCheckpointPurge, "", &CheckpointPurgeArgs{Max: 10}); string(mustJSON(r.Obj)) != `{"deleted":0}` {
		t.Errorf("early purge: %s", mustJSON(r.Obj))
	}
	w.now = v.ExpiresAt - 10 // the purge runs 10 ms on: at t1's expiry, before t2's
	if r := w.ok(KindCheckpointPurge, "", &CheckpointPurgeArgs{Max: 10}); string(mustJSON(r.Obj)) != `{"deleted":1}` {
		t.Errorf("purge at t1's expiry: %s", mustJSON(r.Obj))
	}
	if got := listIDs(t, w, "tmp/a", ""); !slices.Equal(got, []string{"t2"}) {
		t.Errorf("tmp/a after the first purge: %v, want [t2]", got)
	}
	w.now += 1000
	w.ok(KindCheckpointPurge, "", &CheckpointPurgeArgs{Max: 10})
	if h := w.f.ThreadHead("acme", "tmp/a", ""); h != "" || w.f.NextCheckpointExpiry() != 0 {
		t.Errorf("tmp/a after every expiry: head %q, next expiry %d", h, w.f.NextCheckpointExpiry())
	}
	// Deleting a thread takes its expiry entries with it.
	w.ok(KindCheckpointPut, "acme", cpPut("tmp/b", "b1", "", `1`))
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "tmp/b"})
	if next := w.f.NextCheckpointExpiry(); next != 0 {
		t.Errorf("a deleted thread left an expiry at %d", next)
	}
	// Clearing a policy; the 101st is refused.
	w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "tmp/"})
	if ps, _ := w.f.CheckpointPolicies("acme"); len(ps) != 1 || ps[0].KeepLast != 2 {
		t.Errorf("policies after clearing tmp/: %+v", ps)
	}
	for i := range MaxCheckpointPolicies - 1 {
		w.ok(KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: fmt.Sprintf("p%d", i), KeepLast: 1})
	}
	w.refused(CodeResourceExhausted, KindCheckpointPolicy, "acme", &CheckpointPolicyArgs{Prefix: "one-more", KeepLast: 1})
}

// TestCheckpointBlobs: channel values stored once per (channel, version):
// a put brings its new values and names the rest; a value goes with the
// last checkpoint that names it; a put naming a value never stored, or
// storing one it does not name, is refused and writes nothing.
func TestCheckpointBlobs(t *testing.T) {
	w := newWorld(t)
	blob := func(ch, v, data string) CheckpointBlob {
		return CheckpointBlob{Channel: ch, Version: v, Type: "json", Data: []byte(data)}
	}
	put := func(id, parent string, blobs []CheckpointBlob, refs ...BlobRef) *CheckpointPutArgs {
		return &CheckpointPutArgs{Thread: "th", ID: id, ParentID: parent, Data: []byte(`{}`), Blobs: blobs, BlobRefs: refs}
	}
	ref := func(ch, v string) BlobRef { return BlobRef{Channel: ch, Version: v} }
	w.ok(KindCheckpointPut, "acme", put("c1", "", []CheckpointBlob{blob("a", "1", `"a1"`), blob("m", "1", `["x"]`)}, ref("a", "1"), ref("m", "1")))
	// c2 changes m only: it brings m@2 and names a@1, stored by c1.
	w.ok(KindCheckpointPut, "acme", put("c2", "c1", []CheckpointBlob{blob("m", "2", `["x","y"]`)}, ref("a", "1"), ref("m", "2")))
	v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c2")
	if got := string(mustJSON(v.Blobs)); got != `[{"channel":"a","version":"1","type":"json","b64":"ImExIg=="},{"channel":"m","version":"2","type":"json","b64":"WyJ4IiwieSJd"}]` {
		t.Errorf("c2's blobs: %s", got)
	}
	if n := countKeys(w, nsPrefix("acme", "th", "")+"b/"); n != 3 {
		t.Errorf("blobs stored: %d, want 3 (a@1 once for both)", n)
	}
	// Refused, nothing written: a value never stored; a value not named;
	// refs out of order.
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", put("c3", "c2", nil, ref("a", "9")))
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", put("c3", "c2", []CheckpointBlob{blob("z", "1", `1`)}, ref("a", "1")))
	w.refused(CodeInvalidArgument, KindCheckpointPut, "acme", put("c3", "c2", nil, ref("m", "2"), ref("a", "1")))
	// A version already stored keeps its bytes, as LangGraph's Postgres
	// saver keeps them.
	w.ok(KindCheckpointPut, "acme", put("c3", "c2", []CheckpointBlob{blob("m", "2", `"other"`)}, ref("m", "2")))
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c3"); len(v.Blobs) != 1 || string(v.Blobs[0].Data) != `["x","y"]` {
		t.Errorf("c3's m@2: %+v, want the bytes c2 stored", v.Blobs)
	}
	w.ok(KindThreadPrune, "acme", &ThreadPruneArgs{Threads: []string{"th"}, KeepLatest: false})
	w.ok(KindCheckpointPut, "acme", put("c1", "", []CheckpointBlob{blob("a", "1", `"a1"`), blob("m", "1", `["x"]`)}, ref("a", "1"), ref("m", "1")))
	w.ok(KindCheckpointPut, "acme", put("c2", "c1", []CheckpointBlob{blob("m", "2", `["x","y"]`)}, ref("a", "1"), ref("m", "2")))
	// A retried put is answered again and counts no second reference.
	w.ok(KindCheckpointPut, "acme", put("c2", "c1", []CheckpointBlob{blob("m", "2", `["x","y"]`)}, ref("a", "1"), ref("m", "2")))
	// keep_latest: c1 goes, and m@1 with it (only c1 named it); a@1 stays.
	w.ok(KindThreadPrune, "acme", &ThreadPruneArgs{Threads: []string{"th"}, KeepLatest: true})
	if _, ok := w.f.st.Get(cpBlobKey("acme", "th", "", "m", "1")); ok {
		t.Errorf("m@1 outlived the only checkpoint that named it")
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c2"); len(v.Blobs) != 2 {
		t.Errorf("c2 after the prune: %d blobs, want 2", len(v.Blobs))
	}
	// A copy holds its own; deleting the source leaves the copy whole.
	w.ok(KindThreadCopy, "acme", &ThreadCopyArgs{Source: "th", Target: "th2"})
	w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "th"})
	if v, _, _ := w.f.GetCheckpoint("acme", "th2", "", "c2"); len(v.Blobs) != 2 || string(v.Blobs[1].Data) != `["x","y"]` {
		t.Errorf("the copy's c2: %+v", v)
	}
	if v := NewCommand(KindCheckpointPut, 1, "acme", "", put("x", "", nil, ref("a", "1"))).ver; v != EntryVersion5 {
		t.Errorf("entry version of a put with blobs: %d, want %d", v, EntryVersion5)
	}
}

func countKeys(w *world, prefix string) (n int) {
	w.f.st.Scan(prefix, "", func(string, []byte) bool { n++; return true })
	return n
}
