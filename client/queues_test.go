package client_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

func TestQueueRequestShapes(t *testing.T) {
	runShapes(t, []shapeCase{
		{"GetQueueStats", func(c *client.Client) error { _, err := c.GetQueueStats(bg, "acme", "research"); return err },
			"GET", "/v1/tenants/acme/queues/research", "", ``},
		{"ListQueues", func(c *client.Client) error {
			_, err := c.ListQueues(bg, "acme", client.ListQueuesOptions{Limit: 5, PageToken: "p"})
			return err
		}, "GET", "/v1/tenants/acme/queues", "limit=5&page_token=p", ``},
		{"CreateTask with retention", func(c *client.Client) error {
			_, err := c.CreateTask(bg, "acme", client.CreateTaskRequest{TaskID: "t1", Queue: "q", Retention: time.Hour})
			return err
		}, "POST", "/v1/tenants/acme/tasks", "", `{"task_id":"t1","queue":"q","retention_ms":3600000}`},
		{"SetQueuePolicy with retention", func(c *client.Client) error {
			_, err := c.SetQueuePolicy(bg, "acme", "q", client.QueuePolicy{Retention: 24 * time.Hour})
			return err
		}, "PUT", "/v1/tenants/acme/queues/q/policy", "", `{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"retention_ms":86400000}`},
	})
}

// TestQueueStatsDecode: the API's figures and a task's retention fields
// come back typed.
func TestQueueStatsDecode(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, 200, json.RawMessage(`{"queue":"q","tasks":3,"by_status":{"pending":2,"dead":1},"waiting":2,"due_later":1,
			"dead":1,"oldest_pending_at":"2026-12-01T10:15:30.123Z","oldest_pending_age_ms":4200,"claims_per_minute":7,
			"as_of":"2026-12-01T10:15:34.323Z"}`))
	}}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	st, err := c.GetQueueStats(bg, "acme", "q")
	if err != nil {
		t.Fatal(err)
	}
	if st.Tasks != 3 || st.ByStatus["dead"] != 1 || st.DueLater != 1 || st.OldestPendingAt == nil ||
		st.OldestPendingAge() != 4200*time.Millisecond || st.ClaimsPerMinute != 7 || st.AsOf.IsZero() {
		t.Fatalf("decoded %+v", st)
	}
	var task client.Task
	if err := json.Unmarshal([]byte(`{"task_id":"t","retention_ms":60000,"expires_at":"2026-12-01T10:16:30.123Z"}`), &task); err != nil ||
		task.Retention != time.Minute || task.ExpiresAt == nil {
		t.Fatalf("task retention fields: %+v %v", task, err)
	}
}
