package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestUpdateTaskClaimNext: against a real batond, finishing a task with
// UpdateTaskClaimNext returns it and the next task of the queue with a
// new, larger token; on an empty queue the next is nil; a stale token is
// ErrFenced and claims nothing.
func TestUpdateTaskClaimNext(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("claimnext") // -count=N shares the node
	for _, n := range []string{"1", "2"} {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: q + "-" + n, Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	running, done, release := "running", "done", true
	first, err := c.ClaimQueue(ctx, "acme", q, client.QueueClaimRequest{Owner: "w", Lease: time.Minute, SetStatus: &running})
	if err != nil || first == nil || first.TaskID != q+"-1" {
		t.Fatalf("claim: %+v %v", first, err)
	}
	finish := client.UpdateTaskRequest{FencingToken: &first.FencingToken, Status: &done, Release: &release}
	next := client.ClaimNextRequest{Queue: q, Owner: "w", Lease: time.Minute, SetStatus: &running}
	upd, second, err := c.UpdateTaskClaimNext(ctx, "acme", first.TaskID, finish, next)
	if err != nil || upd.TaskID != q+"-1" || upd.Status != "done" || upd.Owner != "" ||
		second == nil || second.TaskID != q+"-2" || second.Status != "running" || second.FencingToken <= first.FencingToken {
		t.Fatalf("finish cn-1, claim next: %+v %+v %v", upd, second, err)
	}
	// The holder claims cn-2 again by id: the token it had is stale now.
	again, err := c.ClaimTask(ctx, "acme", second.TaskID, client.ClaimRequest{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: q + "-3", Queue: q}); err != nil {
		t.Fatal(err)
	}
	finish.FencingToken = &second.FencingToken
	if _, _, err := c.UpdateTaskClaimNext(ctx, "acme", second.TaskID, finish, next); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("stale token: %v, want ErrFenced", err)
	}
	if cn3, err := c.GetTask(ctx, "acme", q+"-3"); err != nil || cn3.Owner != "" {
		t.Fatalf("a refused update claimed cn-3: %+v %v", cn3, err)
	}
	finish.FencingToken = &again.FencingToken
	upd, third, err := c.UpdateTaskClaimNext(ctx, "acme", again.TaskID, finish, next)
	if err != nil || upd.Status != "done" || third == nil || third.TaskID != q+"-3" {
		t.Fatalf("finish cn-2: %+v %+v %v", upd, third, err)
	}
	finish.FencingToken = &third.FencingToken
	upd, none, err := c.UpdateTaskClaimNext(ctx, "acme", third.TaskID, finish, next)
	if err != nil || upd.Status != "done" || none != nil {
		t.Fatalf("on an empty queue: %+v %+v %v", upd, none, err)
	}
}
