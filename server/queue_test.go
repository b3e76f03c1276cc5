package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestQueueClaimFinalNothingIsReplayed pins the fix for a bug the chaos
// suite found (seed 35 of make chaos): a request delayed in a paused node
// arrived after its retry had been told "nothing claimable", and claimed a
// task under the same Idempotency-Key; the agent never learned its token.
// With a key, the final "nothing" is a committed answer that a late
// duplicate replays.
func TestQueueClaimFinalNothingIsReplayed(t *testing.T) {
	fx := newAPIFixture(t)
	claim := func(key string) (int, http.Header, []byte) {
		h := adminAuth()
		h["Idempotency-Key"] = key
		return fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/late/claim", `{"owner":"w1","lease_ms":60000}`, h)
	}
	if status, _, body := claim("k1"); status != http.StatusNoContent {
		t.Fatalf("claim on an empty queue: got %d %s, want 204", status, body)
	}
	if status, _, body := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"l1","queue":"late"}`, adminAuth()); status != http.StatusCreated {
		t.Fatalf("create task: got %d %s, want 201", status, body)
	}
	status, h, body := claim("k1")
	if status != http.StatusNoContent || h.Get("Idempotent-Replay") != "true" {
		t.Fatalf("late duplicate: got %d replay=%q %s, want the first answer (204) replayed", status, h.Get("Idempotent-Replay"), body)
	}
	_, _, body = fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/l1", nil, adminAuth())
	var task struct {
		Owner   string `json:"owner"`
		Attempt int    `json:"attempt"`
	}
	if err := json.Unmarshal(body, &task); err != nil || task.Owner != "" || task.Attempt != 0 {
		t.Fatalf("task after the duplicate: got %s (err %v), want unclaimed", body, err)
	}
	if status, _, body := claim("k2"); status != http.StatusOK {
		t.Fatalf("a new request (new key): got %d %s, want 200 with the task", status, body)
	}
}

// TestQueueClaimRetryReplaysWithoutWaiting: the retry of a claim that took
// the last task gets the first answer at once, not a long poll of the
// now-empty queue.
func TestQueueClaimRetryReplaysWithoutWaiting(t *testing.T) {
	fx := newAPIFixture(t)
	if status, _, body := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"r1","queue":"retry"}`, adminAuth()); status != http.StatusCreated {
		t.Fatalf("create task: got %d %s, want 201", status, body)
	}
	claim := func() (int, http.Header, []byte) {
		h := adminAuth()
		h["Idempotency-Key"] = "k1"
		return fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/retry/claim", `{"owner":"w1","lease_ms":60000,"wait_ms":10000}`, h)
	}
	status, _, first := claim()
	if status != http.StatusOK {
		t.Fatalf("claim: got %d %s, want 200", status, first)
	}
	start := time.Now()
	status, h, again := claim()
	if status != http.StatusOK || h.Get("Idempotent-Replay") != "true" || string(again) != string(first) {
		t.Fatalf("retry: got %d replay=%q %s, want the first answer %s replayed", status, h.Get("Idempotent-Replay"), again, first)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("retry answered after %v: it waited on the empty queue (wait_ms 10000)", waited)
	}
}
