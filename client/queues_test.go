package client_test

import (
	"encoding/json"
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

// TestQueueStatsDecode: the API's figures, for a queue of the node with a
// claimable task, one due later and a dead one, and a task's retention
// fields come back typed.
func TestQueueStatsDecode(t *testing.T) {
	c := newClient(t, env.URL())
	q := uniqueName("stats")
	for _, req := range []client.CreateTaskRequest{{Queue: q}, {Queue: q, Delay: time.Hour}, {Queue: q, MaxAttempts: 1}} {
		if _, err := c.CreateTask(bg, "acme", req); err != nil {
			t.Fatal(err)
		}
	}
	// The claim takes the claimable tasks in creation order: the first,
	// then (once the first is taken) the one with MaxAttempts 1, which
	// fails and dies.
	first, err := c.ClaimQueue(bg, "acme", q, client.QueueClaimRequest{Owner: "w", Lease: time.Minute})
	if err != nil || first == nil {
		t.Fatalf("claim: %+v %v", first, err)
	}
	doomed, err := c.ClaimQueue(bg, "acme", q, client.QueueClaimRequest{Owner: "w", Lease: time.Minute})
	if err != nil || doomed == nil || doomed.MaxAttempts != 1 {
		t.Fatalf("claim: %+v %v", doomed, err)
	}
	if _, err := c.FailTask(bg, "acme", doomed.TaskID, client.FailTaskRequest{FencingToken: doomed.FencingToken, Error: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateTask(bg, "acme", first.TaskID, client.UpdateTaskRequest{FencingToken: &first.FencingToken,
		Release: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetQueueStats(bg, "acme", q)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queue != q || st.Tasks != 3 || st.Dead != 1 || st.Waiting != 2 || st.DueLater != 1 || st.OldestPendingAt == nil ||
		st.OldestPendingAge() < 0 || st.ClaimsPerMinute < 2 || st.AsOf.IsZero() || st.ByStatus["pending"] != 2 {
		t.Fatalf("decoded %+v", st)
	}
	var task client.Task
	if err := json.Unmarshal([]byte(`{"task_id":"t","retention_ms":60000,"expires_at":"2026-12-01T10:16:30.123Z"}`), &task); err != nil ||
		task.Retention != time.Minute || task.ExpiresAt == nil {
		t.Fatalf("task retention fields: %+v %v", task, err)
	}
}

func ptr[T any](v T) *T { return &v }
