package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// TestFlowControlHTTP: a queue policy's max_leased holds queue claims (204,
// and a long poll that waits until a release) and claims by id (429); a
// rate admits its burst, then a long poll waits for the next token; bad
// limits are 400.
func TestFlowControlHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	for body, want := range map[string]int{
		`{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"max_leased":-1}`:         http.StatusBadRequest,
		`{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"claim_burst":3}`:         http.StatusBadRequest,
		`{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"claims_per_second":1e9}`: http.StatusBadRequest,
	} {
		if status, _, resp := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/queues/fq/policy", body, adm); status != want {
			t.Errorf("policy %s: %d %s, want %d", body, status, resp, want)
		}
	}
	status, _, resp := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/queues/fq/policy",
		`{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"max_leased":1,"concurrency_key_limit":1}`, adm)
	if status != http.StatusOK || !strings.Contains(string(resp), `"max_leased":1`) {
		t.Fatalf("policy: %d %s", status, resp)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"f1","queue":"fq","concurrency_key":"cust-1"}`, adm, http.StatusCreated)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"f2","queue":"fq"}`, adm, http.StatusCreated)
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"bad","queue":"fq","concurrency_key":"a/b"}`, adm, http.StatusBadRequest)
	held := fx.mustTask(t, "POST", "/v1/tenants/acme/queues/fq/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusOK)
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/fq/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusNoContent)
	if status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks/f2/claim", `{"owner":"w","lease_ms":60000}`, adm); status != http.StatusTooManyRequests {
		t.Fatalf("claim by id at max_leased: %d %s", status, resp)
	}
	done := make(chan int, 1)
	go func() {
		status, _, _ := fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/fq/claim", `{"owner":"w","lease_ms":60000,"wait_ms":20000}`, adm)
		done <- status
	}()
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/"+held.TaskID+"/update",
		fmt.Sprintf(`{"fencing_token":%d,"status":"done","release":true}`, held.FencingToken), adm, http.StatusOK)
	if status := <-done; status != http.StatusOK {
		t.Fatalf("the long poll after the release: %d", status)
	}

	fx.c.do(t, 0, "PUT", "/v1/tenants/acme/queues/rq/policy", `{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"claims_per_second":2,"claim_burst":1}`, adm)
	for i := range 3 {
		fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", fmt.Sprintf(`{"task_id":"r%d","queue":"rq"}`, i), adm, http.StatusCreated)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/rq/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusOK)
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/rq/claim", `{"owner":"w","lease_ms":60000,"wait_ms":20000}`, adm, http.StatusOK)
}

// TestRetryAfterFlow: a claim refused by a queue's rate answers
// Retry-After from its retry_after_ms (whole seconds, rounded up); a
// refusal by the leased limits has none.
func TestRetryAfterFlow(t *testing.T) {
	for details, want := range map[string]string{
		`{"limit":"claims_per_second","retry_after_ms":1500}`: "2",
		`{"limit":"claims_per_second","retry_after_ms":20}`:   "1",
		`{"limit":"leased"}`: "",
	} {
		rec := httptest.NewRecorder()
		if err := reply(rec, &fsm.Result{Code: wire.CodeRateLimited, Message: "x", Details: json.RawMessage(details)}, nil); err != nil {
			t.Fatal(err)
		}
		if got := rec.Header().Get("Retry-After"); got != want || rec.Code != http.StatusTooManyRequests {
			t.Errorf("%s: %d, Retry-After %q, want 429 and %q", details, rec.Code, got, want)
		}
	}
}
