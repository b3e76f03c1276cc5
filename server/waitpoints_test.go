package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

type waitpointWire struct {
	ID         string  `json:"waitpoint_id"`
	State      string  `json:"state"`
	Payload    any     `json:"payload"`
	TaskID     string  `json:"task_id"`
	ResolvedAt *string `json:"resolved_at"`
}

// TestWaitpointsHTTP: a task parks on a waitpoint and no claim takes it;
// a long-poll GET answers once a person completes the waitpoint; the task
// is claimable again with the payload in its claim; a second completion
// with the same payload is 200, with another 409; a waitpoint times out
// by the leader's loop; grants apply.
func TestWaitpointsHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	adm := adminAuth()
	var wp waitpointWire
	status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints", `{"waitpoint_id":"approve-7","timeout_ms":60000}`, adm)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, resp)
	}
	for body, want := range map[string]int{
		`{"waitpoint_id":"approve-7","timeout_ms":60000}`: http.StatusConflict,
		`{"waitpoint_id":"x","timeout_ms":0}`:             http.StatusBadRequest,
		`{"waitpoint_id":"a/b","timeout_ms":10}`:          http.StatusBadRequest,
	} {
		if status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints", body, adm); status != want {
			t.Errorf("create %s: %d %s, want %d", body, status, resp, want)
		}
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/tasks", `{"task_id":"draft","queue":"hitl"}`, adm, http.StatusCreated)
	held := fx.mustTask(t, "POST", "/v1/tenants/acme/queues/hitl/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusOK)
	parked := fx.mustTask(t, "POST", "/v1/tenants/acme/tasks/draft/wait",
		fmt.Sprintf(`{"fencing_token":%d,"waitpoint_id":"approve-7"}`, held.FencingToken), adm, http.StatusOK)
	if parked.Owner != "" || parked.FencingToken <= held.FencingToken {
		t.Fatalf("parked: %+v", parked)
	}
	fx.mustTask(t, "POST", "/v1/tenants/acme/queues/hitl/claim", `{"owner":"w","lease_ms":60000}`, adm, http.StatusNoContent)

	done := make(chan waitpointWire, 1)
	go func() {
		var got waitpointWire
		status, _, resp := fx.c.do(t, 0, "GET", "/v1/tenants/acme/waitpoints/approve-7?wait_ms=20000", nil, adm)
		if status == http.StatusOK {
			decodeBody(t, resp, &got)
		}
		done <- got
	}()
	status, _, resp = fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints/approve-7/complete", `{"payload":{"approved":true}}`, adm)
	if status != http.StatusOK {
		t.Fatalf("complete: %d %s", status, resp)
	}
	select {
	case got := <-done:
		if got.State != "completed" || got.TaskID != "draft" {
			t.Fatalf("long poll answered %+v", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the long poll did not answer after the completion")
	}
	if status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints/approve-7/complete", `{"payload":{"approved": true}}`, adm); status != http.StatusOK {
		t.Fatalf("the same completion again: %d %s", status, resp)
	}
	if status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints/approve-7/complete", `{"payload":{"approved":false}}`, adm); status != http.StatusConflict {
		t.Fatalf("another completion: %d %s", status, resp)
	}
	status, _, resp = fx.c.do(t, 0, "POST", "/v1/tenants/acme/queues/hitl/claim", `{"owner":"w","lease_ms":60000}`, adm)
	if status != http.StatusOK || !strings.Contains(string(resp), `"waitpoint":{"waitpoint_id":"approve-7","state":"completed","payload":{"approved":true}}`) {
		t.Fatalf("claim after the completion: %d %s", status, resp)
	}

	// A timeout, decided by the leader's loop.
	fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints", `{"waitpoint_id":"quick","timeout_ms":300}`, adm)
	waitFor(t, "the waitpoint to time out", func() string {
		fx.get(t, "/v1/tenants/acme/waitpoints/quick?wait_ms=1000", adm, http.StatusOK, &wp)
		if wp.State != "timed_out" || wp.ResolvedAt == nil {
			return fmt.Sprintf("%+v", wp)
		}
		return ""
	})
	if status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints/quick/complete", `{"payload":1}`, adm); status != http.StatusConflict {
		t.Fatalf("complete after the timeout: %d %s", status, resp)
	}
	fx.get(t, "/v1/tenants/acme/waitpoints/nope", adm, http.StatusNotFound, nil)
	fx.get(t, "/v1/tenants/acme/waitpoints/quick", bearer(fx.reader), http.StatusForbidden, nil)
	if status, _, _ := fx.c.do(t, 0, "POST", "/v1/tenants/acme/waitpoints/quick/complete", `{"payload":1}`, bearer(fx.reader)); status != http.StatusForbidden {
		t.Fatalf("complete without a grant: %d", status)
	}
}
