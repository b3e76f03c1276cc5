package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestRequestBodiesUnchanged pins the bytes the SDK sends for each request
// body, fully set and left empty: its request types are converted to the
// wire package's (fsm/wire), and the server decodes what it always
// did only if the members, their order, their spelling and what is left
// out stay exactly as they were.
//
// The bodies are read by the recording proxy in front of the package's
// node; the node's answers (often errors, for the made-up ids) are not the
// subject.
func TestRequestBodiesUnchanged(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("", 3600))
	str, ver, tok, prio, yes := "running", uint64(3), uint64(7), int64(-2), true
	art := "sha256:" + string(make([]byte, 0))
	fence := &client.Fence{TaskID: "t0", Token: 9}
	calls := []struct {
		name string
		call func() error
		want string
	}{
		{"create task", func() error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: "t1", Queue: "q", Status: "new", Priority: &prio,
				Payload: json.RawMessage(`{"a": 1}`), MaxAttempts: 4, BackoffInitial: 1500 * time.Microsecond, BackoffMax: time.Minute,
				AvailableAt: &at, Delay: 2 * time.Second, Retention: time.Hour})
			return err
		}, `{"task_id":"t1","queue":"q","status":"new","priority":-2,"payload":{"a":1},"max_attempts":4,"backoff_initial_ms":1,"backoff_max_ms":60000,"available_at":"2030-01-02T03:04:05.0000006+01:00","delay_ms":2000,"retention_ms":3600000}`},
		{"create task, empty", func() error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q"})
			return err
		}, `{"queue":"q"}`},
		{"claim task", func() error {
			_, err := c.ClaimTask(ctx, "acme", "t1", client.ClaimRequest{Owner: "w", Lease: time.Second, ExpectStatus: &str,
				ExpectVersion: &ver, SetStatus: &str})
			return err
		}, `{"owner":"w","lease_ms":1000,"expect_status":"running","expect_version":3,"set_status":"running"}`},
		{"claim task, empty", func() error {
			_, err := c.ClaimTask(ctx, "acme", "t1", client.ClaimRequest{Owner: "w"})
			return err
		}, `{"owner":"w","lease_ms":0}`},
		{"claim queue", func() error {
			_, err := c.ClaimQueue(ctx, "acme", "q", client.QueueClaimRequest{Owner: "w", Lease: time.Second,
				Statuses: []string{"a", "b"}, SetStatus: &str, Wait: 10 * time.Millisecond})
			return err
		}, `{"owner":"w","lease_ms":1000,"statuses":["a","b"],"set_status":"running","wait_ms":10}`},
		{"claim queue, empty", func() error {
			_, err := c.ClaimQueue(ctx, "acme", "q", client.QueueClaimRequest{Owner: "w"})
			return err
		}, `{"owner":"w","lease_ms":0}`},
		{"renew", func() error {
			_, err := c.RenewTask(ctx, "acme", "t1", client.RenewRequest{FencingToken: 7, Lease: time.Second})
			return err
		}, `{"fencing_token":7,"lease_ms":1000}`},
		{"renew, empty", func() error {
			_, err := c.RenewTask(ctx, "acme", "t1", client.RenewRequest{})
			return err
		}, `{"fencing_token":0,"lease_ms":0}`},
		{"update", func() error {
			_, err := c.UpdateTask(ctx, "acme", "t1", client.UpdateTaskRequest{FencingToken: &tok, ExpectVersion: &ver,
				ExpectStatus: &str, Status: &str, ArtifactID: &art, Result: json.RawMessage(`[1]`), Payload: json.RawMessage(`"p"`),
				Release: &yes, AvailableAt: &at, Delay: time.Millisecond})
			return err
		}, `{"fencing_token":7,"expect_version":3,"expect_status":"running","status":"running","artifact_id":"sha256:","result":[1],"payload":"p","release":true,"available_at":"2030-01-02T03:04:05.0000006+01:00","delay_ms":1}`},
		{"update, empty", func() error {
			_, err := c.UpdateTask(ctx, "acme", "t1", client.UpdateTaskRequest{})
			return err
		}, `{}`},
		{"fail", func() error {
			_, err := c.FailTask(ctx, "acme", "t1", client.FailTaskRequest{FencingToken: 7, Error: "boom", NonRetryable: true, Status: "x"})
			return err
		}, `{"fencing_token":7,"error":"boom","non_retryable":true,"status":"x"}`},
		{"fail, empty", func() error {
			_, err := c.FailTask(ctx, "acme", "t1", client.FailTaskRequest{})
			return err
		}, `{"fencing_token":0}`},
		{"retry", func() error {
			_, err := c.RetryTask(ctx, "acme", "t1", client.RetryTaskRequest{ExpectVersion: &ver, Status: "x", AvailableAt: &at, Delay: time.Second})
			return err
		}, `{"expect_version":3,"status":"x","available_at":"2030-01-02T03:04:05.0000006+01:00","delay_ms":1000}`},
		{"retry, empty", func() error {
			_, err := c.RetryTask(ctx, "acme", "t1", client.RetryTaskRequest{})
			return err
		}, `{}`},
		{"queue policy", func() error {
			_, err := c.SetQueuePolicy(ctx, "acme", "q", client.QueuePolicy{MaxAttempts: 2, BackoffInitial: time.Second,
				BackoffMax: time.Minute, Retention: time.Hour})
			return err
		}, `{"max_attempts":2,"backoff_initial_ms":1000,"backoff_max_ms":60000,"retention_ms":3600000}`},
		{"queue policy, empty", func() error {
			_, err := c.SetQueuePolicy(ctx, "acme", "q", client.QueuePolicy{})
			return err
		}, `{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0}`},
		{"publish", func() error {
			_, err := c.PublishArtifact(ctx, "acme", "a", client.PublishRequest{Chunks: []client.ChunkRef{{Digest: "d", Size: 3}},
				Digest: "d", Size: 3, MediaType: "text/plain", Sources: []string{"s"}, Metadata: json.RawMessage(`{"k":"v"}`),
				TaskID: "t1", Fence: fence})
			return err
		}, `{"chunks":[{"digest":"d","size":3}],"digest":"d","size":3,"media_type":"text/plain","sources":["s"],"metadata":{"k":"v"},"task_id":"t1","fence":{"task_id":"t0","token":9}}`},
		{"publish, empty", func() error {
			_, err := c.PublishArtifact(ctx, "acme", "a", client.PublishRequest{})
			return err
		}, `{"chunks":[],"digest":"","size":0}`},
		{"artifact policy", func() error {
			_, err := c.SetArtifactPolicy(ctx, "acme", client.ArtifactPolicy{Prefix: "p/", KeepLast: 2})
			return err
		}, `{"prefix":"p/","keep_last":2}`},
		{"artifact policy, empty", func() error {
			_, err := c.SetArtifactPolicy(ctx, "acme", client.ArtifactPolicy{})
			return err
		}, `{"prefix":"","keep_last":0}`},
		{"missing chunks", func() error {
			_, err := c.MissingChunks(ctx, "acme", []string{"d1", "d2"})
			return err
		}, `{"digests":["d1","d2"]}`},
		{"checkpoint", func() error {
			_, err := c.PutCheckpoint(ctx, "acme", "th", "c2", client.PutCheckpointRequest{NS: "n", ParentID: "c1",
				Data: json.RawMessage(`{"x": 1}`), Metadata: json.RawMessage(`{"m":2}`), Fork: true, Fence: fence,
				DataChunks: []client.ChunkRef{{Digest: "d", Size: 1}}})
			return err
		}, `{"parent_id":"c1","data":{"x":1},"metadata":{"m":2},"fork":true,"fence":{"task_id":"t0","token":9},"data_chunks":[{"digest":"d","size":1}]}`},
		{"checkpoint, empty", func() error {
			_, err := c.PutCheckpoint(ctx, "acme", "th", "c1", client.PutCheckpointRequest{})
			return err
		}, `{}`},
		{"writes", func() error {
			return c.PutWrites(ctx, "acme", "th", "c1", client.PutWritesRequest{NS: "n", TaskID: "t1", Writes: []client.Write{{Channel: "c", Value: json.RawMessage(`1`)}}, Fence: fence})
		}, `{"writes":[{"channel":"c","value":1}],"fence":{"task_id":"t0","token":9}}`},
		{"writes, empty", func() error {
			return c.PutWrites(ctx, "acme", "th", "c1", client.PutWritesRequest{TaskID: "t1"})
		}, `{"writes":[]}`},
		{"delete thread", func() error { return c.DeleteThread(ctx, "acme", "th", fence) }, `{"fence":{"task_id":"t0","token":9}}`},
		{"delete thread, no fence", func() error { return c.DeleteThread(ctx, "acme", "th", nil) }, ``},
		{"kv put", func() error {
			_, err := c.PutKV(ctx, "acme", "ns", "k", client.PutKVRequest{Value: json.RawMessage(`1`), ExpectVersion: &ver,
				TTL: time.Second, Fence: fence})
			return err
		}, `{"value":1,"expect_version":3,"ttl_ms":1000,"fence":{"task_id":"t0","token":9}}`},
		{"txn", func() error {
			_, err := c.Txn(ctx, "acme", []client.TxnOp{
				client.TxnCreateTask(client.CreateTaskRequest{Queue: "q", AvailableAt: &at, Retention: time.Second}),
				client.TxnClaimTask("t1", client.ClaimRequest{Owner: "w", Lease: time.Second, SetStatus: &str}),
				client.TxnUpdateTask("t1", client.UpdateTaskRequest{FencingToken: &tok, Release: &yes, Delay: time.Second}),
				client.TxnPutKV("ns", "k", client.PutKVRequest{Value: json.RawMessage(`2`), TTL: time.Second}),
				client.TxnDeleteKV("ns", "k", &ver, fence),
				client.TxnSetRef("r", client.SetRefRequest{ArtifactID: "a", ExpectAbsent: true}),
			})
			return err
		}, `{"ops":[{"available_at":"2030-01-02T03:04:05.0000006+01:00","op":"task.create","queue":"q","retention_ms":1000},` +
			`{"lease_ms":1000,"op":"task.claim","owner":"w","set_status":"running","task_id":"t1"},` +
			`{"delay_ms":1000,"fencing_token":7,"op":"task.update","release":true,"task_id":"t1"},` +
			`{"key":"k","namespace":"ns","op":"kv.put","ttl_ms":1000,"value":2},` +
			`{"expect_version":3,"fence":{"task_id":"t0","token":9},"key":"k","namespace":"ns","op":"kv.delete"},` +
			`{"artifact_id":"a","expect_artifact_id":"","op":"ref.set","ref":"r"}]}`},
	}
	// A time encoding/json cannot write is an error, before anything is
	// sent, as it was when the SDK marshalled time.Time itself.
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	calls = append(calls, struct {
		name string
		call func() error
		want string
	}{"available_at out of range", func() error {
		var e *client.Error
		_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q", AvailableAt: &far})
		if err == nil || errors.As(err, &e) {
			return errors.New("CreateTask sent an available_at it cannot encode")
		}
		_, err = c.Txn(ctx, "acme", []client.TxnOp{client.TxnUpdateTask("t1", client.UpdateTaskRequest{AvailableAt: &far})})
		if err == nil || errors.As(err, &e) {
			return errors.New("Txn sent an available_at it cannot encode")
		}
		return c.PutWrites(ctx, "acme", "th", "c1", client.PutWritesRequest{TaskID: "t1"}) // the one request sent
	}, `{"writes":[]}`})
	for _, tc := range calls {
		before := p.Count()
		var e *client.Error
		if err := tc.call(); err != nil && !errors.As(err, &e) {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		reqs := p.Requests()
		if len(reqs) != before+1 {
			t.Errorf("%s: sent %d requests, want 1", tc.name, len(reqs)-before)
			continue
		}
		if got := string(reqs[len(reqs)-1].Body); got != tc.want {
			t.Errorf("%s: sent\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
