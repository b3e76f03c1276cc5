package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestReleaseUnstarted: a release with "unstarted" by the lease's holder
// gives back the claim's attempt and the status its set_status replaced,
// on the update route and in a queue batch; without release or the token,
// or with a status, it is 400 with nothing written; with a stale token it
// is 409 fenced.
func TestReleaseUnstarted(t *testing.T) {
	fx := newAPIFixture(t)
	createTasks(t, fx, "uq", "a", "b")
	var claimed struct {
		Tasks []struct {
			batchTask
			Attempt uint64 `json:"attempt"`
		} `json:"tasks"`
	}
	status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/uq/claim", `{"owner":"w","lease_ms":60000,"set_status":"running","max":2}`, adminAuth())
	if decodeBody(t, b, &claimed); status != http.StatusOK || len(claimed.Tasks) != 2 || claimed.Tasks[0].Attempt != 1 {
		t.Fatalf("claim: %d %s", status, b)
	}
	a, bt := claimed.Tasks[0], claimed.Tasks[1]
	for _, body := range []string{
		fmt.Sprintf(`{"fencing_token":%d,"unstarted":true}`, a.FencingToken),
		`{"release":true,"unstarted":true}`,
		fmt.Sprintf(`{"fencing_token":%d,"release":true,"unstarted":true,"status":"done"}`, a.FencingToken),
		fmt.Sprintf(`{"fencing_token":%d,"release":true,"unstarted":true,"result":{}}`, a.FencingToken),
	} {
		if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a/update", body, adminAuth()); status != http.StatusBadRequest || errorCode(b) != "invalid_argument" {
			t.Errorf("%s: %d %s, want 400", body, status, b)
		}
	}
	if status, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a/update",
		fmt.Sprintf(`{"fencing_token":%d,"release":true,"unstarted":true}`, a.FencingToken+1000), adminAuth()); status != http.StatusConflict || errorCode(b) != "fenced" {
		t.Errorf("stale token: %d %s, want 409 fenced", status, b)
	}
	var got struct {
		Status  string `json:"status"`
		Owner   string `json:"owner"`
		Attempt uint64 `json:"attempt"`
	}
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/a/update",
		fmt.Sprintf(`{"fencing_token":%d,"release":true,"unstarted":true}`, a.FencingToken), adminAuth())
	if decodeBody(t, b, &got); status != http.StatusOK || got.Status != "pending" || got.Owner != "" || got.Attempt != 0 {
		t.Fatalf("unstarted release: %d %s, want pending, no owner, attempt 0", status, b)
	}
	// In a queue batch, with a claim that takes a again.
	status, _, b = fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/uq/batch",
		fmt.Sprintf(`{"updates":[{"id":"b","fencing_token":%d,"release":true,"unstarted":true}],"claim":{"owner":"w","lease_ms":60000,"max":1}}`, bt.FencingToken), adminAuth())
	var batch struct {
		Results []struct {
			Task  json.RawMessage `json:"task"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
		Next []struct {
			TaskID  string `json:"task_id"`
			Attempt uint64 `json:"attempt"`
		} `json:"next"`
	}
	decodeBody(t, b, &batch)
	if status != http.StatusOK || len(batch.Results) != 1 || batch.Results[0].Error != nil || len(batch.Next) != 1 || batch.Next[0].Attempt != 1 {
		t.Fatalf("batch: %d %s", status, b)
	}
	if err := json.Unmarshal(batch.Results[0].Task, &got); err != nil || got.Status != "pending" || got.Attempt != 0 {
		t.Errorf("batch's unstarted release: %s, want pending, attempt 0", batch.Results[0].Task)
	}
}
