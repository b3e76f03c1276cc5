package concurrency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// prefetchClient is a client of the package's real batond.
func prefetchClient(t *testing.T) *client.Client {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","),
		Token: os.Getenv("BATON_TOKEN"), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prefetchTasks(t *testing.T, ctx context.Context, c *client.Client, queue string, n int) {
	t.Helper()
	prefetchTasksMax(t, ctx, c, queue, n, 0)
}

// prefetchTasksMax creates n tasks of queue with maxAttempts.
func prefetchTasksMax(t *testing.T, ctx context.Context, c *client.Client, queue string, n int, maxAttempts uint64) {
	t.Helper()
	for i := range n {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: fmt.Sprintf("%s-%d", queue, i), Queue: queue,
			MaxAttempts: maxAttempts}); err != nil {
			t.Fatal(err)
		}
	}
}

// queueWorker is a Worker of queue for tenant acme, with cfg's other
// settings.
func queueWorker(t *testing.T, c *client.Client, queue string, cfg concurrency.WorkerConfig) *concurrency.Worker {
	t.Helper()
	cfg.Tenant, cfg.Queue = "acme", queue
	w, err := concurrency.NewWorker(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkerPrefetch: against a real batond, a prefetching RunPool runs
// every task once, at most n at a time, each under its own fencing token,
// and completes them all (done, released).
func TestWorkerPrefetch(t *testing.T) {
	c := prefetchClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tasks, n = 40, 6
	queue := fmt.Sprintf("prefetch%d", time.Now().UnixNano()) // -count=N shares the node
	prefetchTasks(t, ctx, c, queue, tasks)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "pw",
		Lease: 10 * time.Second, Wait: 200 * time.Millisecond, SetStatus: "running"})
	var mu sync.Mutex
	seen, tokens := map[string]int{}, map[uint64]bool{}
	running, peak, done := 0, 0, 0
	var errs []error
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			mu.Lock()
			running++
			peak = max(peak, running)
			seen[l.Task().TaskID]++
			tokens[l.Token()] = true
			mu.Unlock()
			time.Sleep(time.Millisecond)
			_, err := l.Complete(ctx, "done", []byte(`{"ok":true}`))
			mu.Lock()
			running--
			if err != nil {
				errs = append(errs, err)
			} else {
				done++
			}
			mu.Unlock()
			return err
		})
	}()
	eventually(t, 40*time.Second, "every task done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done+len(errs) >= tasks
	})
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	if len(errs) > 0 || len(seen) != tasks || len(tokens) != tasks || peak > n {
		t.Fatalf("errors %v; %d tasks seen, %d tokens, peak %d (at most %d)", errs, len(seen), len(tokens), peak, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("task %s ran %d times", id, k)
		}
	}
	for i := range tasks {
		got, err := c.GetTask(ctx, "acme", fmt.Sprintf("%s-%d", queue, i))
		if err != nil || got.Status != "done" || got.Owner != "" {
			t.Fatalf("task %d: %+v %v", i, got, err)
		}
	}
}

// TestWorkerPrefetchStop: tasks a batch-claiming pool (RunPool's
// default) claimed for slots whose functions had not returned when it was
// stopped are released unstarted: not left leased until their lease runs
// out, back in the status they were claimed from (the claims set
// "running"), with the attempt the claim took given back, so that on
// their last attempt (max_attempts 1) they are claimable again and not
// dead; the tasks it completed are done.
func TestWorkerPrefetchStop(t *testing.T) {
	c := prefetchClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tasks, n = 12, 3
	queue := fmt.Sprintf("prefetchstop%d", time.Now().UnixNano())
	prefetchTasksMax(t, ctx, c, queue, tasks, 1)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "ps",
		Lease: time.Minute, Wait: 100 * time.Millisecond, SetStatus: "running"})
	held := stopWithHeldTasks(t, ctx, c, w, queue, n)
	page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	doneN := 0
	for _, task := range page.Tasks {
		if task.Owner != "" {
			t.Errorf("task %s still leased to %q after the pool stopped", task.TaskID, task.Owner)
		}
		switch {
		case task.Status == "done":
			doneN++
		case task.Status != "pending" || task.Attempt != 0:
			t.Errorf("task %s: status %q attempt %d after the pool stopped, want pending, attempt 0 (held %v)",
				task.TaskID, task.Status, task.Attempt, held[task.TaskID])
		}
	}
	if doneN != n || len(page.Tasks) != tasks {
		t.Fatalf("%d of %d tasks done, want %d", doneN, len(page.Tasks), n)
	}
	// On their last attempt, yet claimable: a claim takes them all.
	for range tasks - n {
		got, err := c.ClaimQueue(ctx, "acme", queue, client.QueueClaimRequest{Owner: "again", Lease: time.Minute})
		if err != nil || got == nil || got.Attempt != 1 {
			t.Fatalf("claim after the stop: %+v %v, want a task on attempt 1", got, err)
		}
	}
}

// stopWithHeldTasks runs w.RunPool with n slots whose functions complete
// their task and stay busy until the pool stops; once the pool holds
// tasks for those busy slots (claimed with the completions), it stops
// it. It returns the ids of the tasks held then.
func stopWithHeldTasks(t *testing.T, ctx context.Context, c *client.Client, w *concurrency.Worker, queue string, n int) map[string]bool {
	t.Helper()
	var mu sync.Mutex
	completed := 0
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			_, err := l.Complete(ctx, "done", nil) // its batch claims the task for this slot
			mu.Lock()
			completed++
			mu.Unlock()
			<-ctx.Done() // and the slot stays busy: that task waits, held
			return err
		})
	}()
	eventually(t, 30*time.Second, "n tasks completed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return completed == n
	})
	// Held, not started: leased to the worker's owner.
	held := map[string]bool{}
	eventually(t, 30*time.Second, "tasks held for the busy slots", func() bool {
		page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Owner: "ps"})
		if err != nil {
			return false
		}
		for _, task := range page.Tasks {
			held[task.TaskID] = true
		}
		return len(page.Tasks) > 0
	})
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	return held
}

// TestWorkerPrefetchBadCompletion: a completion refused for its own bad
// field fails alone, as it would without the batch; the completions sent
// beside it succeed.
func TestWorkerPrefetchBadCompletion(t *testing.T) {
	c := prefetchClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 4
	queue := fmt.Sprintf("prefetchbad%d", time.Now().UnixNano())
	prefetchTasks(t, ctx, c, queue, n)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "pb",
		Lease: 10 * time.Second, Wait: 100 * time.Millisecond})
	var mu sync.Mutex
	arrived := 0
	gate := make(chan struct{})
	results := map[string]error{}
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			id := l.Task().TaskID
			mu.Lock()
			_, again := results[id]
			arrived++
			mu.Unlock()
			if again {
				return l.Release(ctx)
			}
			<-gate // all n complete at once: one batch
			result := []byte(`{"ok":true}`)
			if id == queue+"-0" {
				result = []byte(`{"ok":`) // not JSON: this one is refused
			}
			_, err := l.Complete(ctx, "done", result)
			mu.Lock()
			results[id] = err
			mu.Unlock()
			return nil
		})
	}()
	eventually(t, 30*time.Second, "every slot busy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return arrived >= n
	})
	close(gate)
	eventually(t, 30*time.Second, "every completion answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results) == n
	})
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	for id, err := range results {
		if (id == queue+"-0") != (err != nil) {
			t.Errorf("task %s: completion error %v", id, err)
		}
	}
	for i := 1; i < n; i++ {
		if got, err := c.GetTask(ctx, "acme", fmt.Sprintf("%s-%d", queue, i)); err != nil || got.Status != "done" {
			t.Errorf("task %d: %+v %v", i, got, err)
		}
	}
}

// TestWorkerPoolOverlapsBatches: once a batch has come back, the pool
// sends the releases of slots that finish while a batch is out in a
// second batch at once, instead of after the first one's round trip. A
// proxy holds each batch after the first until another one arrives (or 3 s
// pass); every task is still done once.
func TestWorkerPoolOverlapsBatches(t *testing.T) {
	var mu sync.Mutex
	batches, inFlight, peak := 0, 0, 0
	seen := func() int { mu.Lock(); defer mu.Unlock(); return batches }
	c := batchProxy(t, func(n int) {
		mu.Lock()
		batches = max(batches, n)
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		if n > 1 && n <= 4 {
			// Held until another batch arrives: with one batch at a
			// time none can, and the hold ends at its deadline.
			for deadline := time.Now().Add(3 * time.Second); seen() == n && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 24, 4
	queue := uniqueName("overlap")
	prefetchTasks(t, ctx, c, queue, tasks)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "ov",
		Lease: 10 * time.Second, Wait: 100 * time.Millisecond, SetStatus: "running"})
	var completed atomic.Int64
	var slot atomic.Int64
	var runsMu sync.Mutex
	runs := map[string]int{}
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			runsMu.Lock()
			runs[l.Task().TaskID]++
			runsMu.Unlock()
			// Slots finish at different times, so that some finish
			// while another's release is out.
			time.Sleep(time.Duration(slot.Add(1)%n) * 20 * time.Millisecond)
			_, err := l.Complete(ctx, "done", nil)
			if err == nil {
				completed.Add(1)
			}
			return err
		})
	}()
	eventually(t, 50*time.Second, "every task done", func() bool { return allDone(ctx, c, queue, tasks) })
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak < 2 {
		t.Errorf("at most %d batch in flight in %d batches, want 2 at once", peak, batches)
	}
	if completed.Load() != tasks {
		t.Errorf("%d completions, want %d", completed.Load(), tasks)
	}
	runsMu.Lock()
	defer runsMu.Unlock()
	if len(runs) != tasks {
		t.Errorf("%d tasks ran, want %d", len(runs), tasks)
	}
	for id, k := range runs {
		if k != 1 {
			t.Errorf("task %s ran %d times, want once", id, k)
		}
	}
}
