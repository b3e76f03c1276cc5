package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

type claimNextAnswer struct {
	Task struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
		Owner  string `json:"owner"`
	} `json:"task"`
	Next *struct {
		TaskID       string `json:"task_id"`
		Status       string `json:"status"`
		Owner        string `json:"owner"`
		FencingToken uint64 `json:"fencing_token"`
		LeaseUntil   string `json:"lease_until"`
	} `json:"next"`
}

// TestUpdateClaimNext: an update with claim_next finishes the task and
// answers the next claimed one with its own token and lease; a retry with
// the same Idempotency-Key replays both; on an empty queue next is null;
// without claim_next the answer is the task as before.
func TestUpdateClaimNext(t *testing.T) {
	fx := newAPIFixture(t)
	for i, prio := range []int{5, 1, 3} {
		body := fmt.Sprintf(`{"task_id":"t%d","queue":"cn","priority":%d}`, i, prio)
		if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", body, adminAuth()); status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, b)
		}
	}
	status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/cn/claim", `{"owner":"w","lease_ms":60000,"set_status":"running"}`, adminAuth())
	var first struct {
		TaskID       string `json:"task_id"`
		FencingToken uint64 `json:"fencing_token"`
	}
	if decodeBody(t, b, &first); status != http.StatusOK || first.TaskID != "t0" {
		t.Fatalf("claim: %d %s", status, b)
	}
	update := func(id string, token uint64, key string) (int, http.Header, []byte) {
		body := fmt.Sprintf(`{"fencing_token":%d,"status":"done","release":true,
			"claim_next":{"queue":"cn","owner":"w","lease_ms":60000,"set_status":"running"}}`, token)
		return fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/"+id+"/update", body, with(adminAuth(), "Idempotency-Key", key))
	}
	status, _, b = update("t0", first.FencingToken, "k1")
	var got claimNextAnswer
	if decodeBody(t, b, &got); status != http.StatusOK || got.Task.TaskID != "t0" || got.Task.Status != "done" || got.Task.Owner != "" ||
		got.Next == nil || got.Next.TaskID != "t2" || got.Next.Status != "running" || got.Next.Owner != "w" ||
		got.Next.FencingToken <= first.FencingToken || got.Next.LeaseUntil == "" {
		t.Fatalf("update with claim_next: %d %s", status, b)
	}
	status, h, again := update("t0", first.FencingToken, "k1")
	if status != http.StatusOK || h.Get("Idempotent-Replay") != "true" || string(again) != string(b) {
		t.Fatalf("retry: %d replay=%q %s, want %s", status, h.Get("Idempotent-Replay"), again, b)
	}
	status, _, b = update("t2", got.Next.FencingToken, "k2")
	var second claimNextAnswer
	if decodeBody(t, b, &second); status != http.StatusOK || second.Next == nil || second.Next.TaskID != "t1" {
		t.Fatalf("second: %d %s", status, b)
	}
	status, _, b = update("t1", second.Next.FencingToken, "k3")
	var last map[string]json.RawMessage
	if decodeBody(t, b, &last); status != http.StatusOK || string(last["next"]) != "null" {
		t.Fatalf("on an empty queue: %d %s, want next null", status, b)
	}
	// A stale token: 409 fenced, and nothing is claimed.
	if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t9","queue":"cn"}`, adminAuth()); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	if status, _, b := update("t1", first.FencingToken, "k4"); status != http.StatusConflict || errorCode(b) != "fenced" {
		t.Fatalf("stale token: %d %s", status, b)
	}
	var t9 struct {
		Owner string `json:"owner"`
	}
	_, _, b = fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/t9", nil, adminAuth())
	if decodeBody(t, b, &t9); t9.Owner != "" {
		t.Fatalf("a refused update claimed t9: %s", b)
	}
	// Without claim_next: the task alone, as ever.
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/t9/update", `{"result":{"n":1}}`, adminAuth())
	var plain map[string]json.RawMessage
	if decodeBody(t, b, &plain); status != http.StatusOK || string(plain["task_id"]) != `"t9"` || plain["next"] != nil {
		t.Fatalf("plain update: %d %s", status, b)
	}
}

// TestUpdateClaimNextRefusals: claim_next's fields are checked as a queue
// claim's are, wait_ms is not one of them, and the caller needs a write
// grant on the claim's queue as well as on the task's.
func TestUpdateClaimNextRefusals(t *testing.T) {
	fx := newAPIFixture(t)
	for _, body := range []string{`{"task_id":"a1","queue":"qa"}`, `{"task_id":"b1","queue":"qb"}`} {
		if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", body, adminAuth()); status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, b)
		}
	}
	for _, cn := range []string{
		`{"queue":"qb","owner":"w","lease_ms":0}`,
		`{"queue":"qb","owner":"","lease_ms":1000}`,
		`{"queue":"","owner":"w","lease_ms":1000}`,
		`{"queue":"qb","owner":"w","lease_ms":1000,"statuses":["dead"]}`,
		`{"queue":"qb","owner":"w","lease_ms":1000,"wait_ms":1000}`,
	} {
		status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a1/update", `{"status":"x","claim_next":`+cn+`}`, adminAuth())
		if status != http.StatusBadRequest || errorCode(b) != "invalid_argument" {
			t.Fatalf("claim_next %s: %d %s, want 400", cn, status, b)
		}
	}
	onlyA := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"only-a","grants":[{"resource":"tasks","prefix":"qa","actions":["read","write"]}]}`)
	status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a1/update",
		`{"status":"done","claim_next":{"queue":"qb","owner":"w","lease_ms":1000}}`, bearer(onlyA))
	if status != http.StatusForbidden {
		t.Fatalf("claim_next on a queue outside the grants: %d %s, want 403", status, b)
	}
	var a1 struct {
		Status string `json:"status"`
	}
	_, _, b = fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/a1", nil, adminAuth())
	if decodeBody(t, b, &a1); a1.Status != "pending" {
		t.Fatalf("a refused request changed a1: %s", b)
	}
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a1/update",
		`{"status":"done","claim_next":{"queue":"qa","owner":"w","lease_ms":1000}}`, bearer(onlyA))
	if status != http.StatusOK {
		t.Fatalf("claim_next within the grants: %d %s", status, b)
	}
}
