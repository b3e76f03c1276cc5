package fsm

import (
	"slices"
	"testing"
)

// TestListTasks: a tenant's tasks in id order, filtered by queue, status
// and owner and by visible, a page at a time.
func TestListTasks(t *testing.T) {
	w := newWorld(t)
	for _, id := range []string{"t3", "t1", "t2", "t4"} {
		q := "q"
		if id == "t4" {
			q = "other"
		}
		w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: id, Queue: q})
	}
	w.ok(KindTaskCreate, "beta", &TaskCreateArgs{ID: "t0", Queue: "q"})
	w.claim("acme", "t2", "w")
	ids := func(ts []*Task) (out []string) {
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	page, next, _ := w.f.ListTasks("acme", TaskFilter{Queue: "q", Limit: 2})
	if !slices.Equal(ids(page), []string{"t1", "t2"}) || next == "" {
		t.Fatalf("first page: %v next %q, want [t1 t2] and a next token", ids(page), next)
	}
	page, next, _ = w.f.ListTasks("acme", TaskFilter{Queue: "q", Limit: 2, PageToken: next})
	if !slices.Equal(ids(page), []string{"t3"}) || next != "" {
		t.Errorf("second page: %v next %q, want [t3] and no next", ids(page), next)
	}
	if page, _, _ := w.f.ListTasks("acme", TaskFilter{Owner: "w", Limit: 10}); !slices.Equal(ids(page), []string{"t2"}) {
		t.Errorf("owner w: %v", ids(page))
	}
	if page, _, _ := w.f.ListTasks("acme", TaskFilter{Status: "pending", Limit: 10,
		Visible: func(t *Task) bool { return t.ID != "t1" }}); !slices.Equal(ids(page), []string{"t2", "t3", "t4"}) {
		t.Errorf("pending and visible: %v", ids(page))
	}
}

// TestClaimable: a queue has a claimable task when one is ready or its
// lease ran out; otherwise the earliest lease end says when to look again.
func TestClaimable(t *testing.T) {
	w := newWorld(t)
	pending := []string{"pending"}
	if ok, next := w.f.Claimable("acme", "q", pending, w.now); ok || next != 0 {
		t.Errorf("empty queue: claimable %v next %d", ok, next)
	}
	w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "t1", Queue: "q"})
	w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "t2", Queue: "q"})
	if ok, _ := w.f.Claimable("acme", "q", pending, w.now); !ok {
		t.Errorf("queue with ready tasks not claimable")
	}
	w.ok(KindTaskClaim, "acme", &TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 500})
	end1 := w.now + 500
	w.ok(KindTaskClaim, "acme", &TaskClaimArgs{ID: "t2", Owner: "w", LeaseMs: 300})
	end2 := w.now + 300
	if ok, next := w.f.Claimable("acme", "q", pending, w.now); ok || next != min(end1, end2) {
		t.Errorf("all leased: claimable %v next %d, want false and %d", ok, next, min(end1, end2))
	}
	if ok, _ := w.f.Claimable("acme", "q", pending, end2); !ok {
		t.Errorf("lease ran out, not claimable")
	}
	if ok, _ := w.f.Claimable("acme", "q", []string{"done"}, end2); ok {
		t.Errorf("claimable in a status with no tasks")
	}
}
