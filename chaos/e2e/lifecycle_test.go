package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// Black-box tests of task attempts, backoff, dead letters and delays
// (docs/api.md "Attempts, backoff and delays") against real clusters.

// TestLifecycleDeadAfterMaxAttempts: a task whose every attempt fails is
// dead after exactly max_attempts claims; each claim comes no earlier than
// the available_at its failure set, the backoffs (from the leader's
// stamped times) stay within [d/2, d] of a doubling d, and the gaps
// between the claims grow.
func TestLifecycleDeadAfterMaxAttempts(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := tasksAdmin(t, ctx, c)
	const maxAttempts, initial = 4, 500
	if _, err := admin.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: "poison", Queue: "lc",
		MaxAttempts: maxAttempts, BackoffInitial: initial * time.Millisecond, BackoffMax: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var claims, fails []*client.Task
	for len(fails) == 0 || fails[len(fails)-1].Status != client.StatusDead {
		if len(claims) > maxAttempts {
			t.Fatalf("claimed %d times, want at most %d", len(claims), maxAttempts)
		}
		claimed, err := admin.ClaimQueue(ctx, tasksTenant, "lc", client.QueueClaimRequest{Owner: "w", Lease: time.Minute, Wait: 10 * time.Second})
		if err != nil {
			t.Fatalf("claim %d: %v", len(claims)+1, err)
		}
		if claimed == nil {
			continue // the wait ran out before the backoff did: ask again
		}
		claims = append(claims, claimed)
		failed, err := admin.FailTask(ctx, tasksTenant, claimed.TaskID, client.FailTaskRequest{FencingToken: claimed.FencingToken,
			Error: fmt.Sprintf("attempt %d failed", claimed.Attempt)})
		if err != nil {
			t.Fatalf("fail %d: %v", claimed.Attempt, err)
		}
		fails = append(fails, failed)
	}
	if len(claims) != maxAttempts {
		t.Fatalf("got %d claims, want exactly %d", len(claims), maxAttempts)
	}
	final, err := admin.GetTask(ctx, tasksTenant, "poison")
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != client.StatusDead || final.Attempt != maxAttempts || final.LastError != fmt.Sprintf("attempt %d failed", maxAttempts) {
		t.Fatalf("final task: status %q attempt %d last_error %q; want dead after %d", final.Status, final.Attempt, final.LastError, maxAttempts)
	}
	d := time.Duration(initial) * time.Millisecond
	var gaps []time.Duration
	for i, cl := range claims {
		if cl.Attempt != uint64(i+1) {
			t.Errorf("claim %d has attempt %d", i+1, cl.Attempt)
		}
		if i == maxAttempts-1 {
			break
		}
		f := fails[i]
		if f.AvailableAt == nil || f.FailedAt == nil || f.Status != "pending" {
			t.Fatalf("failure %d: status %q available_at %v", i+1, f.Status, f.AvailableAt)
		}
		backoff := f.AvailableAt.Sub(*f.FailedAt)
		if backoff < d/2 || backoff > d {
			t.Errorf("backoff after attempt %d: %v, want within [%v, %v]", i+1, backoff, d/2, d)
		}
		next := claims[i+1]
		if next.UpdatedAt.Before(*f.AvailableAt) {
			t.Errorf("attempt %d claimed at %v, before its available_at %v", i+2, next.UpdatedAt, *f.AvailableAt)
		}
		gaps = append(gaps, next.UpdatedAt.Sub(cl.UpdatedAt))
		d *= 2
	}
	// The last gap is at least its backoff's floor (4x the first
	// backoff's floor, 2x its ceiling); the first is that ceiling plus a
	// failure's and a claim's round trips.
	if gaps[len(gaps)-1] <= gaps[0] {
		t.Errorf("gaps between attempts %v do not grow", gaps)
	}
	t.Logf("gaps between attempts: %v", gaps)
	if again, err := admin.ClaimQueue(ctx, tasksTenant, "lc", client.QueueClaimRequest{Owner: "w", Lease: time.Second}); err != nil || again != nil {
		t.Errorf("a claim after the task died: got %v, %v; want nothing", again, err)
	}
	dead, err := admin.ListTasks(ctx, tasksTenant, client.ListTasksOptions{Queue: "lc", Status: client.StatusDead})
	if err != nil || len(dead.Tasks) != 1 || dead.Tasks[0].TaskID != "poison" {
		t.Errorf("dead letters of queue lc: %+v, %v", dead, err)
	}
	// Every node holds the same record.
	for i := range 3 {
		waitForTask(t, ctx, tasksNodeClient(t, c, i), "poison", func(t *client.Task) bool { return t.Status == client.StatusDead })
	}
	// Retry revives it with its attempts reset.
	r, err := admin.RetryTask(ctx, tasksTenant, "poison", client.RetryTaskRequest{})
	if err != nil || r.Status != "pending" || r.Attempt != 0 {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	if again, err := admin.ClaimQueue(ctx, tasksTenant, "lc", client.QueueClaimRequest{Owner: "w", Lease: time.Second}); err != nil || again == nil || again.Attempt != 1 {
		t.Errorf("claim after retry: got %+v, %v; want attempt 1", again, err)
	}
}

func waitForTask(t *testing.T, ctx context.Context, cl *client.Client, id string, ok func(*client.Task) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err := cl.GetTask(ctx, tasksTenant, id, client.Stale())
		if err == nil && ok(task) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached the wanted state: %+v, %v", id, task, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLifecycleDelayedNeverEarlyAcrossLeaderKill: claimers on every node
// hammer a queue whose only task is delayed; the leader is SIGKILLed while
// they do. The task is claimed exactly once, not before its available_at,
// by the new leader's stamped time and by this machine's clock.
func TestLifecycleDelayedNeverEarlyAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := tasksAdmin(t, ctx, c)
	created, err := admin.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: "later", Queue: "dq", Delay: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if created.AvailableAt == nil {
		t.Fatalf("created without available_at: %+v", created)
	}
	availableAt := *created.AvailableAt

	var (
		mu      sync.Mutex
		won     []*client.Task
		early   []string
		stop    atomic.Bool
		wg      sync.WaitGroup
		claimed = make(chan struct{})
		once    sync.Once
	)
	for i := range 3 {
		cl := tasksNodeClient(t, c, i)
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				task, err := cl.ClaimQueue(cctx, tasksTenant, "dq", client.QueueClaimRequest{Owner: fmt.Sprintf("w%d", i), Lease: 10 * time.Minute, Wait: time.Second})
				cancel()
				now := time.Now()
				if err != nil || task == nil {
					if err != nil {
						time.Sleep(20 * time.Millisecond) // the node is down or has no leader yet
					}
					continue
				}
				mu.Lock()
				won = append(won, task)
				if task.UpdatedAt.Before(availableAt) || now.Before(availableAt) {
					early = append(early, fmt.Sprintf("w%d claimed at %v (local %v), available_at %v", i, task.UpdatedAt, now, availableAt))
				}
				mu.Unlock()
				once.Do(func() { close(claimed) })
			}
		})
	}
	// The scenario, not a wait for a condition: the claimers long-poll
	// for a second, then the leader dies while the task is still 3 s
	// from due, so the claim that wins is decided by a new leader.
	time.Sleep(time.Second)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	select {
	case <-claimed:
	case <-time.After(40 * time.Second):
	}
	// Proving that no second claim happens needs a window to watch:
	// 1.5 s of claimers still polling every node, then stop.
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(won) != 1 {
		t.Fatalf("the delayed task was claimed %d times, want once", len(won))
	}
	for _, e := range early {
		t.Error(e)
	}
	if won[0].Attempt != 1 {
		t.Errorf("claimed with attempt %d, want 1", won[0].Attempt)
	}
}

// TestLifecycleWorkerNoHotLoop: a concurrency.Worker whose fn always fails no
// longer re-runs it back to back. Without max_attempts the server's
// default backoff (at least 500 ms after the first failure, doubling) spaces
// the attempts; with max_attempts the task ends dead after exactly that
// many runs of fn; a NonRetryable error ends it after one.
func TestLifecycleWorkerNoHotLoop(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := tasksAdmin(t, ctx, c)
	run := func(queue string, fail func(n int) error, until func() bool) int {
		w, err := concurrency.NewWorker(admin, concurrency.WorkerConfig{Tenant: tasksTenant, Queue: queue, Owner: "w-" + queue, Wait: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- w.Run(rctx, func(ctx context.Context, l *concurrency.Lease) error { return fail(int(n.Add(1))) })
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !until() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run on %s: %v", queue, err)
		}
		return int(n.Load())
	}
	boom := errors.New("tool call failed")

	// Default backoff: in 2.5 s a hot loop made thousands of runs.
	if _, err := admin.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: "hot", Queue: "hot"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runs := run("hot", func(int) error { return boom }, func() bool { return time.Since(start) > 2500*time.Millisecond })
	elapsed := time.Since(start)
	// Each failure puts the next attempt at least 500 ms (the first
	// backoff's floor) later by the leader's clock.
	if bound := 1 + int(elapsed/(500*time.Millisecond)); runs < 1 || runs > bound {
		t.Errorf("fn ran %d times in %v; want 1 to %d", runs, elapsed, bound)
	}
	hot, err := admin.GetTask(ctx, tasksTenant, "hot")
	if err != nil || hot.LastError != boom.Error() || hot.Status == client.StatusDead {
		t.Errorf("task hot: %+v, %v", hot, err)
	}

	// max_attempts: dead after exactly that many runs.
	if _, err := admin.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: "capped", Queue: "capped", MaxAttempts: 3,
		BackoffInitial: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	isDead := func(id string) func() bool {
		return func() bool {
			task, err := admin.GetTask(ctx, tasksTenant, id)
			return err == nil && task.Status == client.StatusDead
		}
	}
	if runs := run("capped", func(int) error { return boom }, isDead("capped")); runs != 3 {
		t.Errorf("fn ran %d times on a task with max_attempts 3, want 3", runs)
	}

	// NonRetryable: dead after one run.
	if _, err := admin.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: "bad", Queue: "bad", MaxAttempts: 10}); err != nil {
		t.Fatal(err)
	}
	if runs := run("bad", func(int) error { return concurrency.NonRetryable(boom) }, isDead("bad")); runs != 1 {
		t.Errorf("fn ran %d times with a non-retryable error, want 1", runs)
	}
}
