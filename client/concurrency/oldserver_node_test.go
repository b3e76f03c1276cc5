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
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/client/internal/clustertest"
)

// oldServer is a proxy in front of the package's real batond that
// answers as a server before version 6 (release 5) answers what it does
// not know, and forwards everything else: a queue claim with "max" and
// an update with "unstarted" are 400 invalid_argument (an unknown field
// of the JSON body), the queue batch route is 404. The answers are the
// bytes such a server gives (checked against a batond built from
// eb0f3a6^). A proxy, not the old build itself: a test cannot build an
// older tree from a clone, and only these answers differ. Its refusals
// can be switched off while it runs: the cluster upgraded under a Worker.
type oldServer struct {
	URL                                     string
	refuseMax, refuseBatch, refuseUnstarted atomic.Bool
	maxRefused, batchRefused                atomic.Int64
	unstartedRefused                        atomic.Int64
	maxPassed, batchPassed                  atomic.Int64 // forwarded once refusals were off
}

// newOldServer answers as an old server to a batch claim (max), to the
// batch route (batch) and to an unstarted release (unstarted).
func newOldServer(t *testing.T, max, batch, unstarted bool) *oldServer {
	t.Helper()
	to, err := url.Parse(env.URL())
	if err != nil {
		t.Fatal(err)
	}
	o := &oldServer{}
	o.refuseMax.Store(max)
	o.refuseBatch.Store(batch)
	o.refuseUnstarted.Store(unstarted)
	rp := httputil.NewSingleHostReverseProxy(to)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a request its client gave up on
	srv := clustertest.Stub(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		unknown := func(field string, n *atomic.Int64) {
			n.Add(1)
			clustertest.WriteError(w, http.StatusBadRequest, "invalid_argument", `malformed JSON: json: unknown field "`+field+`"`, nil)
		}
		isBatch := strings.HasSuffix(r.URL.Path, "/batch")
		isMax := strings.HasSuffix(r.URL.Path, "/claim") && bytes.Contains(body, []byte(`"max"`))
		switch {
		case isBatch && o.refuseBatch.Load():
			o.batchRefused.Add(1)
			clustertest.WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path, nil)
		case isMax && o.refuseMax.Load():
			unknown("max", &o.maxRefused)
		case o.refuseUnstarted.Load() && strings.HasSuffix(r.URL.Path, "/update") && bytes.Contains(body, []byte(`"unstarted"`)):
			unknown("unstarted", &o.unstartedRefused)
		default:
			if isBatch {
				o.batchPassed.Add(1)
			}
			if isMax {
				o.maxPassed.Add(1)
			}
			rp.ServeHTTP(w, r)
		}
	})
	o.URL = srv.URL
	return o
}

// client is a client of the proxy, with the package's token.
func (o *oldServer) client(t *testing.T) *client.Client {
	return newClientCfg(t, client.Config{Endpoints: []string{o.URL}, Token: os.Getenv("BATON_TOKEN")})
}

// TestWorkerPoolOldServer: against a server before version 6, which
// refuses batch claims, RunPool by default claims and completes one task
// at a time instead of stopping: every task runs once and is done. The
// Worker remembers it: one refused batch claim in all, none in a second
// RunPool, and the batch route is never tried.
func TestWorkerPoolOldServer(t *testing.T) {
	old := newOldServer(t, true, true, true)
	c := old.client(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 10, 3
	queue := uniqueName("oldserver")
	prefetchTasks(t, ctx, c, queue, tasks)
	// No SetStatus: a task whose Complete the first stop cancels is
	// released (it started) in the status its claim set, where a claim
	// of pending would not find it again.
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: queue, Owner: "old",
		Lease: 3 * time.Second, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var completed atomic.Int64
	runPoolUntil(t, ctx, w, n, &completed, "half the tasks done", func() bool { return completed.Load() >= tasks/2 })
	runPoolUntil(t, ctx, w, n, &completed, "every task done", func() bool { return allDone(ctx, c, queue, tasks) }) // a second RunPool of the same Worker does the rest
	if m, b := old.maxRefused.Load(), old.batchRefused.Load(); m != 1 || b != 0 {
		t.Errorf("refused batch claims %d, batch requests %d; want 1 and 0 (the Worker remembers)", m, b)
	}
}

// TestWorkerPrefetchStopOldServer: a server that refuses unstarted
// releases (before version 6) gets plain ones for the tasks a pool held
// unstarted when it stopped: released, not left leased; each used an
// attempt (attempt 1, in the status the claim set), as before. The
// Worker asks once.
func TestWorkerPrefetchStopOldServer(t *testing.T) {
	old := newOldServer(t, false, false, true)
	c := old.client(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 12, 3
	queue := uniqueName("oldstop")
	prefetchTasks(t, ctx, c, queue, tasks)
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: queue, Owner: "ps",
		Lease: time.Minute, Wait: 100 * time.Millisecond, SetStatus: "running"})
	if err != nil {
		t.Fatal(err)
	}
	held := stopWithHeldTasks(t, ctx, c, w, queue, n)
	page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, task := range page.Tasks {
		if task.Owner != "" {
			t.Errorf("task %s still leased to %q after the pool stopped", task.TaskID, task.Owner)
		}
		if held[task.TaskID] && task.Status == "running" {
			released++
			if task.Attempt != 1 {
				t.Errorf("task %s: attempt %d, want 1 (a plain release)", task.TaskID, task.Attempt)
			}
		}
	}
	if released == 0 {
		t.Fatalf("no held task released plain (held %v)", held)
	}
	if k := old.unstartedRefused.Load(); k != 1 {
		t.Errorf("refused unstarted releases: %d, want 1 (the Worker remembers)", k)
	}
}

// allDone reports whether the queue's tasks are all done.
func allDone(ctx context.Context, c *client.Client, queue string, tasks int) bool {
	page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Status: "done", Limit: 100})
	return err == nil && len(page.Tasks) == tasks
}

// runPoolUntil runs w.RunPool with n slots that complete their tasks
// (counted in completed) until cond holds, then stops it; RunPool must
// go on until stopped.
func runPoolUntil(t *testing.T, ctx context.Context, w *concurrency.Worker, n int, completed *atomic.Int64, what string, cond func() bool) {
	t.Helper()
	pctx, stop := context.WithCancel(ctx)
	pool := make(chan error, 1)
	go func() {
		pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
			_, err := l.Complete(ctx, "done", nil)
			switch {
			case err == nil:
				completed.Add(1)
			case ctx.Err() == nil:
				t.Errorf("complete %s: %v", l.Task().TaskID, err)
			}
			return err // one the stop cancelled is released, or done
		})
	}()
	var early error
	eventually(t, 30*time.Second, what, func() bool {
		select {
		case early = <-pool:
			return true // stopped by itself
		default:
		}
		return cond()
	})
	if early != nil {
		t.Fatalf("RunPool stopped before it was stopped: %v", early)
	}
	stop()
	if err := <-pool; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPool: %v, want it to go on until stopped", err)
	}
}

// TestWorkerPoolNoBatchRoute: a server that takes batch claims but has
// no batch route (the leader became a member before version 6 while the
// pool ran) makes the pool send the refused batch's completions alone
// and go on with single claims, its running functions undisturbed (a
// cancelled one would leave its task released in "running", out of the
// claims of pending): every task is done, and the batch route is asked
// once.
func TestWorkerPoolNoBatchRoute(t *testing.T) {
	old := newOldServer(t, false, true, false)
	c := old.client(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 12, 3
	queue := uniqueName("nobatch")
	prefetchTasks(t, ctx, c, queue, tasks)
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: queue, Owner: "nb",
		Lease: 3 * time.Second, Wait: 100 * time.Millisecond, SetStatus: "running"})
	if err != nil {
		t.Fatal(err)
	}
	var completed atomic.Int64
	runPoolUntil(t, ctx, w, n, &completed, "every task done", func() bool { return allDone(ctx, c, queue, tasks) })
	if b := old.batchRefused.Load(); b != 1 {
		t.Errorf("batch requests refused: %d, want 1 (the Worker remembers)", b)
	}
}

// TestWorkerPoolBackToBatch: a Worker that met a server refusing batch
// claims (a leader before version 6 in a rolling upgrade) claims one task
// at a time, then, BatchRetryClaims tasks later, tries a batch claim
// again: once the cluster is upgraded (the proxy passes batches), the
// same RunPool claims and completes in batches again.
func TestWorkerPoolBackToBatch(t *testing.T) {
	old := newOldServer(t, true, true, false)
	c := old.client(t)
	ctx := ctxTimeout(t, 120*time.Second)
	const before, after, n = 5, concurrency.BatchRetryClaims + 20, 3
	queue := uniqueName("backtobatch")
	prefetchTasks(t, ctx, c, queue, before)
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: queue, Owner: "bb",
		Lease: 10 * time.Second, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var completed atomic.Int64
	upgraded := false
	runPoolUntil(t, ctx, w, n, &completed, "every task done", func() bool {
		if !upgraded && completed.Load() >= before {
			// The first tasks, claimed one at a time: now the cluster
			// is upgraded, and more work comes.
			upgraded = true
			old.refuseMax.Store(false)
			old.refuseBatch.Store(false)
			for i := range after {
				if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: fmt.Sprintf("%s-after%d", queue, i), Queue: queue}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return upgraded && completed.Load() >= before+after
	})
	if m := old.maxRefused.Load(); m != 1 {
		t.Errorf("refused batch claims: %d, want 1", m)
	}
	// Back to batches: claims with max, or queue batches (completions with
	// the next claims). Which of the two comes first is timing: a pool that
	// always holds a completion to send never needs a bare batch claim.
	if m, b := old.maxPassed.Load(), old.batchPassed.Load(); m+b == 0 {
		t.Errorf("after the upgrade: %d batch claims and %d batch requests, want the Worker back to batches", m, b)
	}
}
