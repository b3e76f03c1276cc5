package concurrency_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// Worker and Lease tests against the real batond that TestMain starts
// (tenant "acme"); each uses task and queue names of its own.

// nodeClient is a client of the examples' batond.
func nodeClient(t *testing.T) *client.Client {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	return newClientCfg(t, client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","),
		Token: os.Getenv("BATON_TOKEN"), HTTPClient: hc})
}

// TestLeaseHeartbeat: Heartbeat renews at once (the lease runs later than
// before) and records progress as the task's result; a successor that
// takes the task over reads it; the fenced holder's next Heartbeat reports
// the loss.
func TestLeaseHeartbeat(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("hb")
	id := q + "-1"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: q}); err != nil {
		t.Fatal(err)
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "hb-worker", Lease: 10 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// fn's context ends with the takeover: fn uses the test's.
	claimed, err := w.RunOnce(ctx, func(_ context.Context, l *concurrency.Lease) error {
		before := *l.Task().LeaseUntil
		deadline := l.Deadline()
		// Times are whole milliseconds: let a few pass, so that a renewal
		// moves lease_until.
		time.Sleep(20 * time.Millisecond)
		if err := l.Heartbeat(ctx, json.RawMessage(`{"done_pages":3}`)); err != nil {
			return err
		}
		task, err := c.GetTask(ctx, "acme", id)
		if err != nil {
			return err
		}
		if !task.LeaseUntil.After(before) || string(task.Result) != `{"done_pages":3}` || !l.Deadline().After(deadline) {
			t.Errorf("after Heartbeat: lease_until %v (was %v), result %s, deadline %v (was %v)",
				task.LeaseUntil, before, task.Result, l.Deadline(), deadline)
		}
		// A successor takes over (a claim by id by another owner would
		// wait for the lease: the same owner's claim fences at once).
		succ, err := c.ClaimTask(ctx, "acme", id, client.ClaimRequest{Owner: "hb-worker", Lease: 10 * time.Second})
		if err != nil {
			return err
		}
		if string(succ.Result) != `{"done_pages":3}` {
			t.Errorf("successor reads result %s, want the progress", succ.Result)
		}
		if err := l.Heartbeat(ctx, nil); !errors.Is(err, concurrency.ErrLeaseLost) || !errors.Is(err, client.ErrFenced) {
			t.Errorf("Heartbeat after a takeover: %v, want ErrLeaseLost and ErrFenced", err)
		}
		_, err = c.UpdateTask(ctx, "acme", id, client.UpdateTaskRequest{FencingToken: &succ.FencingToken, Release: new(true)})
		return err
	})
	if !claimed || (err != nil && !errors.Is(err, concurrency.ErrLeaseLost)) {
		t.Fatalf("RunOnce: %v, %v", claimed, err)
	}
}

// TestLeaseHeartbeatIgnoresCallersKey: a context carrying an
// Idempotency-Key (client.WithIdempotencyKey) does not turn the next
// heartbeats into replays of the first: each one renews. Before, every
// heartbeat after the first sent the same key and body, was answered
// from the first's record, and renewed nothing while the local deadline
// moved on.
func TestLeaseHeartbeatIgnoresCallersKey(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("hbkey")
	id := q + "-1"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: q}); err != nil {
		t.Fatal(err)
	}
	// No background renewal within the test (RenewEvery 20 s): only the
	// heartbeats can move lease_until.
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "hbkey-worker",
		Lease: 30 * time.Second, RenewEvery: 20 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := w.RunOnce(ctx, func(_ context.Context, l *concurrency.Lease) error {
		kctx := client.WithIdempotencyKey(ctx, "the-callers-key")
		if err := l.Heartbeat(kctx, nil); err != nil {
			return err
		}
		first, err := c.GetTask(ctx, "acme", id)
		if err != nil {
			return err
		}
		// Times are whole milliseconds: heartbeat until one lands in a
		// later one, within a deadline.
		for deadline := time.Now().Add(5 * time.Second); ; {
			if err := l.Heartbeat(kctx, nil); err != nil {
				return err
			}
			task, err := c.GetTask(ctx, "acme", id)
			if err != nil {
				return err
			}
			if task.LeaseUntil.After(*first.LeaseUntil) {
				_, err = l.Complete(ctx, "done", nil)
				return err
			}
			if time.Now().After(deadline) {
				t.Errorf("heartbeats with the caller's key for 5 s: lease_until stayed %v (version %d, was %d)",
					task.LeaseUntil, task.Version, first.Version)
				_, err = l.Complete(ctx, "done", nil)
				return err
			}
		}
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: %v, %v", claimed, err)
	}
}

// TestWorkerRespectsMaxAttempts: a Worker whose work always fails makes a
// task with max_attempts 2 dead after exactly two attempts, then claims
// nothing more (its long polls find nothing), and Run returns soon after
// its context ends, without waiting out a long poll.
func TestWorkerRespectsMaxAttempts(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("poison")
	id := q + "-1"
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: id, Queue: q,
		MaxAttempts: 2, BackoffInitial: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "pw", Lease: 10 * time.Second, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(rctx, func(ctx context.Context, l *concurrency.Lease) error {
			runs.Add(1)
			return errors.New("always fails")
		})
	}()
	waitFor(t, 10*time.Second, "the task to die", func() bool {
		task, err := c.GetTask(ctx, "acme", id)
		return err == nil && task.Status == client.StatusDead
	})
	// A window to watch for a third claim, not a wait for a condition:
	// Run goes on long-polling the queue meanwhile.
	time.Sleep(500 * time.Millisecond)
	if n := runs.Load(); n != 2 {
		t.Errorf("the work ran %d times, want 2 (max_attempts)", n)
	}
	task, err := c.GetTask(ctx, "acme", id)
	if err != nil || task.Attempt != 2 || task.LastError != "always fails" {
		t.Errorf("dead task: %+v, %v", task, err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second): // far below the 20s long poll
		t.Fatal("Run did not return after its context ended")
	}
}
