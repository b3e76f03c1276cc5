package concurrency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
	"go.uber.org/goleak"
)

// The Worker tests run against the package's real batond (TestMain). Each
// test has a queue of its own, and its worker reaches the node through a
// recording proxy that notes when each request came and, on the test's
// cue, delays it, sends it to the node without a leader (a real 503), or
// takes the task over from under the worker before passing it on (a real
// 409 fenced).

// workerQueue is one test's queue and the proxy its worker goes through.
type workerQueue struct {
	name  string
	node  *client.Client // straight to the node, for the test's own calls
	p     *clustertest.Proxy
	route func(q *workerQueue, kind string, k int, r *http.Request) clustertest.Hop

	mu    sync.Mutex
	at    map[int]time.Time // arrival of the proxy's request n
	kinds map[string]int    // requests of each kind so far
	fault error             // of a take-over in route
}

// kindOf names the worker's requests: claim (of the queue), renew, update
// and fail; "" for the others (sessions).
func kindOf(path string) string {
	for _, k := range []string{"claim", "renew", "update", "fail"} {
		if strings.HasSuffix(path, "/"+k) && (k != "claim" || strings.Contains(path, "/queues/")) {
			return k
		}
	}
	return ""
}

// newWorkerQueue starts the proxy; route, when not nil, chooses the hop of
// the k-th request of each kind (q is the queue being set up). The returned client goes through the
// proxy with the given retry budget.
func newWorkerQueue(t *testing.T, maxRetry time.Duration, route func(q *workerQueue, kind string, k int, r *http.Request) clustertest.Hop) (*workerQueue, *client.Client) {
	t.Helper()
	q := &workerQueue{name: "wq-" + uuid.NewString()[:13], node: env.Client(t, client.Config{}), route: route,
		at: map[int]time.Time{}, kinds: map[string]int{}}
	q.p = clustertest.NewProxy(t, env.URL(), func(n int, r *http.Request) clustertest.Hop {
		kind := kindOf(r.URL.Path)
		q.mu.Lock()
		q.at[n] = time.Now()
		q.kinds[kind]++
		k := q.kinds[kind]
		q.mu.Unlock()
		if q.route == nil || kind == "" {
			return clustertest.Hop{}
		}
		return q.route(q, kind, k, r)
	})
	return q, env.Client(t, client.Config{Endpoints: []string{q.p.URL}, Timeout: 2 * time.Second, MaxRetry: maxRetry})
}

// id is the id of the queue's task named short.
func (q *workerQueue) id(short string) string { return q.name + "-" + short }

// add creates tasks in the queue, in this order.
func (q *workerQueue) add(t *testing.T, short ...string) {
	t.Helper()
	for _, s := range short {
		q.create(t, client.CreateTaskRequest{TaskID: q.id(s)})
	}
}

func (q *workerQueue) create(t *testing.T, req client.CreateTaskRequest) {
	t.Helper()
	req.Queue = q.name
	if _, err := q.node.CreateTask(ctxTimeout(t, 10*time.Second), clustertest.Tenant, req); err != nil {
		t.Fatal(err)
	}
}

// takeOver claims the task by id as the worker's owner, which fences the
// worker's lease at once (a claim by another owner would wait for it). An
// error is also kept for routeErr.
func (q *workerQueue) takeOver(short string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := q.node.ClaimTask(ctx, clustertest.Tenant, q.id(short), client.ClaimRequest{Owner: "w1", Lease: time.Minute})
	if err != nil {
		q.mu.Lock()
		q.fault = errors.Join(q.fault, err)
		q.mu.Unlock()
	}
	return err
}

// routeErr fails the test when a take-over in route failed.
func (q *workerQueue) routeErr(t *testing.T) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fault != nil {
		t.Fatalf("take over: %v", q.fault)
	}
}

func (q *workerQueue) task(t *testing.T, short string) *client.Task {
	t.Helper()
	task, err := q.node.GetTask(ctxTimeout(t, 10*time.Second), clustertest.Tenant, q.id(short))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// count is the number of requests of kind the proxy received so far.
func (q *workerQueue) count(kind string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.kinds[kind]
}

// sentReq is one request as the proxy saw it.
type sentReq struct {
	clustertest.Request
	at   time.Time
	body map[string]any
}

// sent returns the requests of kind the proxy received, in order.
func (q *workerQueue) sent(kind string) []sentReq {
	var out []sentReq
	for i, r := range q.p.Requests() {
		if kindOf(r.Path) != kind {
			continue
		}
		s := sentReq{Request: r}
		q.mu.Lock()
		s.at = q.at[i+1]
		q.mu.Unlock()
		dec := json.NewDecoder(strings.NewReader(string(r.Body)))
		dec.UseNumber()
		_ = dec.Decode(&s.body)
		out = append(out, s)
	}
	return out
}

func num(n uint64) json.Number { return json.Number(fmt.Sprint(n)) }

func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// noLeaks fails the test if it leaves goroutines behind. Call it first, so
// that its cleanup runs after every other (proxies closed, clients idle).
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func newWorker(t *testing.T, c *client.Client, q *workerQueue, cfg concurrency.WorkerConfig) *concurrency.Worker {
	t.Helper()
	cfg.Tenant, cfg.Queue, cfg.Owner = clustertest.Tenant, q.name, "w1"
	w, err := concurrency.NewWorker(c, cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w
}

// waitFor polls cond every 5ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDone waits for fn's context to end, at most d.
func waitDone(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
		return fmt.Errorf("context still live after %v", d)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNewWorkerValidates(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	ok := concurrency.WorkerConfig{Tenant: "acme", Queue: "q", Owner: "w1"}
	with := func(f func(*concurrency.WorkerConfig)) concurrency.WorkerConfig { cfg := ok; f(&cfg); return cfg }
	cases := []struct {
		name    string
		cfg     concurrency.WorkerConfig
		wantErr string
	}{
		{"defaults", ok, ""},
		{"no tenant", with(func(c *concurrency.WorkerConfig) { c.Tenant = "" }), "tenant is required"},
		{"no queue", with(func(c *concurrency.WorkerConfig) { c.Queue = "" }), "queue is required"},
		{"no owner", with(func(c *concurrency.WorkerConfig) { c.Owner = "" }), "owner is required"},
		{"sub-ms lease", with(func(c *concurrency.WorkerConfig) { c.Lease = time.Microsecond }), "at least 1ms"},
		{"long wait", with(func(c *concurrency.WorkerConfig) { c.Wait = time.Minute + 1 }), "at most 1m0s"},
		{"negative margin", with(func(c *concurrency.WorkerConfig) { c.SafetyMargin = -1 }), "must not be negative"},
		{"renew too late", with(func(c *concurrency.WorkerConfig) {
			c.Lease, c.RenewEvery, c.SafetyMargin = time.Second, 900*time.Millisecond, 100*time.Millisecond
		}), "must be shorter than lease"},
		{"no wait", with(func(c *concurrency.WorkerConfig) { c.Wait = -1 }), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := concurrency.NewWorker(c, tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (!errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want invalid_argument containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestWorkerRenewsEveryThirdOfLease: renewals come every Lease/3 with the
// claim's token, the lease holds meanwhile, Complete sends one fenced
// update with release, and the lease then refuses writes locally.
func TestWorkerRenewsEveryThirdOfLease(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	q.add(t, "t1")
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 1500 * time.Millisecond, Wait: time.Second, SetStatus: "running",
		Statuses: []string{"pending", "retry"}})
	start := time.Now()
	var token uint64
	var fnStart time.Time
	var afterComplete error
	settled := map[int]bool{} // renewals answered before Complete was called
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		fnStart, token = time.Now(), l.Token()
		if id := q.id("t1"); token == 0 || l.Task().TaskID != id || l.Task().Status != "running" ||
			l.Fence() != (client.Fence{TaskID: id, Token: token}) {
			return fmt.Errorf("lease of task %q (%s) token %d fence %+v, want %s running", l.Task().TaskID, l.Task().Status, token, l.Fence(), id)
		}
		before := q.count("renew") // a slow claim's confirmation
		waitFor(t, 5*time.Second, "2 renewals", func() bool { return q.count("renew") >= before+2 })
		if err := context.Cause(ctx); err != nil || l.Err() != nil {
			return fmt.Errorf("lease ended while renewals succeed: ctx %v, lease %v", err, l.Err())
		}
		// Renewals answered by now must have succeeded; one still in
		// flight may be applied after the release and refused (409),
		// which the lease does not count as a loss.
		for i, r := range q.sent("renew") {
			if r.Status != 0 {
				settled[i] = true
			}
		}
		if _, err := l.Complete(ctx, "done", json.RawMessage(`{"ok":true}`)); err != nil {
			return err
		}
		_, afterComplete = l.Update(ctx, client.UpdateTaskRequest{Status: new("again")})
		if closed(l.Lost()) || ctx.Err() != nil {
			return errors.New("a release counts as a loss")
		}
		return nil
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (true, nil)", claimed, err)
	}
	if !errors.Is(afterComplete, concurrency.ErrLeaseReleased) {
		t.Errorf("update after Complete: got %v, want ErrLeaseReleased", afterComplete)
	}
	claims, renews, updates := q.sent("claim"), q.sent("renew"), q.sent("update")
	if b := claims[0].body; b["owner"] != "w1" || b["lease_ms"] != json.Number("1500") || b["wait_ms"] != json.Number("1000") ||
		b["set_status"] != "running" || fmt.Sprint(b["statuses"]) != "[pending retry]" {
		t.Errorf("claim body: got %v", b)
	}
	k := 0
	for i, r := range renews {
		// Unsettled when Complete began: 0 is a renewal cut by the
		// renewer's stop, 409 one applied after the release.
		ok := r.Status == http.StatusOK || !settled[i] && (r.Status == 0 || r.Status == http.StatusConflict)
		if r.body["fencing_token"] != num(token) || r.body["lease_ms"] != json.Number("1500") || !ok {
			t.Errorf("renewal %d: body %v answered %d, want token %d, lease 1500, 200", i, r.body, r.Status, token)
		}
		if r.at.Before(fnStart) {
			continue // a slow claim's confirmation, not the renewer's
		}
		k++
		if min := start.Add(time.Duration(k) * 500 * time.Millisecond); r.at.Before(min) {
			t.Errorf("renewal %d came %v after start, want at least %v", k, r.at.Sub(start), min.Sub(start))
		}
	}
	if len(updates) != 1 {
		t.Fatalf("got %d updates, want 1 (the write after Complete must not be sent)", len(updates))
	}
	if b := updates[0].body; b["fencing_token"] != num(token) || b["release"] != true || b["status"] != "done" ||
		fmt.Sprint(b["result"]) != "map[ok:true]" {
		t.Errorf("Complete body: got %v", b)
	}
	if task := q.task(t, "t1"); task.Status != "done" || task.Owner != "" || string(task.Result) != `{"ok":true}` {
		t.Errorf("task on the node: %+v", task)
	}
}

// TestWorkerFencedRenewalCancelsAtOnce: the task is taken over before the
// first renewal reaches the node, which refuses it as fenced; fn's context
// ends right then with a cause matching ErrFenced, and later writes
// through the lease are refused without a request.
func TestWorkerFencedRenewalCancelsAtOnce(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, func(q *workerQueue, kind string, k int, _ *http.Request) clustertest.Hop {
		if kind == "renew" && k == 1 {
			_ = q.takeOver("t1") // an error fails the test in routeErr
		}
		return clustertest.Hop{}
	})
	q.add(t, "t1")
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
	var cause, write, guarded error
	var cancelledAt, deadline time.Time
	called := false
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		deadline = l.Deadline()
		if err := waitDone(ctx, 5*time.Second); err != nil {
			return err
		}
		cancelledAt, cause = time.Now(), context.Cause(ctx)
		if !closed(l.Lost()) || l.Err() == nil {
			return errors.New("ctx ended but Lost is open")
		}
		_, write = l.Update(context.Background(), client.UpdateTaskRequest{Status: new("stale")})
		guarded = l.Guarded(context.Background(), func(context.Context, client.Fence) error { called = true; return nil })
		return cause
	})
	q.routeErr(t)
	if !claimed || !errors.Is(err, client.ErrFenced) {
		t.Fatalf("RunOnce: got (%v, %v), want (true, fenced)", claimed, err)
	}
	for name, e := range map[string]error{"cause": cause, "update": write, "guarded": guarded} {
		if !errors.Is(e, client.ErrFenced) || !errors.Is(e, concurrency.ErrLeaseLost) || errors.Is(e, concurrency.ErrLeaseExpired) {
			t.Errorf("%s: got %v, want lease lost, fenced", name, e)
		}
	}
	if called {
		t.Error("Guarded ran its write after the lease was lost")
	}
	// The behaviour itself, not a timing: a fenced renewal ends the lease
	// then, not at the local deadline 2.7s after the claim.
	if !cancelledAt.Before(deadline) {
		t.Errorf("cancelled at the local deadline, want at the fenced renewal")
	}
	renews := q.sent("renew")
	if len(renews) != 1 || renews[0].Status != http.StatusConflict || q.count("update")+q.count("fail") != 0 {
		t.Errorf("got renewals %+v and %d updates, want one refused 409 and none (no write, no release after a loss)",
			renews, q.count("update")+q.count("fail"))
	}
}

// TestWorkerExpiresWhenRenewalsFail: renewals answered 503 (sent to the
// node without a leader) are retried until the local deadline, sent time
// + Lease - SafetyMargin, and then the lease is lost as expired: before
// the server's own lease end.
func TestWorkerExpiresWhenRenewalsFail(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, time.Nanosecond, func(_ *workerQueue, kind string, _ int, _ *http.Request) clustertest.Hop {
		if kind == "renew" {
			return clustertest.Hop{To: env.Leaderless}
		}
		return clustertest.Hop{}
	})
	q.add(t, "t1")
	// A 2 s window between the claim and the local deadline leaves room
	// for several renewals however loaded the machine is.
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 4 * time.Second, RenewEvery: 100 * time.Millisecond,
		SafetyMargin: 2 * time.Second})
	start := time.Now()
	var cause error
	var cancelledAt time.Time
	claimed, err := w.RunOnce(ctxTimeout(t, 20*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		if err := waitDone(ctx, 10*time.Second); err != nil {
			return err
		}
		cancelledAt, cause = time.Now(), context.Cause(ctx)
		return nil
	})
	if !claimed || !errors.Is(err, concurrency.ErrLeaseExpired) {
		t.Fatalf("RunOnce: got (%v, %v), want (true, lease expired)", claimed, err)
	}
	if !errors.Is(cause, concurrency.ErrLeaseLost) || !errors.Is(cause, concurrency.ErrLeaseExpired) || errors.Is(cause, client.ErrFenced) {
		t.Errorf("cause: got %v, want lease lost, expired", cause)
	}
	claims, renews := q.sent("claim"), q.sent("renew")
	if got := cancelledAt.Sub(start); got < 2*time.Second {
		t.Errorf("cancelled %v after start, want no earlier than the local deadline (2s)", got)
	}
	// The safety property itself, with the 2s margin: the worker gives
	// the lease up before the server could give the task to another.
	if serverEnd := claims[0].at.Add(4 * time.Second); !cancelledAt.Before(serverEnd) {
		t.Errorf("cancelled %v after the server's lease end, want before", cancelledAt.Sub(serverEnd))
	}
	for i, r := range renews {
		// The last renewal may have been sent just before the local
		// deadline, which then cut it off: no answer (0), as the worker
		// gave the lease up.
		if r.Status != http.StatusServiceUnavailable && (i < len(renews)-1 || r.Status != 0) {
			t.Errorf("renewal %d of %d, sent %v after the start, was answered %d, want 503",
				i+1, len(renews), r.at.Sub(start), r.Status)
		}
	}
	if len(renews) < 2 || q.count("update")+q.count("fail") != 0 {
		t.Errorf("got %d renewal attempts and %d updates, want at least 2 and 0", len(renews), q.count("update")+q.count("fail"))
	}
	if task := q.task(t, "t1"); task.Owner != "w1" {
		t.Errorf("task on the node: %+v, want still leased to w1", task)
	}
}

// TestWorkerFencedWriteLosesLease: a guarded write answered 409 fenced (the
// task was taken over) ends the lease at once: ctx is cancelled before
// the write returns to fn, and the next write is refused without a
// request.
func TestWorkerFencedWriteLosesLease(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	q.add(t, "t1")
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 10 * time.Second})
	var first, second, guarded error
	var ctxErr error
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		if err := q.takeOver("t1"); err != nil {
			return err
		}
		_, first = l.Update(ctx, client.UpdateTaskRequest{Status: new("working")})
		ctxErr = context.Cause(ctx)
		_, second = l.Update(ctx, client.UpdateTaskRequest{Status: new("working")})
		guarded = l.Guarded(ctx, func(context.Context, client.Fence) error { return errors.New("must not run") })
		return nil
	})
	if !claimed || !errors.Is(err, concurrency.ErrLeaseLost) {
		t.Fatalf("RunOnce: got (%v, %v), want (true, lease lost) when fn returns nil after a loss", claimed, err)
	}
	for name, e := range map[string]error{"first": first, "cause": ctxErr, "second": second, "guarded": guarded} {
		if !errors.Is(e, client.ErrFenced) {
			t.Errorf("%s: got %v, want fenced", name, e)
		}
	}
	if n := q.count("update") + q.count("fail"); n != 1 {
		t.Errorf("got %d updates, want 1", n)
	}
}

// TestWorkerFailsAfterFnError: fn fails; the worker fails the attempt
// under its token with the error's message (the server then backs off or
// makes the task dead) and returns fn's error. A NonRetryable error says
// so; an error because the caller's context ended releases the task
// instead, using no attempt.
func TestWorkerFailsAfterFnError(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		name      string
		err       error
		cancel    bool
		wantKind  string
		wantNoRet bool
	}{
		{name: "retryable", err: errors.New("boom"), wantKind: "fail"},
		{name: "non-retryable", err: fmt.Errorf("parse: %w", concurrency.NonRetryable(errors.New("bad input"))), wantKind: "fail", wantNoRet: true},
		{name: "caller stopped", err: context.Canceled, cancel: true, wantKind: "update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, c := newWorkerQueue(t, 2*time.Second, nil)
			q.create(t, client.CreateTaskRequest{TaskID: q.id("t1"), MaxAttempts: 3, BackoffInitial: time.Minute})
			w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 10 * time.Second})
			ctx, cancel := context.WithCancel(ctxTimeout(t, 10*time.Second))
			defer cancel()
			var lease *concurrency.Lease
			claimed, err := w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
				lease = l
				if tc.cancel {
					cancel()
				}
				return tc.err
			})
			if !claimed || !errors.Is(err, tc.err) {
				t.Fatalf("RunOnce: got (%v, %v), want (true, %v)", claimed, err, tc.err)
			}
			writes := append(q.sent("update"), q.sent("fail")...)
			if len(writes) != 1 || kindOf(writes[0].Path) != tc.wantKind || writes[0].body["fencing_token"] != num(lease.Token()) ||
				writes[0].Status != http.StatusOK {
				t.Fatalf("writes after fn: got %+v, want one %s under token %d", writes, tc.wantKind, lease.Token())
			}
			b := writes[0].body
			if tc.wantKind == "fail" {
				if b["error"] != tc.err.Error() || (b["non_retryable"] == true) != tc.wantNoRet {
					t.Errorf("fail body: got %v, want error %q non_retryable %v", b, tc.err.Error(), tc.wantNoRet)
				}
			} else if b["release"] != true {
				t.Errorf("release body: got %v", b)
			}
			if !errors.Is(lease.Err(), concurrency.ErrLeaseReleased) {
				t.Errorf("lease: got %v, want released", lease.Err())
			}
			task := q.task(t, "t1")
			switch {
			case task.Owner != "":
				t.Errorf("task on the node still leased: %+v", task)
			case tc.wantNoRet && task.Status != client.StatusDead:
				t.Errorf("task on the node: %s, want dead", task.Status)
			case !tc.wantNoRet && task.Status == client.StatusDead:
				t.Errorf("task on the node: dead, want retried")
			case tc.wantKind == "fail" && task.LastError != tc.err.Error():
				t.Errorf("task on the node: last error %q, want %q", task.LastError, tc.err.Error())
			case tc.wantKind == "update" && task.LastError != "":
				t.Errorf("released task on the node: last error %q, want none", task.LastError)
			}
		})
	}
}

// TestWorkerStopPutsSetStatusBack: a worker whose claims set a status
// and whose caller stops it while fn runs gives the task back in a
// claimable status; released in the status its claim set ("running"), no
// claim of the queue found it again. The next claim gets it.
func TestWorkerStopPutsSetStatusBack(t *testing.T) {
	for _, pool := range []bool{false, true} {
		t.Run(map[bool]string{false: "RunOnce", true: "RunPool"}[pool], func(t *testing.T) { testStopPutsBack(t, pool) })
	}
}

func testStopPutsBack(t *testing.T, pool bool) {
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	q.add(t, "t1")
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 10 * time.Second, SetStatus: "running", Wait: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(ctxTimeout(t, 10*time.Second))
	defer cancel()
	fn := func(ctx context.Context, l *concurrency.Lease) error {
		if l.Task().Status != "running" {
			t.Errorf("claimed task status %q, want running", l.Task().Status)
		}
		cancel()
		return ctx.Err()
	}
	if pool {
		if err := w.RunPool(ctx, 2, fn); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("RunPool: %v", err)
		}
	} else if claimed, err := w.RunOnce(ctx, fn); !claimed || !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOnce: got (%v, %v), want (true, context canceled)", claimed, err)
	}
	if task := q.task(t, "t1"); task.Owner != "" || task.Status != "pending" {
		t.Fatalf("task on the node after the stop: owner %q status %q, want released and pending", task.Owner, task.Status)
	}
	again, err := c.ClaimQueue(ctxTimeout(t, 10*time.Second), clustertest.Tenant, q.name, client.QueueClaimRequest{Owner: "w2", Lease: time.Second})
	if err != nil || again == nil || again.TaskID != q.id("t1") {
		t.Fatalf("next claim: got %+v, %v; want %s", again, err, q.id("t1"))
	}
}

func TestNonRetryable(t *testing.T) {
	base := errors.New("bad")
	if concurrency.NonRetryable(nil) != nil {
		t.Error("NonRetryable(nil) is not nil")
	}
	wrapped := fmt.Errorf("step 3: %w", concurrency.NonRetryable(base))
	if !concurrency.IsNonRetryable(wrapped) || !errors.Is(wrapped, base) || wrapped.Error() != "step 3: bad" {
		t.Errorf("wrapped: IsNonRetryable %v, Is(base) %v, message %q", concurrency.IsNonRetryable(wrapped), errors.Is(wrapped, base), wrapped.Error())
	}
	if concurrency.IsNonRetryable(base) || concurrency.IsNonRetryable(nil) {
		t.Error("a plain error is non-retryable")
	}
}

// TestWorkerRunPoolBounded: RunPool runs at most n functions at once and
// stops with ctx, with batch claims (the default) and with NoPrefetch
// (one claim per task).
func TestWorkerRunPoolBounded(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoPrefetch=%v", single), func(t *testing.T) { testRunPoolBounded(t, single) })
	}
}

func testRunPoolBounded(t *testing.T, single bool) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	for i := range 12 {
		q.add(t, fmt.Sprintf("t%d", i))
	}
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 10 * time.Second, Wait: 100 * time.Millisecond, NoPrefetch: single})
	ctx, cancel := context.WithCancel(ctxTimeout(t, 20*time.Second))
	defer cancel()
	var mu sync.Mutex
	running, peak, done := 0, 0, 0
	errc := make(chan error, 1)
	go func() {
		errc <- w.RunPool(ctx, 3, func(ctx context.Context, l *concurrency.Lease) error {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			pause(ctx, 20*time.Millisecond) // work that takes a while, so that slots overlap
			mu.Lock()
			running--
			done++
			mu.Unlock()
			_, err := l.Complete(ctx, "done", nil)
			return err
		})
	}()
	waitFor(t, 15*time.Second, "all twelve tasks run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done == 12
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("RunPool: got %v, want context.Canceled", err)
	}
	if peak < 1 || peak > 3 {
		t.Errorf("peak concurrency %d, want 1 to 3", peak)
	}
	if n := q.count("claim"); single && n < 12 {
		t.Errorf("%d claims for 12 tasks, one task each", n)
	}
}

func TestWorkerNothingToClaim(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	w := newWorker(t, c, q, concurrency.WorkerConfig{Wait: 50 * time.Millisecond})
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(context.Context, *concurrency.Lease) error {
		t.Error("fn called without a task")
		return nil
	})
	if claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (false, nil)", claimed, err)
	}
	if claims := q.sent("claim"); len(claims) != 1 || claims[0].Status != http.StatusNoContent {
		t.Errorf("claims: %+v, want one answered 204", claims)
	}
}

// TestWorkerConfirmsSlowClaim: a claim that took longer than a renewal
// interval (the proxy holds it) is renewed before fn starts; when that
// renewal is fenced (the task was taken over meanwhile), fn never runs.
func TestWorkerConfirmsSlowClaim(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fence   bool
		wantErr error
	}{
		{"confirmed", false, nil},
		{"fenced", true, client.ErrFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			q, c := newWorkerQueue(t, 2*time.Second, func(q *workerQueue, kind string, k int, r *http.Request) clustertest.Hop {
				switch {
				case kind == "claim":
					pause(r.Context(), 250*time.Millisecond) // longer than RenewEvery
				case kind == "renew" && k == 1 && tc.fence:
					_ = q.takeOver("t1") // an error fails the test in routeErr
				}
				return clustertest.Hop{}
			})
			q.add(t, "t1")
			w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 200 * time.Millisecond})
			renewsAtStart := -1
			claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
				renewsAtStart = q.count("renew")
				return l.Release(ctx)
			})
			q.routeErr(t)
			if !claimed || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("RunOnce: got (%v, %v), want (true, %v)", claimed, err, tc.wantErr)
			}
			renews, updates := q.count("renew"), q.count("update")+q.count("fail")
			switch {
			case tc.wantErr == nil && renewsAtStart != 1:
				t.Errorf("fn started after %d renewals, want 1", renewsAtStart)
			case tc.wantErr != nil && (renewsAtStart != -1 || renews != 1 || updates != 0):
				t.Errorf("fn ran: %v; %d renewals, %d updates; want no run, 1 renewal, no update",
					renewsAtStart != -1, renews, updates)
			}
		})
	}
}

// TestWorkerRun: Run handles tasks one after another, reports fn's errors
// to OnError, retries a claim that found the cluster unavailable (the
// first, sent to the node without a leader), and returns ctx's error when
// ctx ends.
func TestWorkerRun(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, time.Nanosecond, func(_ *workerQueue, kind string, k int, _ *http.Request) clustertest.Hop {
		if kind == "claim" && k == 1 {
			return clustertest.Hop{To: env.Leaderless}
		}
		return clustertest.Hop{}
	})
	// One attempt for a: its failure makes it dead, not claimable again.
	q.create(t, client.CreateTaskRequest{TaskID: q.id("a"), MaxAttempts: 1})
	q.add(t, "b")
	var mu sync.Mutex
	var reported []string
	var done []string
	completed := false // b's Complete answered: cancel must not cut it
	cfg := concurrency.WorkerConfig{Lease: 10 * time.Second, Wait: 20 * time.Millisecond,
		OnError: func(task *client.Task, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, strings.TrimPrefix(task.TaskID, q.name+"-")+": "+err.Error())
		}}
	w := newWorker(t, c, q, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() {
		result <- w.Run(ctx, func(ctx context.Context, l *concurrency.Lease) error {
			id := strings.TrimPrefix(l.Task().TaskID, q.name+"-")
			mu.Lock()
			done = append(done, id)
			mu.Unlock()
			if id == "a" {
				return errors.New("boom")
			}
			_, err := l.Complete(ctx, "done", nil)
			mu.Lock()
			completed = err == nil
			mu.Unlock()
			return err
		})
	}()
	waitFor(t, 10*time.Second, "both tasks and the error report", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 2 && len(reported) == 1 && completed
	})
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if fmt.Sprint(done) != "[a b]" || reported[0] != "a: boom" {
		t.Errorf("got done %v, reported %v; want [a b], [a: boom]", done, reported)
	}
	if claims := q.sent("claim"); len(claims) < 3 || claims[0].Status != http.StatusServiceUnavailable {
		t.Errorf("claims: %+v, want the first answered 503, then a and b", claims)
	}
	if a, b := q.task(t, "a"), q.task(t, "b"); a.Status != client.StatusDead || b.Status != "done" {
		t.Errorf("tasks on the node: a %s, b %s; want dead, done", a.Status, b.Status)
	}
}

// TestWorkerRunStopsOnPermanentClaimError: a principal that may read tasks
// but not claim them gets 403 forbidden, which Run returns.
func TestWorkerRunStopsOnPermanentClaimError(t *testing.T) {
	noLeaks(t)
	q, _ := newWorkerQueue(t, 2*time.Second, nil)
	q.add(t, "a")
	reader, err := q.node.CreatePrincipal(ctxTimeout(t, 10*time.Second), clustertest.Tenant, "reader-"+uuid.NewString()[:13],
		[]client.Grant{{Resource: "tasks", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(t, client.Config{Endpoints: []string{q.p.URL}, Token: reader.Token, Timeout: 2 * time.Second, MaxRetry: 2 * time.Second})
	w := newWorker(t, c, q, concurrency.WorkerConfig{})
	err = w.Run(ctxTimeout(t, 10*time.Second), func(context.Context, *concurrency.Lease) error {
		t.Error("fn called without a task")
		return nil
	})
	if !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Run: got %v, want forbidden", err)
	}
	if n := q.count("claim"); n != 1 {
		t.Errorf("%d claims, want 1", n)
	}
}

// TestWorkerStopsRenewingWhenFnReturns: fn returns nil without completing;
// RunOnce returns with the renewer stopped (goleak, and no renewal after),
// the task still leased until the lease runs out, after which the lease
// reports itself expired.
func TestWorkerStopsRenewingWhenFnReturns(t *testing.T) {
	noLeaks(t)
	q, c := newWorkerQueue(t, 2*time.Second, nil)
	q.add(t, "t1")
	w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond,
		SafetyMargin: 2 * time.Second})
	var lease *concurrency.Lease
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		lease = l
		waitFor(t, 5*time.Second, "2 renewals", func() bool { return q.count("renew") >= 2 })
		return nil
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (true, nil)", claimed, err)
	}
	renews := q.count("renew")
	if d := lease.Deadline(); time.Now().Before(d) && lease.Err() != nil {
		t.Errorf("lease before its deadline: got %v, want still held", lease.Err())
	}
	if task := q.task(t, "t1"); task.Owner != "w1" {
		t.Errorf("task on the node after fn returned: %+v, want still leased", task)
	}
	waitFor(t, 5*time.Second, "the local deadline", func() bool { return !time.Now().Before(lease.Deadline()) })
	if err := lease.Err(); !errors.Is(err, concurrency.ErrLeaseExpired) {
		t.Errorf("lease after its deadline: got %v, want expired", err)
	}
	if n := q.count("renew"); n != renews {
		t.Errorf("%d renewals after RunOnce returned, want none", n-renews)
	}
	if n := q.count("update") + q.count("fail"); n != 0 {
		t.Errorf("got %d updates, want 0: a nil return leaves the task to fn", n)
	}
}

// TestWorkerOwnIdempotencyKeys: a key attached to the caller's context
// (WithIdempotencyKey) is not reused by the worker's claim and renewals,
// which would otherwise replay one another: each goes with a place of its
// own in the client's session, or, without sessions, a fresh key.
func TestWorkerOwnIdempotencyKeys(t *testing.T) {
	for _, noSession := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSession=%v", noSession), func(t *testing.T) {
			noLeaks(t)
			q, _ := newWorkerQueue(t, 2*time.Second, nil)
			q.add(t, "t1")
			c := env.Client(t, client.Config{Endpoints: []string{q.p.URL}, Timeout: 2 * time.Second, MaxRetry: 2 * time.Second,
				NoSession: noSession})
			w := newWorker(t, c, q, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
			ctx := client.WithIdempotencyKey(ctxTimeout(t, 10*time.Second), "shared-"+uuid.NewString())
			claimed, err := w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
				waitFor(t, 5*time.Second, "2 renewals", func() bool { return q.count("renew") >= 2 })
				return l.Release(ctx)
			})
			if !claimed || err != nil {
				t.Fatalf("RunOnce: got (%v, %v), want (true, nil)", claimed, err)
			}
			seen := map[string]bool{}
			for _, r := range append(q.sent("claim"), q.sent("renew")...) {
				id := r.Key
				if id == "" && !noSession {
					id = r.Header.Get("X-Baton-Session") + "/" + r.Header.Get("X-Baton-Seq")
				}
				if id == "" || id == "/" || strings.HasPrefix(id, "shared-") || seen[id] {
					t.Errorf("%s carried Idempotency-Key or session place %q, want one of its own", r.Path, id)
				}
				seen[id] = true
			}
		})
	}
}
