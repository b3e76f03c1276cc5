package concurrency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// These tests run against the real batond that TestMain starts (tenant
// "acme"); each uses names of its own. chaos/e2e has the three-node
// scenarios: races, paused holders, election handovers.

func mutexOf(t *testing.T, c *client.Client, name, owner string) *concurrency.Mutex {
	t.Helper()
	m, err := concurrency.NewMutex(c, concurrency.MutexConfig{Tenant: "acme", Name: name, Owner: owner, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMutexTryLockUnlock: TryLock takes a free lock and refuses a held one
// at once; Lock of the holder returns its hold; Unlock by a non-holder is
// ErrNotLocked; after Unlock the other contender takes the lock with a
// larger token; the lock's task records who holds it.
func TestMutexTryLockUnlock(t *testing.T) {
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	name := uniqueName("lock.try")
	a, b := mutexOf(t, c, name, "a"), mutexOf(t, c, name, "b")
	la, err := a.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Lease() != la {
		t.Errorf("Lease() is not the hold TryLock returned")
	}
	if _, err := b.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
	}
	if again, err := a.Lock(ctx); err != nil || again != la {
		t.Errorf("Lock by the holder: %v, %v; want its hold", again, err)
	}
	if err := b.Unlock(ctx); !errors.Is(err, concurrency.ErrNotLocked) {
		t.Errorf("Unlock by a non-holder: %v, want ErrNotLocked", err)
	}
	task, err := c.GetTask(ctx, "acme", name)
	if err != nil || task.Owner != "a" || task.Status != "held" || task.FencingToken != la.Token() || task.Queue != name {
		t.Fatalf("lock task while held: %+v, %v", task, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Lease() != nil || !errors.Is(la.Err(), concurrency.ErrLeaseReleased) {
		t.Errorf("after Unlock: Lease() %v, hold's Err %v", a.Lease(), la.Err())
	}
	lb, err := b.TryLock(ctx)
	if err != nil || lb.Token() <= la.Token() {
		t.Fatalf("TryLock after Unlock: %v, %v; want a token above %d", lb, err, la.Token())
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if task, err := c.GetTask(ctx, "acme", name); err != nil || task.Owner != "" || task.Status != "free" {
		t.Fatalf("lock task after Unlock: %+v, %v", task, err)
	}
}

// TestMutexLockHonorsContext: a Lock waiting for a held lock returns the
// context's error when it ends, and leaves nothing behind: the holder
// still holds, and once it unlocks, the lock is free.
func TestMutexLockHonorsContext(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	name := uniqueName("lock.ctx")
	a, b := mutexOf(t, c, name, "a"), mutexOf(t, c, name, "b")
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock with a short context: %v, want DeadlineExceeded", err)
	}
	// A bound far above any round trip, not a timing: the 10s long poll
	// under way must not be waited out.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Lock returned %v after its context ended", d)
	}
	if task, err := c.GetTask(ctx, "acme", name); err != nil || task.Owner != "a" {
		t.Fatalf("after the cancelled Lock: %+v, %v; want still a's", task, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if task, err := c.GetTask(ctx, "acme", name); err != nil || task.Owner != "" {
		t.Fatalf("after Unlock: %+v, %v; want free", task, err)
	}
}

// TestMutexRefusesForeignTask: a task of the lock's name that is not a
// lock's (another queue, a policy's max_attempts) is refused, not claimed.
func TestMutexRefusesForeignTask(t *testing.T) {
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	foreign, policy := uniqueName("lock.foreign"), uniqueName("lock.policy")
	if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: foreign, Queue: "work"}); err != nil {
		t.Fatal(err)
	}
	m := mutexOf(t, c, foreign, "a")
	if _, err := m.Lock(ctx); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), `queue "work"`) {
		t.Fatalf("Lock over a work task: %v, want invalid_argument naming its queue", err)
	}
	if task, err := c.GetTask(ctx, "acme", foreign); err != nil || task.Owner != "" || task.Attempt != 0 {
		t.Fatalf("the work task after the refused Lock: %+v, %v; want untouched", task, err)
	}
	if _, err := c.SetQueuePolicy(ctx, "acme", policy, client.QueuePolicy{MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	m = mutexOf(t, c, policy, "a")
	if _, err := m.Lock(ctx); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "max_attempts 3") {
		t.Fatalf("Lock in a queue with max_attempts: %v, want invalid_argument", err)
	}
}

// TestElectionObserveStopsWithContext: Observe sends the current leader,
// then its next value, and closes its channel when the context ends.
func TestElectionObserveStopsWithContext(t *testing.T) {
	noLeaks(t)
	c := nodeClient(t)
	ctx := ctxTimeout(t, 30*time.Second)
	e, err := concurrency.NewElection(c, concurrency.MutexConfig{Tenant: "acme", Name: uniqueName("elect.obs"), Owner: "leader-1", Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	ch := e.Observe(octx)
	next := func() concurrency.ElectionLeader {
		select {
		case li := <-ch:
			return li
		case <-ctx.Done():
			t.Fatal("no leader observed")
		}
		return concurrency.ElectionLeader{}
	}
	if li := next(); li.Owner != "leader-1" || li.Value != "first" || li.Token != l.Token() {
		t.Fatalf("first observed: %+v", li)
	}
	if err := e.Proclaim(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	if li := next(); li.Value != "second" || li.Token != l.Token() {
		t.Fatalf("second observed: %+v", li)
	}
	cancel()
	for range ch {
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Errorf("Resign when not leading: %v, want nil", err)
	}
}
