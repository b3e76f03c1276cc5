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
	"go.uber.org/goleak"
)

// fakeQueue is a fake node serving one queue of tenant "acme": queue claims
// hand out the ids in pending with tokens 101, 102, ...; renewals and
// updates answer what renewReply and updateReply say (200 with the task by
// default). It records every request with its arrival time.
type fakeQueue struct {
	mu          sync.Mutex
	pending     []string
	token       uint64
	claimDelay  time.Duration
	claimReply  func(n int) (status int, code string)
	renewReply  func(n int) (status int, code string)
	updateReply func(n int) (status int, code string)
	claims      []fakeReq
	renews      []fakeReq
	updates     []fakeReq
}

type fakeReq struct {
	at   time.Time
	path string
	key  string // Idempotency-Key
	body map[string]any
}

func (f *fakeQueue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := fakeReq{at: time.Now(), path: r.URL.Path, key: r.Header.Get("Idempotency-Key")}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	_ = dec.Decode(&req.body)
	switch {
	case r.URL.Path == "/v1/tenants/acme/queues/q/claim":
		f.serveClaim(w, r, req)
	case strings.HasSuffix(r.URL.Path, "/renew"):
		f.mu.Lock()
		f.renews = append(f.renews, req)
		n, reply := len(f.renews), f.renewReply
		f.mu.Unlock()
		f.answer(w, reply, n, strings.Split(r.URL.Path, "/")[5])
	case strings.HasSuffix(r.URL.Path, "/update"), strings.HasSuffix(r.URL.Path, "/fail"):
		f.mu.Lock()
		f.updates = append(f.updates, req)
		n, reply := len(f.updates), f.updateReply
		f.mu.Unlock()
		f.answer(w, reply, n, strings.Split(r.URL.Path, "/")[5])
	default:
		writeError(w, 404, "not_found", "no route "+r.URL.Path, nil)
	}
}

func (f *fakeQueue) serveClaim(w http.ResponseWriter, r *http.Request, req fakeReq) {
	f.mu.Lock()
	f.claims = append(f.claims, req)
	n, reply, delay := len(f.claims), f.claimReply, f.claimDelay
	f.mu.Unlock()
	if reply != nil {
		if status, code := reply(n); status != 0 {
			w.Header().Set("Retry-After", "0")
			writeError(w, status, code, "fake", nil)
			return
		}
	}
	f.mu.Lock()
	empty := len(f.pending) == 0
	f.mu.Unlock()
	if empty { // honour wait_ms, as the server does, so Run does not spin
		wait, _ := req.body["wait_ms"].(json.Number).Int64()
		delay = time.Duration(wait) * time.Millisecond
	}
	if !pause(r.Context(), delay) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	id := f.pending[0]
	f.pending = f.pending[1:]
	f.token++
	writeJSON(w, 200, f.task(id, 100+f.token))
}

func (f *fakeQueue) answer(w http.ResponseWriter, reply func(int) (int, string), n int, id string) {
	if reply != nil {
		if status, code := reply(n); status != 0 {
			w.Header().Set("Retry-After", "0")
			writeError(w, status, code, "fake", map[string]any{"current_token": 999})
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, 200, f.task(id, 100+f.token))
}

func (f *fakeQueue) task(id string, token uint64) map[string]any {
	return map[string]any{"tenant_id": "acme", "task_id": id, "queue": "q", "status": "pending",
		"owner": "w1", "fencing_token": token, "version": 2, "attempt": 1, "payload": map[string]any{}}
}

func (f *fakeQueue) counts() (claims, renews, updates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.claims), len(f.renews), len(f.updates)
}

func (f *fakeQueue) recorded() (claims, renews, updates []fakeReq) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.claims...), append([]fakeReq(nil), f.renews...), append([]fakeReq(nil), f.updates...)
}

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

func always(status int, code string) func(int) (int, string) {
	return func(int) (int, string) { return status, code }
}

// noLeaks fails the test if it leaves goroutines behind. Call it first, so
// that its cleanup runs after every other (servers closed, clients idle).
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// startFake serves f and returns a client of it with its own transport, a
// short attempt timeout and the given retry budget.
func startFake(t *testing.T, f *fakeQueue, maxRetry time.Duration) *client.Client {
	t.Helper()
	s := serve(t, f.ServeHTTP)
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	return newClientCfg(t, client.Config{Endpoints: []string{s.URL}, Token: "tok", HTTPClient: hc,
		Timeout: 2 * time.Second, MaxRetry: maxRetry})
}

func newWorker(t *testing.T, c *client.Client, cfg concurrency.WorkerConfig) *concurrency.Worker {
	t.Helper()
	cfg.Tenant, cfg.Queue, cfg.Owner = "acme", "q", "w1"
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
	f := &fakeQueue{pending: []string{"t1"}}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 1500 * time.Millisecond, Wait: time.Second, SetStatus: "running",
		Statuses: []string{"pending", "retry"}})
	start := time.Now()
	var afterComplete error
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		if l.Token() != 101 || l.Task().TaskID != "t1" || l.Fence() != (client.Fence{TaskID: "t1", Token: 101}) {
			return fmt.Errorf("lease of task %q token %d fence %+v, want t1 101", l.Task().TaskID, l.Token(), l.Fence())
		}
		waitFor(t, 5*time.Second, "2 renewals", func() bool { _, r, _ := f.counts(); return r >= 2 })
		if err := context.Cause(ctx); err != nil || l.Err() != nil {
			return fmt.Errorf("lease ended while renewals succeed: ctx %v, lease %v", err, l.Err())
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
	claims, renews, updates := f.recorded()
	if b := claims[0].body; b["owner"] != "w1" || b["lease_ms"] != json.Number("1500") || b["wait_ms"] != json.Number("1000") ||
		b["set_status"] != "running" || fmt.Sprint(b["statuses"]) != "[pending retry]" {
		t.Errorf("claim body: got %v", b)
	}
	for k, r := range renews {
		if min := start.Add(time.Duration(k+1) * 500 * time.Millisecond); r.at.Before(min) {
			t.Errorf("renewal %d came %v after start, want at least %v", k+1, r.at.Sub(start), min.Sub(start))
		}
		if r.body["fencing_token"] != json.Number("101") || r.body["lease_ms"] != json.Number("1500") {
			t.Errorf("renewal %d body: got %v, want token 101, lease 1500", k+1, r.body)
		}
	}
	if len(updates) != 1 {
		t.Fatalf("got %d updates, want 1 (the write after Complete must not be sent)", len(updates))
	}
	if b := updates[0].body; b["fencing_token"] != json.Number("101") || b["release"] != true || b["status"] != "done" ||
		fmt.Sprint(b["result"]) != "map[ok:true]" {
		t.Errorf("Complete body: got %v", b)
	}
}

// TestWorkerFencedRenewalCancelsAtOnce: the first renewal is refused as
// fenced; fn's context ends right then with a cause matching ErrFenced, and
// later writes through the lease are refused without a request.
func TestWorkerFencedRenewalCancelsAtOnce(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"t1"}, renewReply: always(409, "fenced")}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
	var cause, write, guarded error
	var cancelledAt time.Time
	var deadline time.Time
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
	if !cancelledAt.Before(deadline) {
		t.Errorf("cancelled at the local deadline, want at the fenced renewal")
	}
	if _, renews, updates := f.counts(); renews != 1 || updates != 0 {
		t.Errorf("got %d renewals and %d updates, want 1 and 0 (no write, no release after a loss)", renews, updates)
	}
}

// TestWorkerExpiresWhenRenewalsFail: renewals answered 503 are retried
// until the local deadline, sent time + Lease - SafetyMargin, and then the
// lease is lost as expired: before the server's own lease end.
func TestWorkerExpiresWhenRenewalsFail(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"t1"}, renewReply: always(503, "unavailable")}
	c := startFake(t, f, 10*time.Second)
	// A 2 s window between the claim and the local deadline leaves room
	// for several renewals however loaded the machine is.
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 4 * time.Second, RenewEvery: 100 * time.Millisecond,
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
	claims, renews, updates := f.recorded()
	if got := cancelledAt.Sub(start); got < 2*time.Second {
		t.Errorf("cancelled %v after start, want no earlier than the local deadline (2s)", got)
	}
	if serverEnd := claims[0].at.Add(4 * time.Second); !cancelledAt.Before(serverEnd) {
		t.Errorf("cancelled %v after the server's lease end, want before", cancelledAt.Sub(serverEnd))
	}
	if len(renews) < 2 || len(updates) != 0 {
		t.Errorf("got %d renewal attempts and %d updates, want at least 2 and 0", len(renews), len(updates))
	}
}

// TestWorkerFencedWriteLosesLease: a guarded write answered 409 fenced ends
// the lease at once: ctx is cancelled before the write returns to fn, and
// the next write is refused without a request.
func TestWorkerFencedWriteLosesLease(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"t1"}, updateReply: always(409, "fenced")}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 10 * time.Second})
	var first, second, guarded error
	var ctxErr error
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
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
	if _, _, updates := f.counts(); updates != 1 {
		t.Errorf("got %d updates, want 1", updates)
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
		wantPath  string
		wantNoRet bool
	}{
		{name: "retryable", err: errors.New("boom"), wantPath: "/fail"},
		{name: "non-retryable", err: fmt.Errorf("parse: %w", concurrency.NonRetryable(errors.New("bad input"))), wantPath: "/fail", wantNoRet: true},
		{name: "caller stopped", err: context.Canceled, cancel: true, wantPath: "/update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeQueue{pending: []string{"t1"}}
			c := startFake(t, f, 2*time.Second)
			w := newWorker(t, c, concurrency.WorkerConfig{Lease: 10 * time.Second})
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
			_, _, updates := f.recorded()
			if len(updates) != 1 || !strings.HasSuffix(updates[0].path, tc.wantPath) || updates[0].body["fencing_token"] != json.Number("101") {
				t.Fatalf("writes after fn: got %v, want one %s under token 101", updates, tc.wantPath)
			}
			b := updates[0].body
			if tc.wantPath == "/fail" {
				if b["error"] != tc.err.Error() || (b["non_retryable"] == true) != tc.wantNoRet {
					t.Errorf("fail body: got %v, want error %q non_retryable %v", b, tc.err.Error(), tc.wantNoRet)
				}
			} else if b["release"] != true {
				t.Errorf("release body: got %v", b)
			}
			if !errors.Is(lease.Err(), concurrency.ErrLeaseReleased) {
				t.Errorf("lease: got %v, want released", lease.Err())
			}
		})
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
// stops with ctx.
func TestWorkerRunPoolBounded(t *testing.T) {
	noLeaks(t)
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("t%d", i)
	}
	f := &fakeQueue{pending: ids}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 10 * time.Second, Wait: 100 * time.Millisecond})
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
			pause(ctx, 20*time.Millisecond)
			mu.Lock()
			running--
			done++
			mu.Unlock()
			return l.Release(ctx)
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
}

func TestWorkerNothingToClaim(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Wait: 50 * time.Millisecond})
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(context.Context, *concurrency.Lease) error {
		t.Error("fn called without a task")
		return nil
	})
	if claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (false, nil)", claimed, err)
	}
}

// TestWorkerConfirmsSlowClaim: a claim that took longer than a renewal
// interval is renewed before fn starts; when that renewal is fenced, fn
// never runs.
func TestWorkerConfirmsSlowClaim(t *testing.T) {
	for _, tc := range []struct {
		name    string
		renew   func(int) (int, string)
		wantErr error
	}{
		{"confirmed", nil, nil},
		{"fenced", always(409, "fenced"), client.ErrFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			f := &fakeQueue{pending: []string{"t1"}, claimDelay: 250 * time.Millisecond, renewReply: tc.renew}
			c := startFake(t, f, 2*time.Second)
			w := newWorker(t, c, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 200 * time.Millisecond})
			renewsAtStart := -1
			claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
				_, renewsAtStart, _ = f.counts()
				return l.Release(ctx)
			})
			if !claimed || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("RunOnce: got (%v, %v), want (true, %v)", claimed, err, tc.wantErr)
			}
			_, renews, updates := f.counts()
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
// to OnError, retries a claim that found the cluster unavailable, and
// returns ctx's error when ctx ends.
func TestWorkerRun(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"a", "b"}, claimReply: func(n int) (int, string) {
		if n == 1 {
			return 503, "unavailable"
		}
		return 0, ""
	}}
	c := startFake(t, f, time.Nanosecond)
	var mu sync.Mutex
	var reported []string
	var done []string
	cfg := concurrency.WorkerConfig{Lease: 10 * time.Second, Wait: 20 * time.Millisecond,
		OnError: func(task *client.Task, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, task.TaskID+": "+err.Error())
		}}
	w := newWorker(t, c, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() {
		result <- w.Run(ctx, func(ctx context.Context, l *concurrency.Lease) error {
			mu.Lock()
			done = append(done, l.Task().TaskID)
			mu.Unlock()
			if l.Task().TaskID == "a" {
				return errors.New("boom")
			}
			_, err := l.Complete(ctx, "done", nil)
			return err
		})
	}()
	waitFor(t, 5*time.Second, "both tasks and the error report", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 2 && len(reported) == 1
	})
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}
	if fmt.Sprint(done) != "[a b]" || reported[0] != "a: boom" {
		t.Errorf("got done %v, reported %v; want [a b], [a: boom]", done, reported)
	}
}

func TestWorkerRunStopsOnPermanentClaimError(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"a"}, claimReply: always(403, "forbidden")}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{})
	err := w.Run(ctxTimeout(t, 10*time.Second), func(context.Context, *concurrency.Lease) error {
		t.Error("fn called without a task")
		return nil
	})
	if !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Run: got %v, want forbidden", err)
	}
}

// TestWorkerStopsRenewingWhenFnReturns: fn returns nil without completing;
// RunOnce returns with the renewer stopped (goleak), the task still leased
// until the lease runs out, after which the lease reports itself expired.
func TestWorkerStopsRenewingWhenFnReturns(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"t1"}}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond,
		SafetyMargin: 2 * time.Second})
	var lease *concurrency.Lease
	claimed, err := w.RunOnce(ctxTimeout(t, 10*time.Second), func(ctx context.Context, l *concurrency.Lease) error {
		lease = l
		waitFor(t, 5*time.Second, "2 renewals", func() bool { _, r, _ := f.counts(); return r >= 2 })
		return nil
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (true, nil)", claimed, err)
	}
	if d := lease.Deadline(); time.Now().Before(d) && lease.Err() != nil {
		t.Errorf("lease before its deadline: got %v, want still held", lease.Err())
	}
	waitFor(t, 5*time.Second, "the local deadline", func() bool { return !time.Now().Before(lease.Deadline()) })
	if err := lease.Err(); !errors.Is(err, concurrency.ErrLeaseExpired) {
		t.Errorf("lease after its deadline: got %v, want expired", err)
	}
	if _, _, updates := f.counts(); updates != 0 {
		t.Errorf("got %d updates, want 0: a nil return leaves the task to fn", updates)
	}
}

// TestWorkerOwnIdempotencyKeys: a key attached to the caller's context
// (WithIdempotencyKey) is not reused by the worker's claim and renewals,
// which would otherwise replay one another.
func TestWorkerOwnIdempotencyKeys(t *testing.T) {
	noLeaks(t)
	f := &fakeQueue{pending: []string{"t1"}}
	c := startFake(t, f, 2*time.Second)
	w := newWorker(t, c, concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
	ctx := client.WithIdempotencyKey(ctxTimeout(t, 10*time.Second), "shared")
	claimed, err := w.RunOnce(ctx, func(ctx context.Context, l *concurrency.Lease) error {
		waitFor(t, 5*time.Second, "2 renewals", func() bool { _, r, _ := f.counts(); return r >= 2 })
		return l.Release(ctx)
	})
	if !claimed || err != nil {
		t.Fatalf("RunOnce: got (%v, %v), want (true, nil)", claimed, err)
	}
	claims, renews, _ := f.recorded()
	seen := map[string]bool{}
	for _, r := range append(claims, renews...) {
		if r.key == "" || r.key == "shared" || seen[r.key] {
			t.Errorf("%s carried Idempotency-Key %q, want a fresh key per write", r.path, r.key)
		}
		seen[r.key] = true
	}
}
