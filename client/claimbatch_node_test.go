package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// TestClaimQueueBatch: against a real batond, ClaimQueueBatch takes up to
// max tasks, each with its own token and lease; QueueBatch finishes them
// with one outcome each (a stale token is ErrFenced for that task alone,
// nothing written) and claims the next ones; bad input is refused before
// anything is sent.
func TestClaimQueueBatch(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("claimbatch") // -count=N shares the node
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: q + "-" + n, Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	running, done, release := "running", "done", true
	req := client.QueueClaimRequest{Owner: "w", Lease: time.Minute, SetStatus: &running}
	got, err := c.ClaimQueueBatch(ctx, "acme", q, req, 3)
	if err != nil || len(got) != 3 || got[0].TaskID != q+"-1" || got[2].TaskID != q+"-3" {
		t.Fatalf("claim 3: %+v %v", got, err)
	}
	seen := map[uint64]bool{}
	for _, task := range got {
		if seen[task.FencingToken] || task.Owner != "w" || task.Status != "running" || task.LeaseUntil.IsZero() {
			t.Fatalf("claimed %+v", task)
		}
		seen[task.FencingToken] = true
	}
	stale := got[1].FencingToken - 1
	ups := []client.BatchUpdate{
		{ID: got[0].TaskID, UpdateTaskRequest: client.UpdateTaskRequest{FencingToken: &got[0].FencingToken, Status: &done, Release: &release}},
		{ID: got[1].TaskID, UpdateTaskRequest: client.UpdateTaskRequest{FencingToken: &stale, Status: &done, Release: &release}},
		{ID: got[2].TaskID, UpdateTaskRequest: client.UpdateTaskRequest{FencingToken: &got[2].FencingToken, Status: &done, Release: &release}},
	}
	out, next, err := c.QueueBatch(ctx, "acme", q, ups, &client.BatchClaim{Owner: "w", Lease: time.Minute, SetStatus: &running, Max: 4})
	if err != nil || len(out) != 3 || out[0].Err != nil || out[0].Task.Status != "done" || out[2].Task == nil ||
		!errors.Is(out[1].Err, client.ErrFenced) || out[1].Task != nil {
		t.Fatalf("batch: %+v %v", out, err)
	}
	var apiErr *client.Error
	if !errors.As(out[1].Err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("the fenced outcome: %#v", out[1].Err)
	} else if cur, ok := apiErr.DetailUint("current_token"); !ok || cur != got[1].FencingToken {
		t.Fatalf("current_token %d %v, want %d", cur, ok, got[1].FencingToken)
	}
	if len(next) != 2 || next[0].TaskID != q+"-4" || next[1].TaskID != q+"-5" || next[1].Owner != "w" {
		t.Fatalf("next: %+v", next)
	}
	if cb2, err := c.GetTask(ctx, "acme", q+"-2"); err != nil || cb2.Status != "running" || cb2.FencingToken != got[1].FencingToken {
		t.Fatalf("the fenced update wrote: %+v %v", cb2, err)
	}
	// Nothing claimable: no tasks, no error.
	if none, err := c.ClaimQueueBatch(ctx, "acme", q, req, 2); err != nil || len(none) != 0 {
		t.Fatalf("empty queue: %+v %v", none, err)
	}
	// Bad input never leaves the client.
	if _, err := c.ClaimQueueBatch(ctx, "acme", q, req, client.MaxClaimBatch+1); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("max too large: %v", err)
	}
	if _, _, err := c.QueueBatch(ctx, "acme", q, nil, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("empty batch: %v", err)
	}
}
