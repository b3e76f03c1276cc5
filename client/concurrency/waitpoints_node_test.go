package concurrency_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// TestWorkerWaitpoint: a human-in-the-loop step. A worker parks its task
// on a waitpoint; nothing claims it meanwhile; a long-poll GetWaitpoint
// answers once a person completes it; the next claim of the task carries
// the approval. A second, different completion is refused.
func TestWorkerWaitpoint(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("hitl")
	task1, approve := q+"-1", q+"-approve-1"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: task1, Queue: q}); err != nil {
		t.Fatal(err)
	}
	wp, err := c.CreateWaitpoint(ctx, "acme", approve, time.Hour)
	if err != nil || wp.State != client.WaitpointPending {
		t.Fatalf("create: %+v %v", wp, err)
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "hw", Lease: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
		if l.Task().Waitpoint != nil {
			t.Errorf("first claim carries a waitpoint: %+v", l.Task().Waitpoint)
		}
		task, err := l.Park(ctx, approve)
		if err == nil && (!task.Parked || task.WaitpointID != approve) {
			t.Errorf("parked: %+v", task)
		}
		return err
	})
	if !claimed || err != nil {
		t.Fatalf("first run: %v %v", claimed, err)
	}
	quick, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "hw", Lease: 10 * time.Second, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	if claimed, _ := quick.RunOnce(ctx, func(context.Context, *concurrency.Lease) error { return nil }); claimed {
		t.Fatal("a parked task was claimed")
	}
	polled := make(chan *client.Waitpoint, 1)
	go func() {
		got, _ := c.GetWaitpoint(ctx, "acme", approve, 20*time.Second)
		polled <- got
	}()
	if _, err := c.CompleteWaitpoint(ctx, "acme", approve, json.RawMessage(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := <-polled; got == nil || got.State != client.WaitpointCompleted || string(got.Payload) != `{"approved":true}` {
		t.Fatalf("long poll: %+v", got)
	}
	if _, err := c.CompleteWaitpoint(ctx, "acme", approve, json.RawMessage(`{"approved":false}`)); !errors.Is(err, client.ErrVersionMismatch) {
		t.Fatalf("a different completion: %v, want ErrVersionMismatch", err)
	}
	claimed, err = w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
		wo := l.Task().Waitpoint
		if wo == nil || wo.State != client.WaitpointCompleted || string(wo.Payload) != `{"approved":true}` {
			t.Errorf("resumed claim's waitpoint: %+v", wo)
		}
		_, err := l.Complete(ctx, "done", nil)
		return err
	})
	if !claimed || err != nil {
		t.Fatalf("resumed run: %v %v", claimed, err)
	}
}
