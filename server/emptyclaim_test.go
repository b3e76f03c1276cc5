package server

import (
	"fmt"
	"net/http"
	"testing"
)

// TestEmptyKeyedClaimWritesNothing: a queue claim that finds nothing
// answers 204 without writing to the log, with an Idempotency-Key or
// without (idle long-polls cost no replicated write); a retry of a keyed
// claim that did claim still gets its task back, and a late duplicate of
// a keyed claim answered 204 is answered 204 again, claiming nothing.
func TestEmptyKeyedClaimWritesNothing(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s, want 201", status, body)
	}
	claim := func(key string, waitMs int) (int, []byte) {
		h := adminAuth()
		if key != "" {
			h = with(h, "Idempotency-Key", key)
		}
		status, _, body := c.do(t, leader, "POST", "/v1/tenants/acme/queues/q/claim",
			fmt.Sprintf(`{"owner":"w","lease_ms":60000,"wait_ms":%d}`, waitMs), h)
		return status, body
	}
	before := c.nodes[leader].fsm.AppliedIndex()
	for i, tc := range []struct {
		key    string
		waitMs int
	}{{"", 0}, {"", 30}, {"k-idle-1", 0}, {"k-idle-2", 30}, {"k-idle-3", 0}, {"k-idle-4", 30}} {
		if status, body := claim(tc.key, tc.waitMs); status != http.StatusNoContent {
			t.Fatalf("idle claim %d: got %d %s, want 204", i, status, body)
		}
	}
	if after := c.nodes[leader].fsm.AppliedIndex(); after != before {
		t.Errorf("idle claims moved the applied index from %d to %d, want no log entry", before, after)
	}

	// A task arrives: a duplicate of an answered empty claim does not take it.
	if status, _, body := c.do(t, leader, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t1","queue":"q"}`, adminAuth()); status != http.StatusCreated {
		t.Fatalf("create t1: got %d %s, want 201", status, body)
	}
	if status, body := claim("k-idle-3", 0); status != http.StatusNoContent {
		t.Errorf("duplicate of an answered empty claim: got %d %s, want 204 again", status, body)
	}
	// A claim that claims is replayed, though the queue is empty now.
	status, first := claim("k-busy", 0)
	if status != http.StatusOK {
		t.Fatalf("claim: got %d %s, want 200", status, first)
	}
	status, again := claim("k-busy", 0)
	if status != http.StatusOK || string(again) != string(first) {
		t.Errorf("retry of a claim that claimed: got %d %s, want 200 %s", status, again, first)
	}
}
