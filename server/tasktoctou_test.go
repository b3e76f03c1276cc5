package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// TestTaskWriteCheckedAsItApplies: a task write by id is authorized against
// the task the command applies to, not only the one the handler saw. A
// principal granted on queue research sends an update of its task and
// holds the body back (until the handler asks for it with 100 Continue,
// after authorizing); meanwhile it deletes the task and the admin creates
// the id again in secret-q. The update is then refused as any task outside
// the grant (403), and the other queue's task is unchanged.
func TestTaskWriteCheckedAsItApplies(t *testing.T) {
	fx := newAPIFixture(t)
	c := fx.c
	worker := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"worker","grants":[{"resource":"tasks","prefix":"research","actions":["read","write","delete"]}]}`)
	if status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t-1","queue":"research"}`, bearer(worker)); status != http.StatusCreated {
		t.Fatalf("create t-1 in research: got %d %s, want 201", status, body)
	}
	for _, tc := range []struct {
		name, path, body string
	}{
		{"update", "/v1/tenants/acme/tasks/t-1/update", `{"payload":{"stolen":true}}`},
		{"claim", "/v1/tenants/acme/tasks/t-1/claim", `{"owner":"thief","lease_ms":60000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			req, err := http.NewRequest("POST", "http://"+c.nodes[0].httpAddr+tc.path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(tc.body))
			req.Header.Set("Authorization", "Bearer "+worker)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Expect", "100-continue")
			asked := make(chan struct{})
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{Got100Continue: func() { close(asked) }}))
			client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
			defer client.CloseIdleConnections()
			type answer struct {
				status int
				body   []byte
				err    error
			}
			done := make(chan answer, 1)
			go func() {
				resp, err := client.Do(req)
				if err != nil {
					done <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				done <- answer{resp.StatusCode, b, err}
			}()
			select {
			case <-asked: // authorized; the handler waits for the body
			case a := <-done:
				t.Fatalf("answered before the body was sent: %d %s %v", a.status, a.body, a.err)
			case <-time.After(waitTimeout):
				t.Fatal("the server never asked for the body (100 Continue)")
			}
			if status, _, body := c.do(t, 0, "DELETE", "/v1/tenants/acme/tasks/t-1", nil, bearer(worker)); status != http.StatusNoContent {
				t.Fatalf("worker deletes t-1: got %d %s, want 204", status, body)
			}
			if status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t-1","queue":"secret-q","payload":{"secret":"victim"}}`, adminAuth()); status != http.StatusCreated {
				t.Fatalf("admin creates t-1 in secret-q: got %d %s, want 201", status, body)
			}
			_, _, before := c.do(t, 0, "GET", "/v1/tenants/acme/tasks/t-1", nil, adminAuth())
			if _, err := pw.Write([]byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			a := <-done
			if a.err != nil || a.status != http.StatusForbidden || errorCode(a.body) != "forbidden" || bytes.Contains(a.body, []byte("victim")) || bytes.Contains(a.body, []byte("secret-q")) {
				t.Errorf("held-back %s after the id moved to secret-q: got %d %s (%v), want 403 forbidden naming nothing of it", tc.name, a.status, a.body, a.err)
			}
			_, _, after := c.do(t, 0, "GET", "/v1/tenants/acme/tasks/t-1", nil, adminAuth())
			var b, f map[string]any
			_ = json.Unmarshal(before, &b)
			_ = json.Unmarshal(after, &f)
			if b["version"] != f["version"] || f["owner"] != "" {
				t.Errorf("secret-q's t-1: got %s, want it unchanged (%s)", after, before)
			}
			// Back to research for the next case.
			c.do(t, 0, "DELETE", "/v1/tenants/acme/tasks/t-1", nil, adminAuth())
			if status, _, body := c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t-1","queue":"research"}`, bearer(worker)); status != http.StatusCreated {
				t.Fatalf("create t-1 in research again: got %d %s, want 201", status, body)
			}
		})
	}
}
