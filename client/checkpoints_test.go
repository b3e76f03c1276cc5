package client_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

func TestCheckpointRequestShapes(t *testing.T) {
	runShapes(t, []shapeCase{
		{"PutCheckpoint first", func(c *client.Client) error {
			_, err := c.PutCheckpoint(bg, "acme", "chat-7", "cp-1", client.PutCheckpointRequest{Data: json.RawMessage(`{"m":[]}`)})
			return err
		}, "PUT", "/v1/tenants/acme/threads/chat-7/checkpoints/cp-1", "", `{"data":{"m":[]}}`},
		{"PutCheckpoint fork", func(c *client.Client) error {
			_, err := c.PutCheckpoint(bg, "acme", "chat-7", "cp-2", client.PutCheckpointRequest{ParentID: "cp-1",
				Data: json.RawMessage(`1`), Metadata: json.RawMessage(`{"step":2}`), Fork: true, Fence: &client.Fence{TaskID: "t", Token: 9}})
			return err
		}, "PUT", "/v1/tenants/acme/threads/chat-7/checkpoints/cp-2", "",
			`{"parent_id":"cp-1","data":1,"metadata":{"step":2},"fork":true,"fence":{"task_id":"t","token":9}}`},
		{"GetCheckpoint", func(c *client.Client) error { _, err := c.GetCheckpoint(bg, "acme", "chat-7", "cp-1"); return err },
			"GET", "/v1/tenants/acme/threads/chat-7/checkpoints/cp-1", "", ``},
		{"LatestCheckpoint", func(c *client.Client) error { _, err := c.LatestCheckpoint(bg, "acme", "chat-7"); return err },
			"GET", "/v1/tenants/acme/threads/chat-7/checkpoints/latest", "", ``},
		{"ListCheckpoints", func(c *client.Client) error {
			_, err := c.ListCheckpoints(bg, "acme", "chat-7", client.ListCheckpointsOptions{Before: "cp-9", Limit: 3})
			return err
		},
			"GET", "/v1/tenants/acme/threads/chat-7/checkpoints", "before=cp-9&limit=3", ``},
		{"ListCheckpoints all", func(c *client.Client) error {
			_, err := c.ListCheckpoints(bg, "acme", "chat-7", client.ListCheckpointsOptions{})
			return err
		},
			"GET", "/v1/tenants/acme/threads/chat-7/checkpoints", "", ``},
		{"PutWrites", func(c *client.Client) error {
			return c.PutWrites(bg, "acme", "chat-7", "cp-1", client.PutWritesRequest{TaskID: "step-3", TaskPath: "a:b", Writes: []client.Write{{Channel: "messages", Value: json.RawMessage(`"hi"`)}, {Channel: "__interrupt__", Value: json.RawMessage(`1`), Idx: new(int64(-3))}}})
		}, "PUT", "/v1/tenants/acme/threads/chat-7/checkpoints/cp-1/writes/step-3", "", `{"writes":[{"channel":"messages","value":"hi"},{"idx":-3,"channel":"__interrupt__","value":1}],"task_path":"a:b"}`},
		{"PutCheckpoint in a namespace of an e-mail thread", func(c *client.Client) error {
			_, err := c.PutCheckpoint(bg, "acme", "u@example.com", "cp-1", client.PutCheckpointRequest{NS: "agent:1|tools", Data: json.RawMessage(`1`)})
			return err
		}, "PUT", "/v1/tenants/acme/threads/u@example.com/checkpoints/cp-1", "checkpoint_ns=agent%3A1%7Ctools", `{"data":1}`},
		{"GetCheckpointNS of a thread with a slash", func(c *client.Client) error {
			_, err := c.GetCheckpointNS(bg, "acme", "a/b c", "sub", "cp-1")
			return err
		}, "GET", "/v1/tenants/acme/threads/a%2Fb%20c/checkpoints/cp-1", "checkpoint_ns=sub", ``},
		{"LatestCheckpointNS of thread ..", func(c *client.Client) error { _, err := c.LatestCheckpointNS(bg, "acme", "..", "sub"); return err },
			"GET", "/v1/tenants/acme/threads/%2E%2E/checkpoints/latest", "checkpoint_ns=sub", ``},
		{"ListCheckpoints with a filter", func(c *client.Client) error {
			_, err := c.ListCheckpoints(bg, "acme", "chat-7", client.ListCheckpointsOptions{NS: "sub", Filter: map[string]any{"source": "loop"}})
			return err
		}, "GET", "/v1/tenants/acme/threads/chat-7/checkpoints", "checkpoint_ns=sub&filter=%7B%22source%22%3A%22loop%22%7D", ``},
		{"PutWrites in a namespace", func(c *client.Client) error {
			return c.PutWrites(bg, "acme", "chat-7", "cp-1", client.PutWritesRequest{NS: "sub", TaskID: "k", Writes: []client.Write{}})
		}, "PUT", "/v1/tenants/acme/threads/chat-7/checkpoints/cp-1/writes/k", "checkpoint_ns=sub", `{"writes":[]}`},
		{"DeleteThread", func(c *client.Client) error { return c.DeleteThread(bg, "acme", "chat-7", nil) },
			"DELETE", "/v1/tenants/acme/threads/chat-7", "", ``},
		{"DeleteThread fenced", func(c *client.Client) error {
			return c.DeleteThread(bg, "acme", "chat-7", &client.Fence{TaskID: "t", Token: 9})
		}, "DELETE", "/v1/tenants/acme/threads/chat-7", "", `{"fence":{"task_id":"t","token":9}}`},
		{"PutCheckpoint with blobs", func(c *client.Client) error {
			_, err := c.PutCheckpoint(bg, "acme", "t", "c2", client.PutCheckpointRequest{ParentID: "c1", Data: json.RawMessage(`{}`),
				BlobVersions: map[string]string{"m": "2", "a": "1"}, Blobs: []client.Blob{{Channel: "m", Version: "2", Type: "json", Data: []byte(`[1]`)}}})
			return err
		}, "PUT", "/v1/tenants/acme/threads/t/checkpoints/c2", "", `{"parent_id":"c1","data":{},"blob_versions":{"a":"1","m":"2"},"blobs":[{"channel":"m","version":"2","type":"json","b64":"WzFd"}]}`},
		{"CopyThread", func(c *client.Client) error { _, err := c.CopyThread(bg, "acme", "a/b", "c", nil); return err },
			"POST", "/v1/tenants/acme/threads/a%2Fb/copy", "", `{"target":"c"}`},
		{"PruneThreads keep latest", func(c *client.Client) error {
			_, err := c.PruneThreads(bg, "acme", []string{"t1", "t2"}, true)
			return err
		}, "POST", "/v1/tenants/acme/checkpoints/prune", "", `{"threads":["t1","t2"],"strategy":"keep_latest"}`},
		{"PruneThreads delete none", func(c *client.Client) error { _, err := c.PruneThreads(bg, "acme", nil, false); return err },
			"POST", "/v1/tenants/acme/checkpoints/prune", "", `{"threads":[],"strategy":"delete"}`},
		{"DeleteRuns", func(c *client.Client) error { _, err := c.DeleteRuns(bg, "acme", []string{"run-1"}); return err },
			"POST", "/v1/tenants/acme/checkpoints/delete-runs", "", `{"run_ids":["run-1"]}`},
		{"SetCheckpointPolicy", func(c *client.Client) error {
			_, err := c.SetCheckpointPolicy(bg, "acme", client.CheckpointPolicy{Prefix: "", KeepLast: 5, MaxAge: 90 * time.Minute})
			return err
		}, "PUT", "/v1/tenants/acme/checkpoint-policies", "", `{"prefix":"","keep_last":5,"max_age_ms":5400000}`},
		{"ListCheckpointPolicies", func(c *client.Client) error { _, err := c.ListCheckpointPolicies(bg, "acme"); return err },
			"GET", "/v1/tenants/acme/checkpoint-policies", "", ``},
		{"ListTenantCheckpoints of every thread", func(c *client.Client) error {
			_, err := c.ListTenantCheckpoints(bg, "acme", client.ListTenantCheckpointsOptions{})
			return err
		}, "GET", "/v1/tenants/acme/checkpoints", "limit=100", ``},
		{"ListTenantCheckpoints of a thread's default namespace", func(c *client.Client) error {
			_, err := c.ListTenantCheckpoints(bg, "acme", client.ListTenantCheckpointsOptions{Thread: new("a/b"), NS: new(""),
				BeforeID: "1f0", PendingWrites: true, Limit: 5})
			return err
		}, "GET", "/v1/tenants/acme/checkpoints", "before_id=1f0&checkpoint_ns=&limit=5&pending_writes=true&thread=a%2Fb", ``},
	})
}

// putCheckpoints writes a chain of checkpoints, each the next one's
// parent, on a thread of its own of the package's node; it returns the
// thread.
func putCheckpoints(t *testing.T, c *client.Client, ids ...string) string {
	t.Helper()
	thread := uniqueName("chat")
	parent := ""
	for i, id := range ids {
		if _, err := c.PutCheckpoint(bg, "acme", thread, id, client.PutCheckpointRequest{ParentID: parent,
			Data: json.RawMessage(strconv.Itoa(i + 1)), Metadata: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	return thread
}

func TestCheckpointDecodes(t *testing.T) {
	c := newClient(t, env.URL())
	thread := putCheckpoints(t, c, "cp-1", "cp-2")
	idx := int64(-3)
	if err := c.PutWrites(bg, "acme", thread, "cp-2", client.PutWritesRequest{TaskID: "step-3", TaskPath: "p",
		Writes: []client.Write{{Channel: "__interrupt__", Value: json.RawMessage(`{"ask": 1}`), Idx: &idx}}}); err != nil {
		t.Fatal(err)
	}
	cp, err := c.LatestCheckpoint(bg, "acme", thread)
	if err != nil {
		t.Fatal(err)
	}
	if cp.ThreadID != thread || cp.CheckpointID != "cp-2" || cp.ParentID != "cp-1" || !jsonEqual(cp.Data, `2`) ||
		cp.CreatedAt.IsZero() || len(cp.PendingWrites) != 1 {
		t.Fatalf("got %+v", cp)
	}
	if w := cp.PendingWrites[0]; w.TaskID != "step-3" || w.TaskPath != "p" || w.Idx != -3 || w.Channel != "__interrupt__" || !jsonEqual(w.Value, `{"ask": 1}`) {
		t.Errorf("pending write: got %+v", w)
	}
}

func TestCheckpointList(t *testing.T) {
	c := newClient(t, env.URL())
	thread := putCheckpoints(t, c, "a", "b")
	list, err := c.ListCheckpoints(bg, "acme", thread, client.ListCheckpointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].CheckpointID != "b" || list[1].CheckpointID != "a" {
		t.Errorf("got %+v, want b then a", list)
	}
}

// TestCheckpointHeadMismatch: a put whose parent is not the head is
// ErrVersionMismatch carrying the current head.
func TestCheckpointHeadMismatch(t *testing.T) {
	c := newClient(t, env.URL())
	thread := putCheckpoints(t, c, "cp-1", "cp-2")
	_, err := c.PutCheckpoint(bg, "acme", thread, "cp-3", client.PutCheckpointRequest{ParentID: "cp-1", Data: json.RawMessage(`1`)})
	var e *client.Error
	if !errors.Is(err, client.ErrVersionMismatch) || !errors.As(err, &e) {
		t.Fatalf("got %v, want ErrVersionMismatch", err)
	}
	if head, _ := e.DetailString("current_head"); head != "cp-2" {
		t.Errorf("got current_head %q, want cp-2", head)
	}
}
