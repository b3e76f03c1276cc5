package concurrency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/client/internal/clustertest"
)

// Tests of RunPool with two batches in flight (pool.go, maxFlushes).

// batchProxy returns a client of the package's batond through a proxy
// that calls onBatch with the number (from 1) of each queue batch
// request before forwarding it; onBatch may block to hold the batch.
func batchProxy(t *testing.T, onBatch func(n int)) *client.Client {
	t.Helper()
	var mu sync.Mutex
	batches := 0
	proxy := clustertest.NewProxy(t, strings.Split(os.Getenv("BATON_ENDPOINTS"), ",")[0], func(_ int, r *http.Request) clustertest.Hop {
		if strings.HasSuffix(r.URL.Path, "/batch") {
			mu.Lock()
			batches++
			n := batches
			mu.Unlock()
			onBatch(n)
		}
		return clustertest.Hop{}
	})
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{proxy.URL}, Token: os.Getenv("BATON_TOKEN"), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWorkerPoolKeepsALeasesReleasesInOrder: a slot's Complete gives up (its
// ctx ends) while its batch is slow on the way; the slot then releases the
// lease with another status, which succeeds. That later, successful update
// must be the task's final state: the earlier, abandoned one must not be
// applied after it.
func TestWorkerPoolKeepsALeasesReleasesInOrder(t *testing.T) {
	var released atomic.Bool // the second batch went on to the server
	c := batchProxy(t, func(n int) {
		if n == 2 {
			time.Sleep(time.Second) // the second batch is slow on the way to the server
			released.Store(true)
		}
	})
	ctx := ctxTimeout(t, 60*time.Second)
	queue := uniqueName("order")
	prefetchTasks(t, ctx, c, queue, 2)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "or",
		Lease: 10 * time.Second, Wait: 100 * time.Millisecond, SetStatus: "running"})
	var calls atomic.Int64
	var second string
	var secondErr, laterErr error
	finished := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, 1, func(ctx context.Context, l *concurrency.Lease) error {
			if calls.Add(1) == 1 {
				_, err := l.Complete(ctx, "done", nil) // batch 1: comes back at once
				return err
			}
			second = l.Task().TaskID
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, secondErr = l.Complete(cctx, "done", nil) // batch 2: held 1 s, the caller gives up
			cancel()
			later := "later"
			_, laterErr = l.Update(ctx, client.UpdateTaskRequest{Status: &later, Release: new(true)})
			close(finished)
			return nil
		})
	}()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the second task's function did not finish")
	}
	// Before the fix the abandoned Complete reached the server after the
	// later Update: give it the time to (a negative check, no event to
	// wait for once it is forwarded).
	eventually(t, 10*time.Second, "the second batch forwarded", released.Load)
	time.Sleep(300 * time.Millisecond)
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	if !errors.Is(secondErr, context.DeadlineExceeded) || laterErr != nil {
		t.Fatalf("abandoned Complete: %v (want deadline exceeded); later Update: %v (want nil)", secondErr, laterErr)
	}
	got, err := c.GetTask(ctx, "acme", second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "later" {
		t.Errorf("task %s: status %q after its lease's last, successful update set %q (the abandoned Complete was applied after it)",
			second, got.Status, "later")
	}
}

// TestWorkerPoolOneBatchToAnOldLeader: the pool ran batches against an
// upgraded cluster (batchOK), then the leader became a member before
// version 6 and the first request it refused was a batch claim (the
// pool was idle). After BatchRetryClaims single claims the pool tries
// batches again: the old server should refuse one batch, not two.
func TestWorkerPoolOneBatchToAnOldLeader(t *testing.T) {
	to, _ := url.Parse(env.URL())
	var old atomic.Bool
	var batchRefused, maxRefused atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(to)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	srv := clustertest.Stub(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case old.Load() && strings.HasSuffix(r.URL.Path, "/batch"):
			batchRefused.Add(1)
			time.Sleep(300 * time.Millisecond) // a slow 404
			clustertest.WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path, nil)
		case old.Load() && strings.HasSuffix(r.URL.Path, "/claim") && bytes.Contains(body, []byte(`"max"`)):
			maxRefused.Add(1)
			clustertest.WriteError(w, http.StatusBadRequest, "invalid_argument", `malformed JSON: json: unknown field "max"`, nil)
		default:
			rp.ServeHTTP(w, r)
		}
	})
	c := newClientCfg(t, client.Config{Endpoints: []string{srv.URL}, Token: os.Getenv("BATON_TOKEN")})
	ctx := ctxTimeout(t, 120*time.Second)
	queue := uniqueName("batchok")
	const first, n = 8, 4
	after := concurrency.BatchRetryClaims + 40
	prefetchTasks(t, ctx, c, queue, first)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "bo",
		Lease: 10 * time.Second, Wait: 100 * time.Millisecond})
	var completed atomic.Int64
	var slot atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			time.Sleep(time.Duration(slot.Add(1)%n) * 10 * time.Millisecond)
			_, err := l.Complete(ctx, "done", nil)
			if err == nil {
				completed.Add(1)
			}
			return err
		})
	}()
	eventually(t, 30*time.Second, "first tasks done (in batches)", func() bool { return completed.Load() >= first })
	old.Store(true) // the leader moves to an old member; the pool is idle, long-polling batch claims
	eventually(t, 30*time.Second, "a batch claim refused", func() bool { return maxRefused.Load() > 0 })
	for i := range after {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: fmt.Sprintf("%s-after%d", queue, i), Queue: queue}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "every task done", func() bool { return completed.Load() >= int64(first+after) })
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v", err)
	}
	t.Logf("refused: %d batch claims, %d batches", maxRefused.Load(), batchRefused.Load())
	if b := batchRefused.Load(); b > 1 {
		t.Errorf("the old server refused %d batches at once, want one", b)
	}
}

// TestWorkerPoolStopWhileAClaimingBatchIsOut: the pool is stopped while a batch
// that claims tasks is slow on the way; the releases the stop causes go
// in a second batch, which comes back first, and every slot returns
// before the slow batch does. RunPool must wait for it (it would
// otherwise hand its tasks to a closed channel), give back the tasks it
// claimed (not left leased) and return.
func TestWorkerPoolStopWhileAClaimingBatchIsOut(t *testing.T) {
	var held atomic.Bool
	c := batchProxy(t, func(n int) {
		if n == 2 {
			held.Store(true)
			time.Sleep(time.Second)
		}
	})
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 20, 2
	queue := uniqueName("stop1")
	prefetchTasks(t, ctx, c, queue, tasks)
	w := queueWorker(t, c, queue, concurrency.WorkerConfig{Owner: "s1",
		Lease: 20 * time.Second, Wait: 100 * time.Millisecond, SetStatus: "running"})
	var calls atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			switch calls.Add(1) {
			case 1:
			case 2:
				time.Sleep(100 * time.Millisecond) // after batch 1 came back: batch 2
			default:
				<-ctx.Done() // later tasks: busy until the stop
				return ctx.Err()
			}
			_, err := l.Complete(ctx, "done", nil)
			return err
		})
	}()
	eventually(t, 30*time.Second, "the second batch held", held.Load)
	stop()
	select {
	case err := <-pool:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RunPool: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunPool did not return")
	}
	page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range page.Tasks {
		if task.Owner != "" {
			t.Errorf("task %s (%s) still leased to %q after the pool stopped", task.TaskID, task.Status, task.Owner)
		}
	}
}
