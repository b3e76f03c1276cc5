package server

import (
	"fmt"
	"net/http"
	"testing"
)

type cancelTask struct {
	lifecycleTask
	CancelRequested bool `json:"cancel_requested"`
}

func (fx *apiFixture) mustCancelTask(t *testing.T, method, path, body string, auth map[string]string, want int) cancelTask {
	t.Helper()
	status, _, resp := fx.c.do(t, 0, method, path, body, auth)
	if status != want {
		t.Fatalf("%s %s %s: got %d %s, want %d", method, path, body, status, resp, want)
	}
	var task cancelTask
	if want < 300 {
		decodeBody(t, resp, &task)
	}
	return task
}

// TestTaskCancelHTTP: POST .../cancel cancels an unleased task at once;
// a leased one gets cancel_requested, which renew shows, and is cancelled
// by the leader's sweep once the lease runs out, after which the holder's
// token is refused; the queue's statistics count the leased task as
// running until then.
func TestTaskCancelHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"c1","queue":"cq"}`, adm, http.StatusCreated)
	c := fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c1/cancel", `{"reason":"not needed"}`, adm, http.StatusOK)
	if c.Status != "cancelled" || c.LastError != "not needed" || c.CancelRequested {
		t.Fatalf("unleased task after cancel: %+v", c)
	}
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/nope/cancel", `{}`, adm, http.StatusNotFound)
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c1/cancel", `{"reason":"x","bogus":1}`, adm, http.StatusBadRequest)

	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"c2","queue":"cq"}`, adm, http.StatusCreated)
	held := fx.mustCancelTask(t, "POST", "/v1/tenants/acme/queues/cq/claim", `{"owner":"w1","lease_ms":1500}`, adm, http.StatusOK)
	var stats struct {
		Running int64 `json:"running"`
		Waiting int64 `json:"waiting"`
	}
	fx.get(t, "/v1/tenants/acme/queues/cq", adm, http.StatusOK, &stats)
	if stats.Running != 1 || stats.Waiting != 0 {
		t.Fatalf("stats with one claimed task: %+v", stats)
	}
	r := fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c2/cancel", `{}`, adm, http.StatusOK)
	if !r.CancelRequested || r.Owner != "w1" || r.Status != "pending" {
		t.Fatalf("leased task after cancel: %+v", r)
	}
	renew := fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c2/renew",
		fmt.Sprintf(`{"fencing_token":%d,"lease_ms":1500}`, held.FencingToken), adm, http.StatusOK)
	if !renew.CancelRequested {
		t.Fatalf("renew does not show cancel_requested: %+v", renew)
	}
	waitFor(t, "the sweep to cancel c2", func() string {
		got := fx.mustCancelTask(t, "GET", "/v1/tenants/acme/tasks/c2", "", adm, http.StatusOK)
		if got.Status != "cancelled" {
			return fmt.Sprintf("%+v", got)
		}
		return ""
	})
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c2/update",
		fmt.Sprintf(`{"fencing_token":%d,"status":"done","release":true}`, held.FencingToken), adm, http.StatusConflict)
	fx.get(t, "/v1/tenants/acme/queues/cq", adm, http.StatusOK, &stats)
	if stats.Running != 0 {
		t.Fatalf("stats after the cancellation: %+v", stats)
	}

	// The holder acknowledges with its token: cancelled at once.
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"c3","queue":"cq"}`, adm, http.StatusCreated)
	held = fx.mustCancelTask(t, "POST", "/v1/tenants/acme/queues/cq/claim", `{"owner":"w1","lease_ms":60000}`, adm, http.StatusOK)
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c3/cancel", `{}`, adm, http.StatusOK)
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c3/cancel", `{"fencing_token":1}`, adm, http.StatusConflict)
	ack := fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c3/cancel", fmt.Sprintf(`{"fencing_token":%d}`, held.FencingToken), adm, http.StatusOK)
	if ack.Status != "cancelled" || ack.CancelRequested || ack.FencingToken <= held.FencingToken {
		t.Fatalf("after the holder's acknowledgement: %+v", ack)
	}

	// Grants: a principal without tasks write on the queue may not cancel.
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"c4","queue":"cq"}`, adm, http.StatusCreated)
	fx.mustCancelTask(t, "POST", "/v1/tenants/acme/tasks/c4/cancel", `{}`, bearer(fx.reader), http.StatusForbidden)
	if got := fx.mustCancelTask(t, "GET", "/v1/tenants/acme/tasks/c4", "", adm, http.StatusOK); got.Status != "pending" {
		t.Fatalf("a refused cancel wrote: %+v", got)
	}
}
