package concurrency_test

import (
	"bytes"
	"context"
	"errors"
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

// oldServer is a proxy in front of the package's real batond that
// answers as a server before version 6 (release 5) answers what it does
// not know, and forwards everything else: a queue claim with "max" and
// an update with "unstarted" are 400 invalid_argument (an unknown field
// of the JSON body), the queue batch route is 404. The answers are the
// bytes such a server gives (checked against a batond built from
// eb0f3a6^). A proxy, not the old build itself: a test cannot build an
// older tree from a clone, and only these answers differ.
type oldServer struct {
	URL                        string
	refuseMax, refuseUnstarted bool
	maxRefused, batchRefused   atomic.Int64
	unstartedRefused           atomic.Int64
}

func newOldServer(t *testing.T, refuseMax, refuseUnstarted bool) *oldServer {
	t.Helper()
	to, err := url.Parse(env.URL())
	if err != nil {
		t.Fatal(err)
	}
	o := &oldServer{refuseMax: refuseMax, refuseUnstarted: refuseUnstarted}
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
		switch {
		case o.refuseMax && strings.HasSuffix(r.URL.Path, "/batch"):
			o.batchRefused.Add(1)
			clustertest.WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path, nil)
		case o.refuseMax && strings.HasSuffix(r.URL.Path, "/claim") && bytes.Contains(body, []byte(`"max"`)):
			unknown("max", &o.maxRefused)
		case o.refuseUnstarted && strings.HasSuffix(r.URL.Path, "/update") && bytes.Contains(body, []byte(`"unstarted"`)):
			unknown("unstarted", &o.unstartedRefused)
		default:
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
	old := newOldServer(t, true, true)
	c := old.client(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const tasks, n = 10, 3
	queue := uniqueName("oldserver")
	prefetchTasks(t, ctx, c, queue, tasks)
	w, err := concurrency.NewWorker(c, concurrency.WorkerConfig{Tenant: "acme", Queue: queue, Owner: "old",
		Lease: 3 * time.Second, Wait: 100 * time.Millisecond, SetStatus: "running"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	completed := 0
	allDone := func() bool {
		page, err := c.ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue, Status: "done", Limit: 100})
		return err == nil && len(page.Tasks) == tasks
	}
	run := func(what string, until func() bool) {
		t.Helper()
		pctx, stop := context.WithCancel(ctx)
		pool := make(chan error, 1)
		go func() {
			pool <- w.RunPool(pctx, n, func(ctx context.Context, l *concurrency.Lease) error {
				_, err := l.Complete(ctx, "done", nil)
				switch {
				case err == nil:
					mu.Lock()
					completed++
					mu.Unlock()
				case ctx.Err() == nil:
					t.Errorf("complete %s: %v", l.Task().TaskID, err)
				}
				return err // one the stop cancelled is released, or done
			})
		}()
		eventually(t, 30*time.Second, what, until)
		stop()
		if err := <-pool; !errors.Is(err, context.Canceled) {
			t.Fatalf("RunPool: %v, want it to go on with single claims until stopped", err)
		}
	}
	run("half the tasks done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return completed >= tasks/2
	})
	run("every task done", allDone) // a second RunPool of the same Worker does the rest
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
	old := newOldServer(t, false, true)
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
