package concurrency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// TestWorkerCancel: a task cancelled while a Worker's handler runs on it
// gets cancel_requested; the next renewal cancels the handler's context
// with ErrCancelRequested as its cause, the worker acknowledges once the
// handler returns, the task ends cancelled, and a write under the
// handler's token is refused as fenced.
func TestWorkerCancel(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("cancelq")
	id := q + "-1"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: q}); err != nil {
		t.Fatal(err)
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "cw", Lease: 10 * time.Second,
		RenewEvery: 100 * time.Millisecond, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var token uint64
	var cause error
	claimed, err := w.RunOnce(ctx, func(fctx context.Context, l *concurrency.Lease) error {
		token = l.Token()
		task, err := c.CancelTask(ctx, "acme", id, client.CancelTaskRequest{Reason: "stop"})
		if err != nil {
			return err
		}
		if !task.CancelRequested || task.Status != "pending" {
			t.Errorf("cancel of the leased task answered %+v", task)
		}
		<-fctx.Done() // the handler's context ends at the next renewal
		cause = context.Cause(fctx)
		return fctx.Err()
	})
	if !claimed || !errors.Is(err, concurrency.ErrCancelRequested) {
		t.Fatalf("RunOnce: claimed %v, err %v; want ErrCancelRequested", claimed, err)
	}
	if !errors.Is(cause, concurrency.ErrCancelRequested) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelRequested", cause)
	}
	task, err := c.GetTask(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != client.StatusCancelled || task.Owner != "" || task.CancelRequested || task.FencingToken <= token {
		t.Fatalf("after the worker acknowledged: %+v", task)
	}
	done := "done"
	if _, err := c.UpdateTask(ctx, "acme", id, client.UpdateTaskRequest{FencingToken: &token, Status: &done}); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("update under the cancelled lease's token: %v, want ErrFenced", err)
	}
	stats, err := c.GetQueueStats(ctx, "acme", q)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Running != 0 || stats.ByStatus[client.StatusCancelled] != 1 {
		t.Fatalf("queue stats after the cancellation: %+v", stats)
	}
}

// TestWorkerCancelCompleted: a handler that sees the cancellation but
// finishes its work anyway (Complete with done) ends with its own result:
// RunOnce reports no error and the task is done, not cancelled.
func TestWorkerCancelCompleted(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("cancelq2")
	id := q + "-2"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: q}); err != nil {
		t.Fatal(err)
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "cw", Lease: 10 * time.Second,
		RenewEvery: 100 * time.Millisecond, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := w.RunOnce(ctx, func(fctx context.Context, l *concurrency.Lease) error {
		if _, err := c.CancelTask(ctx, "acme", id, client.CancelTaskRequest{}); err != nil {
			return err
		}
		<-fctx.Done()
		_, err := l.Complete(ctx, "done", nil)
		return err
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: claimed %v, err %v; want no error", claimed, err)
	}
	if task, err := c.GetTask(ctx, "acme", id); err != nil || task.Status != "done" || task.CancelRequested {
		t.Fatalf("after a completion under a cancellation: %+v %v", task, err)
	}
}
