package fsm

import (
	"slices"
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
	if r.Outcome != OutcomeCreated || w.f.ThreadHead("acme", "th") != "c1" {
		t.Fatalf("first checkpoint: outcome %d head %q", r.Outcome, w.f.ThreadHead("acme", "th"))
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
	if h := w.f.ThreadHead("acme", "th"); h != "root2" {
		t.Errorf("head after forks: %q, want root2", h)
	}
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c4", "root2", `4`))

	all, _, ok := w.f.ListCheckpoints("acme", "th", "", 10)
	if want := []string{"c4", "root2", "f1", "c2", "c1"}; !ok || !slices.Equal(cpIDs(all), want) {
		t.Errorf("ListCheckpoints: %v, want newest first %v", cpIDs(all), want)
	}
	page, _, _ := w.f.ListCheckpoints("acme", "th", "f1", 1)
	if !slices.Equal(cpIDs(page), []string{"c2"}) {
		t.Errorf("ListCheckpoints before f1, limit 1: %v, want [c2]", cpIDs(page))
	}
	if _, _, ok := w.f.ListCheckpoints("acme", "th", "nope", 1); ok {
		t.Errorf("ListCheckpoints before an unknown checkpoint: ok")
	}
	v, _, ok := w.f.GetCheckpoint("acme", "th", "f1")
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
	if h := w.f.ThreadHead("acme", "a"); h != "c1" {
		t.Errorf("thread a's head: %q, want c1 (b's append is not a's)", h)
	}
	if v, _, _ := w.f.GetCheckpoint("beta", "a", "c1"); v == nil || string(v.Data) != `"beta"` {
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
	v, _, _ := w.f.GetCheckpoint("acme", "a", "c1")
	if len(v.Pending) != 2 || v.Pending[0].TaskID != "t1" || string(v.Pending[1].Writes) != `[2]` {
		t.Errorf("pending writes of a/c1: %+v, want t1 [1] and t2 [2]", v.Pending)
	}
	if v, _, _ := w.f.GetCheckpoint("acme", "b", "c1"); len(v.Pending) != 0 {
		t.Errorf("b/c1 has a/c1's pending writes: %+v", v.Pending)
	}

	// Deleting a thread removes it all, and nothing else.
	w.refused(CodeNotFound, KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "c"})
	if r := w.ok(KindThreadDelete, "acme", &ThreadDeleteArgs{Thread: "a"}); r.Outcome != OutcomeNoContent {
		t.Errorf("thread delete: outcome %d, want no content", r.Outcome)
	}
	if _, _, ok := w.f.GetCheckpoint("acme", "a", "c1"); ok || w.f.ThreadHead("acme", "a") != "" {
		t.Errorf("deleted thread still readable")
	}
	for _, k := range []struct{ tenant, thread, head string }{{"acme", "b", "c2"}, {"beta", "a", "c1"}} {
		if h := w.f.ThreadHead(k.tenant, k.thread); h != k.head {
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
