package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestFenceHidesTasksOutsideGrant: a fence naming a task the caller may not
// read is answered exactly as a fence naming a task that does not exist
// (409 fenced, current_token 0, the same message), whatever token it
// carries, so the guard tells the caller nothing about the task; a task it
// may read is still guarded as before.
func TestFenceHidesTasksOutsideGrant(t *testing.T) {
	fx := newAPIFixture(t)
	c := fx.c
	spy := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"spy","grants":[{"resource":"kv","prefix":"","actions":["read","write"]},{"resource":"tasks","prefix":"research","actions":["read","write"]}]}`)
	claim := func(id, queue string) uint64 {
		t.Helper()
		if status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/tasks", fmt.Sprintf(`{"task_id":%q,"queue":%q}`, id, queue), adminAuth()); status != http.StatusCreated {
			t.Fatalf("create %s: got %d %s, want 201", id, status, body)
		}
		status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/tasks/"+id+"/claim", `{"owner":"w","lease_ms":60000}`, adminAuth())
		if status != http.StatusOK {
			t.Fatalf("claim %s: got %d %s, want 200", id, status, body)
		}
		var task struct {
			FencingToken uint64 `json:"fencing_token"`
		}
		decodeBody(t, body, &task)
		return task.FencingToken
	}
	secretTok := claim("secret-1", "secret-q")
	researchTok := claim("r-1", "research")

	put := func(taskID string, token uint64) (int, string) {
		t.Helper()
		status, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme/kv/ns/k",
			fmt.Sprintf(`{"value":1,"fence":{"task_id":%q,"token":%d}}`, taskID, token), bearer(spy))
		return status, string(body)
	}
	missingStatus, missing := put("no-such-task", 7)
	if missingStatus != http.StatusConflict {
		t.Fatalf("fence on a missing task: got %d %s, want 409", missingStatus, missing)
	}
	cases := []struct {
		name  string
		token uint64
	}{
		{"wrong token", secretTok + 1},
		{"current token", secretTok},
		{"zero token", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := put("secret-1", tc.token)
			// The missing task's answer, message included, with this id.
			want := strings.ReplaceAll(missing, "no-such-task", "secret-1")
			if status != missingStatus || body != want {
				t.Errorf("fence on a task outside the grant: got %d %s, want %d %s (as for a missing task)", status, body, missingStatus, want)
			}
		})
	}
	if status, body := put("r-1", researchTok+1); status != http.StatusConflict || errorCode([]byte(body)) != "fenced" ||
		!strings.Contains(body, fmt.Sprintf(`"current_token":%d`, researchTok)) {
		t.Errorf("stale fence on a task inside the grant: got %d %s, want 409 fenced with current_token %d", status, body, researchTok)
	}
	if status, body := put("r-1", researchTok); status != http.StatusOK {
		t.Errorf("current fence on a task inside the grant: got %d %s, want 200", status, body)
	}
}
