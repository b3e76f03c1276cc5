package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

type batchTask struct {
	TaskID       string `json:"task_id"`
	Status       string `json:"status"`
	Owner        string `json:"owner"`
	FencingToken uint64 `json:"fencing_token"`
	LeaseUntil   string `json:"lease_until"`
}

func createTasks(t *testing.T, fx *apiFixture, queue string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		body := fmt.Sprintf(`{"task_id":%q,"queue":%q}`, id, queue)
		if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", body, adminAuth()); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, status, b)
		}
	}
}

// TestQueueClaimMax: a queue claim with max answers {"tasks": [...]}, up to
// max tasks, each with its own fencing token and lease; 204 when none is
// claimable; a retry with the same Idempotency-Key replays the list; a bad
// max is 400 and claims nothing.
func TestQueueClaimMax(t *testing.T) {
	fx := newAPIFixture(t)
	createTasks(t, fx, "mq", "a", "b", "c")
	for _, max := range []string{"-1", "65", `"2"`} {
		status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/mq/claim", `{"owner":"w","lease_ms":60000,"max":`+max+`}`, adminAuth())
		if status != http.StatusBadRequest || errorCode(b) != "invalid_argument" {
			t.Fatalf("max %s: %d %s, want 400", max, status, b)
		}
	}
	claim := func(key string) (int, http.Header, []byte) {
		return fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/mq/claim", `{"owner":"w","lease_ms":60000,"set_status":"running","max":2}`,
			with(adminAuth(), "Idempotency-Key", key))
	}
	status, _, b := claim("k1")
	var got struct {
		Tasks []batchTask `json:"tasks"`
	}
	if decodeBody(t, b, &got); status != http.StatusOK || len(got.Tasks) != 2 || got.Tasks[0].TaskID != "a" || got.Tasks[1].TaskID != "b" ||
		got.Tasks[0].FencingToken == got.Tasks[1].FencingToken || got.Tasks[1].Owner != "w" || got.Tasks[1].Status != "running" ||
		got.Tasks[0].LeaseUntil == "" {
		t.Fatalf("claim max 2: %d %s", status, b)
	}
	status, h, again := claim("k1")
	if status != http.StatusOK || h.Get("Idempotent-Replay") != "true" || string(again) != string(b) {
		t.Fatalf("retry: %d %s, want %s", status, again, b)
	}
	status, _, b = claim("k2")
	if decodeBody(t, b, &got); status != http.StatusOK || len(got.Tasks) != 1 || got.Tasks[0].TaskID != "c" {
		t.Fatalf("the last one: %d %s", status, b)
	}
	if status, _, b = claim("k3"); status != http.StatusNoContent {
		t.Fatalf("empty queue: %d %s, want 204", status, b)
	}
	// claim_next with max: next is the list.
	createTasks(t, fx, "mq", "d", "e")
	body := fmt.Sprintf(`{"fencing_token":%d,"status":"done","release":true,
		"claim_next":{"queue":"mq","owner":"w","lease_ms":60000,"max":5}}`, got.Tasks[0].FencingToken)
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/c/update", body, adminAuth())
	var cn struct {
		Task batchTask   `json:"task"`
		Next []batchTask `json:"next"`
	}
	if decodeBody(t, b, &cn); status != http.StatusOK || cn.Task.Status != "done" || len(cn.Next) != 2 || cn.Next[0].TaskID != "d" {
		t.Fatalf("claim_next max 5: %d %s", status, b)
	}
}

// TestQueueBatch: updates each with its own outcome (a stale token refuses
// its own update only, as 'fenced' with the current token), then the claim
// of up to max, in one request; a retry with the same key replays it.
func TestQueueBatch(t *testing.T) {
	fx := newAPIFixture(t)
	createTasks(t, fx, "bq", "a", "b", "c", "d")
	status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/bq/claim", `{"owner":"w","lease_ms":60000,"max":2}`, adminAuth())
	var claimed struct {
		Tasks []batchTask `json:"tasks"`
	}
	if decodeBody(t, b, &claimed); status != http.StatusOK || len(claimed.Tasks) != 2 {
		t.Fatalf("claim: %d %s", status, b)
	}
	a, bt := claimed.Tasks[0], claimed.Tasks[1]
	body := fmt.Sprintf(`{"updates":[{"id":"a","fencing_token":%d,"status":"done","release":true,"result":{"n":1}},
		{"id":"b","fencing_token":%d,"status":"done","release":true},{"id":"nope","status":"done"}],
		"claim":{"owner":"w","lease_ms":60000,"set_status":"running","max":3}}`, a.FencingToken, bt.FencingToken-1)
	batch := func(key string) (int, http.Header, []byte) {
		return fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/bq/batch", body, with(adminAuth(), "Idempotency-Key", key))
	}
	status, _, b = batch("k1")
	var got struct {
		Results []struct {
			Task  *batchTask                 `json:"task"`
			Error map[string]json.RawMessage `json:"error"`
		} `json:"results"`
		Next []batchTask `json:"next"`
	}
	if decodeBody(t, b, &got); status != http.StatusOK || len(got.Results) != 3 ||
		got.Results[0].Task == nil || got.Results[0].Task.Status != "done" || got.Results[0].Error != nil ||
		got.Results[1].Task != nil || string(got.Results[1].Error["code"]) != `"fenced"` ||
		string(got.Results[1].Error["current_token"]) != fmt.Sprint(bt.FencingToken) ||
		string(got.Results[2].Error["code"]) != `"not_found"` ||
		len(got.Next) != 2 || got.Next[0].TaskID != "c" || got.Next[1].TaskID != "d" || got.Next[1].Status != "running" {
		t.Fatalf("batch: %d %s", status, b)
	}
	status, h, again := batch("k1")
	if status != http.StatusOK || h.Get("Idempotent-Replay") != "true" || string(again) != string(b) {
		t.Fatalf("retry: %d %s, want %s", status, again, b)
	}
	var stored batchTask
	_, _, sb := fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/b", nil, adminAuth())
	if decodeBody(t, sb, &stored); stored.Status != "pending" || stored.Owner != "w" || stored.FencingToken != bt.FencingToken {
		t.Fatalf("the fenced update wrote: %s", sb)
	}
	// Updates only: next is an empty list.
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/bq/batch",
		fmt.Sprintf(`{"updates":[{"id":"b","fencing_token":%d,"status":"done","release":true}]}`, bt.FencingToken), adminAuth())
	var plain map[string]json.RawMessage
	if decodeBody(t, b, &plain); status != http.StatusOK || string(plain["next"]) != "[]" {
		t.Fatalf("updates only: %d %s", status, b)
	}
}

// TestQueueBatchRefusals: bad input and refused grants are 400/403 for the
// whole request, and nothing is written.
func TestQueueBatchRefusals(t *testing.T) {
	fx := newAPIFixture(t)
	createTasks(t, fx, "qa", "a1")
	createTasks(t, fx, "qb", "b1")
	many := `{"updates":[`
	for i := range 65 {
		if i > 0 {
			many += ","
		}
		many += `{"id":"a1","status":"x"}`
	}
	many += `]}`
	for _, body := range []string{
		`{}`,
		many,
		`{"updates":[{"id":"a1","status":"done"},{"status":"done"}]}`,
		`{"updates":[{"id":"a1","status":"done"},{"id":"b1","result":{bad}}]}`,
		`{"updates":[{"id":"a1","status":"done"},{"id":"b1","delay_ms":5}]}`,
		`{"updates":[{"id":"a1","status":"done"}],"claim":{"owner":"w","lease_ms":1000}}`,
		`{"updates":[{"id":"a1","status":"done"}],"claim":{"owner":"w","lease_ms":1000,"max":65}}`,
		`{"updates":[{"id":"a1","status":"done"}],"claim":{"owner":"w","lease_ms":0,"max":1}}`,
		`{"updates":[{"id":"a1","status":"done"}],"claim":{"owner":"w","lease_ms":1000,"max":1,"wait_ms":5}}`,
		`{"updates":[{"id":"a1","status":"done","nope":1}]}`,
	} {
		status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/qa/batch", body, adminAuth())
		if status != http.StatusBadRequest || errorCode(b) != "invalid_argument" {
			t.Fatalf("%.80s: %d %s, want 400", body, status, b)
		}
	}
	onlyA := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"only-a","grants":[{"resource":"tasks","prefix":"qa","actions":["read","write"]}]}`)
	for path, body := range map[string]string{
		"/v1/tenants/acme/queues/qb/batch": `{"updates":[{"id":"a1","status":"done"}]}`,
		"/v1/tenants/acme/queues/qa/batch": `{"updates":[{"id":"a1","status":"done"},{"id":"b1","status":"done"}]}`,
	} {
		if status, _, b := fx.c.do(t, 0, "POST", path, body, bearer(onlyA)); status != http.StatusForbidden {
			t.Fatalf("%s %s outside the grants: %d %s, want 403", path, body, status, b)
		}
	}
	for _, id := range []string{"a1", "b1"} {
		var task batchTask
		_, _, b := fx.c.do(t, 0, "GET", "/v1/tenants/acme/tasks/"+id, nil, adminAuth())
		if decodeBody(t, b, &task); task.Status != "pending" {
			t.Fatalf("a refused request changed %s: %s", id, b)
		}
	}
	status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/qa/batch", `{"updates":[{"id":"a1","status":"done"}],
		"claim":{"owner":"w","lease_ms":1000,"max":1}}`, bearer(onlyA))
	if status != http.StatusOK {
		t.Fatalf("within the grants: %d %s", status, b)
	}
}

// TestQueueBatchRetryAfterDelete: a retry (same Idempotency-Key, same
// body) of a queue batch that was applied is answered with its first
// answer even when one of its tasks was deleted since, for a caller whose
// grants do not cover every queue (who gets 403 for a missing task rather
// than 404), as a single update's retry is (replayGone); a new request
// naming the deleted task is still refused.
func TestQueueBatchRetryAfterDelete(t *testing.T) {
	fx := newAPIFixture(t)
	worker := bearer(fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"wq","grants":[{"resource":"tasks","prefix":"wq","actions":["read","write"]}]}`))
	createTasks(t, fx, "wq", "r1", "r2")
	body := `{"updates":[{"id":"r1","status":"done"},{"id":"r2","status":"done"}]}`
	keyed := with(worker, "Idempotency-Key", "batch-1")
	status, _, first := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/wq/batch", body, keyed)
	if status != 200 {
		t.Fatalf("batch: %d %s", status, first)
	}
	if status, _, b := fx.c.do(t, 0, "DELETE", "/v1/tenants/acme/tasks/r1", nil, adminAuth()); status != 204 {
		t.Fatalf("delete r1: %d %s", status, b)
	}
	status, h, again := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/wq/batch", body, keyed)
	if status != 200 || h.Get("Idempotent-Replay") != "true" || string(again) != string(first) {
		t.Errorf("retry after r1's delete: %d replay %q %s, want 200, the first answer replayed (%s)", status, h.Get("Idempotent-Replay"), again, first)
	}
	if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/wq/batch", body, with(worker, "Idempotency-Key", "batch-2")); status != 403 {
		t.Errorf("a new batch naming the deleted task: %d %s, want 403", status, b)
	}
}
