package concurrency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// TestWorkerPoolMaxLeased: a pool of four workers on a queue with
// max_leased 2 never runs more than two handlers at once: two are held
// running while the others find nothing, a claim by id is refused with
// ErrRateLimited, and once released every task is done.
func TestWorkerPoolMaxLeased(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	q := uniqueName("flowq")
	if _, err := c.SetQueuePolicy(ctx, "acme", q, client.QueuePolicy{MaxLeased: 2}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	for i := range n {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: fmt.Sprintf("%s-%d", q, i), Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: q, Owner: "fw", Lease: 10 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, most, done := 0, 0, 0
	gate := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, 4, func(ctx context.Context, l *concurrency.Lease) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			select {
			case <-gate:
			case <-ctx.Done():
			}
			mu.Lock()
			running--
			done++
			mu.Unlock()
			_, err := l.Complete(ctx, "done", nil)
			return err
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		r := running
		mu.Unlock()
		if r == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handlers running, want 2", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The SDK retries a 429 within the call's budget: a short one answers
	// the refusal.
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = c.ClaimTask(cctx, "acme", q+"-5", client.ClaimRequest{Owner: "other", Lease: time.Second})
	ccancel()
	if !errors.Is(err, client.ErrRateLimited) {
		t.Errorf("claim by id at max_leased: %v, want ErrRateLimited", err)
	}
	close(gate)
	for {
		mu.Lock()
		d := done
		mu.Unlock()
		if d == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks done", d, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-pool; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	if most > 2 {
		t.Fatalf("%d handlers ran at once under max_leased 2", most)
	}
}
