package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/google/uuid"
)

func TestFailoverToLiveEndpoint(t *testing.T) {
	cases := []struct {
		name string
		dead func(t *testing.T) string
	}{
		{"connection refused", closedEndpoint},
		{"connection closed", func(t *testing.T) string { u, _ := hangupEndpoint(t); return u }},
		{"attempt timeout", func(t *testing.T) string { u, _ := stallEndpoint(t); return u }},
		{"503", func(t *testing.T) string { return serve(t, (&recorder{reply: unavailable}).ServeHTTP).URL }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := &recorder{reply: tenantsOK}
			liveURL := serve(t, live.ServeHTTP).URL
			c := newClientCfg(t, client.Config{Endpoints: []string{tc.dead(t), liveURL},
				Timeout: 200 * time.Millisecond, MaxRetry: 5 * time.Second})
			got, err := c.ListTenants(ctxTimeout(t, 10*time.Second))
			if err != nil {
				t.Fatalf("ListTenants: %v", err)
			}
			if len(got) != 1 || got[0] != "acme" {
				t.Errorf("got tenants %v, want [acme]", got)
			}
			if n := len(live.requests()); n != 1 {
				t.Errorf("live endpoint got %d requests, want 1", n)
			}
		})
	}
}

func TestRemembersLastGoodEndpoint(t *testing.T) {
	dead, accepted := hangupEndpoint(t)
	live := &recorder{reply: tenantsOK}
	c := newClient(t, dead, serve(t, live.ServeHTTP).URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 3 {
		if _, err := c.ListTenants(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("dead endpoint saw %d connections, want 1 (only the first call tries it)", n)
	}
	if n := len(live.requests()); n != 3 {
		t.Errorf("live endpoint got %d requests, want 3", n)
	}
}

func TestRetryOn503ReusesIdempotencyKey(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		if n%3 != 0 { // two 503s, then success, for each logical call
			unavailable(w, r, n)
			return
		}
		writeJSON(w, 201, map[string]any{"task_id": "t1", "queue": "q"})
	}}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for range 2 {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q"}); err != nil {
			t.Fatalf("CreateTask: %v", err)
		}
	}
	reqs := rec.requests()
	if len(reqs) != 6 {
		t.Fatalf("got %d requests, want 6", len(reqs))
	}
	for i, r := range reqs {
		if r.Key != reqs[i/3*3].Key {
			t.Errorf("request %d: key %q, want the call's first key %q", i, r.Key, reqs[i/3*3].Key)
		}
		if u, err := uuid.Parse(r.Key); err != nil || u.Version() != 7 {
			t.Errorf("request %d: key %q is not a UUIDv7", i, r.Key)
		}
	}
	if reqs[0].Key == reqs[3].Key {
		t.Errorf("two logical calls share key %q, want distinct keys", reqs[0].Key)
	}
}

// TestEmptyAnswerIsRetried: a 200 or 201 without a body, where the call
// expects a JSON value, is a broken answer (a proxy on the way gave up, a
// connection cut mid-answer), not a success with zero values: the client
// tries again with the same Idempotency-Key and returns the real answer.
func TestEmptyAnswerIsRetried(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusOK) // no body
			return
		}
		writeJSON(w, 200, map[string]any{"task_id": "t1", "queue": "q", "status": "done", "version": 7})
	}}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	done := "done"
	task, err := c.UpdateTask(ctxTimeout(t, 10*time.Second), "acme", "t1", client.UpdateTaskRequest{Status: &done})
	if err != nil {
		t.Fatalf("UpdateTask: %v", err)
	}
	if task.TaskID != "t1" || task.Version != 7 {
		t.Fatalf("UpdateTask returned %+v, want the second (real) answer", task)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].Key == "" || reqs[1].Key != reqs[0].Key {
		t.Fatalf("got %d requests with keys %v, want 2 with the same key", len(reqs), reqs)
	}
}

func TestCallerIdempotencyKey(t *testing.T) {
	cases := []struct {
		name string
		ctx  context.Context
		opts []client.RequestOption
		want string
	}{
		{"option", context.Background(), []client.RequestOption{client.IdempotencyKey("opt-key")}, "opt-key"},
		{"context", client.WithIdempotencyKey(context.Background(), "ctx-key"), nil, "ctx-key"},
		{"option wins", client.WithIdempotencyKey(context.Background(), "ctx-key"),
			[]client.RequestOption{client.IdempotencyKey("opt-key")}, "opt-key"},
		// An empty key hides the one attached further up: the write gets
		// a fresh key of its own (want "" stands for any other key).
		{"empty hides", client.WithIdempotencyKey(client.WithIdempotencyKey(context.Background(), "ctx-key"), ""), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{reply: func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(200) }}
			c := newClient(t, serve(t, rec.ServeHTTP).URL)
			if _, err := c.PutTenant(tc.ctx, "acme", tc.opts...); err != nil {
				t.Fatal(err)
			}
			got := rec.requests()[0].Key
			if tc.want == "" && (got == "" || got == "ctx-key") {
				t.Errorf("got key %q, want a fresh one", got)
			} else if tc.want != "" && got != tc.want {
				t.Errorf("got key %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInvalidIdempotencyKeyIsNotSent(t *testing.T) {
	rec := &recorder{reply: tenantsOK}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	for _, key := range []string{"has space", strings.Repeat("k", 129), "tab\t"} {
		_, err := c.PutTenant(context.Background(), "acme", client.IdempotencyKey(key))
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("key %q: got %v, want ErrInvalidArgument", key, err)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestReadsCarryNoIdempotencyKey(t *testing.T) {
	rec := &recorder{reply: tenantsOK}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	if _, err := c.ListTenants(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := rec.requests()[0]
	if r.Key != "" {
		t.Errorf("GET carried Idempotency-Key %q, want none", r.Key)
	}
	if r.Auth != "Bearer tok" {
		t.Errorf("got Authorization %q, want %q", r.Auth, "Bearer tok")
	}
}

func TestNonRetryableErrorsAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 410, 413, 500, 502} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var hits atomic.Int64
			h := func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				writeError(w, status, "whatever", "no", nil)
			}
			c := newClient(t, serve(t, h).URL, serve(t, h).URL)
			_, err := c.CreateTask(context.Background(), "acme", client.CreateTaskRequest{Queue: "q"})
			var e *client.Error
			if !errors.As(err, &e) || e.Status != status {
				t.Fatalf("got %v, want *Error with status %d", err, status)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("got %d attempts, want 1", n)
			}
		})
	}
}

func TestRetryBudgetExhausted(t *testing.T) {
	cases := []struct {
		name      string
		endpoints func(t *testing.T) []string
		want      error
	}{
		{"all refused", func(t *testing.T) []string { return []string{closedEndpoint(t), closedEndpoint(t)} }, client.ErrUnavailable},
		{"all 503", func(t *testing.T) []string {
			return []string{serve(t, (&recorder{reply: unavailable}).ServeHTTP).URL}
		}, client.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClientCfg(t, client.Config{Endpoints: tc.endpoints(t), MaxRetry: 300 * time.Millisecond})
			start := time.Now()
			_, err := c.ListTenants(ctxTimeout(t, 30*time.Second))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "gave up after") {
				t.Errorf("error %q does not say it gave up", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v, want about the 300ms budget", d)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	cases := []struct {
		name       string
		retryAfter string
		maxRetry   time.Duration
		minElapsed time.Duration
		maxElapsed time.Duration
	}{
		// Retry-After caps the client's backoff (50 ms first) instead of
		// stretching it: a new leader usually serves well within a second.
		{"caps, never stretches, the backoff", "1", 10 * time.Second, 0, 900 * time.Millisecond},
		{"a long one within the budget still does not stretch it", "30", 2 * time.Second, 0, 900 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					w.Header().Set("Retry-After", tc.retryAfter)
					writeError(w, 503, "unavailable", "electing", nil)
					return
				}
				tenantsOK(w, r, n)
			}}
			c := newClientCfg(t, client.Config{Endpoints: []string{serve(t, rec.ServeHTTP).URL}, MaxRetry: tc.maxRetry})
			start := time.Now()
			if _, err := c.ListTenants(ctxTimeout(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < tc.minElapsed || d > tc.maxElapsed {
				t.Errorf("took %v, want between %v and %v", d, tc.minElapsed, tc.maxElapsed)
			}
		})
	}
}

func TestContextStopsRetries(t *testing.T) {
	t.Run("cancel between retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 2 {
				cancel()
			}
			unavailable(w, r, n)
		}}
		c := newClientCfg(t, client.Config{Endpoints: []string{serve(t, rec.ServeHTTP).URL}, MaxRetry: time.Minute})
		_, err := c.ListTenants(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("got %v, want it to wrap the last failure (unavailable)", err)
		}
		if n := len(rec.requests()); n != 2 {
			t.Errorf("got %d attempts, want 2 (none after cancel)", n)
		}
	})
	t.Run("cancel during an attempt does not fail over", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		stall := serve(t, func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		})
		other := &recorder{reply: tenantsOK}
		c := newClientCfg(t, client.Config{Endpoints: []string{stall.URL, serve(t, other.ServeHTTP).URL}, MaxRetry: time.Minute})
		_, err := c.ListTenants(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if n := len(other.requests()); n != 0 {
			t.Errorf("second endpoint got %d requests, want 0", n)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		c := newClientCfg(t, client.Config{Endpoints: []string{closedEndpoint(t)}, MaxRetry: time.Minute})
		start := time.Now()
		_, err := c.ListTenants(ctxTimeout(t, 300*time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v, want about 300ms", d)
		}
	})
}

func TestPinnedEndpointMakesOneAttempt(t *testing.T) {
	down := &recorder{reply: unavailable}
	other := &recorder{reply: tenantsOK}
	downURL := serve(t, down.ServeHTTP).URL
	c := newClient(t, serve(t, other.ServeHTTP).URL, downURL)
	_, err := c.ClusterAt(context.Background(), downURL)
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if n := len(down.requests()); n != 1 {
		t.Errorf("pinned endpoint got %d requests, want 1", n)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("other endpoint got %d requests, want 0", n)
	}
	if q := down.requests()[0].Query; q != "consistency=stale" {
		t.Errorf("got query %q, want consistency=stale", q)
	}
}

func TestConcurrentCalls(t *testing.T) {
	dead, _ := hangupEndpoint(t)
	live := &recorder{reply: tenantsOK}
	c := newClient(t, dead, serve(t, live.ServeHTTP).URL)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, err := c.ListTenants(ctxTimeout(t, 10*time.Second)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call: %v", err)
	}
}

// TestGoesStraightToTheLeader: an answer a follower forwarded names the
// leader (X-Baton-Leader); the next calls go to that endpoint first. A
// leader address that is not a configured endpoint changes nothing.
func TestGoesStraightToTheLeader(t *testing.T) {
	leader := &recorder{reply: tenantsOK}
	leaderSrv := serve(t, leader.ServeHTTP)
	leaderHost := strings.TrimPrefix(leaderSrv.URL, "http://")
	follower := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-Baton-Leader", leaderHost)
		tenantsOK(w, r, n)
	}}
	c := newClient(t, serve(t, follower.ServeHTTP).URL, leaderSrv.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 3 {
		if _, err := c.ListTenants(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := len(follower.requests()); n != 1 {
		t.Errorf("follower got %d requests, want 1 (the first call only)", n)
	}
	if n := len(leader.requests()); n != 2 {
		t.Errorf("leader got %d requests, want 2", n)
	}

	stranger := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-Baton-Leader", "10.255.255.1:7001") // published, but not ours to use
		tenantsOK(w, r, n)
	}}
	other := &recorder{reply: tenantsOK}
	c = newClient(t, serve(t, stranger.ServeHTTP).URL, serve(t, other.ServeHTTP).URL)
	for i := range 2 {
		if _, err := c.ListTenants(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := len(stranger.requests()); n != 2 {
		t.Errorf("endpoint naming an unknown leader got %d requests, want 2 (kept)", n)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("other endpoint got %d requests, want 0", n)
	}
}

// TestOutcomeUnknown: a 504 outcome_unknown (the write was proposed, its
// outcome is not known) is retried only by a call that carries what makes
// a retry safe, a write's Idempotency-Key or session place, with the same
// key; any other call returns it at once.
func TestOutcomeUnknown(t *testing.T) {
	outcomeUnknown := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "0")
		writeError(w, http.StatusGatewayTimeout, "outcome_unknown", "timed out after proposing", nil)
	}
	cases := []struct {
		name     string
		call     func(ctx context.Context, c *client.Client) error
		wantReqs int
		wantErr  bool
	}{
		{"keyed write retried", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q"})
			return err
		}, 2, false},
		{"read not retried", func(ctx context.Context, c *client.Client) error {
			_, err := c.ListTenants(ctx)
			return err
		}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 || r.Method == http.MethodGet {
					outcomeUnknown(w, r)
					return
				}
				writeJSON(w, 201, map[string]any{"task_id": "t1", "queue": "q"})
			}}
			c := newClient(t, serve(t, rec.ServeHTTP).URL)
			err := tc.call(ctxTimeout(t, 10*time.Second), c)
			var e *client.Error
			switch {
			case tc.wantErr && (!errors.As(err, &e) || e.Code != "outcome_unknown" || e.Status != http.StatusGatewayTimeout):
				t.Errorf("got err %v, want a 504 outcome_unknown *Error", err)
			case !tc.wantErr && err != nil:
				t.Errorf("got err %v, want success on the retry", err)
			}
			reqs := rec.requests()
			if len(reqs) != tc.wantReqs {
				t.Fatalf("got %d requests, want %d", len(reqs), tc.wantReqs)
			}
			if reqs[0].Key != reqs[len(reqs)-1].Key {
				t.Errorf("retry key %q, want the first attempt's %q", reqs[len(reqs)-1].Key, reqs[0].Key)
			}
		})
	}
}

// TestDialRetry: while no endpoint accepts a connection, a call gives up
// after DialRetry instead of MaxRetry; once one has (a node answering 503),
// MaxRetry applies and the call goes on to succeed.
func TestDialRetry(t *testing.T) {
	t.Run("all refused", func(t *testing.T) {
		c := newClientCfg(t, client.Config{Endpoints: []string{closedEndpoint(t), closedEndpoint(t)},
			DialRetry: 200 * time.Millisecond, MaxRetry: time.Minute})
		start := time.Now()
		_, err := c.ListTenants(ctxTimeout(t, 2*time.Minute))
		if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "no endpoint accepted a connection") {
			t.Errorf("got %v, want ErrUnavailable saying no endpoint accepted a connection", err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("gave up after %v, want about DialRetry, far below MaxRetry", took)
		}
	})
	t.Run("one accepts", func(t *testing.T) {
		rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
			if n <= 3 {
				unavailable(w, r, n)
				return
			}
			tenantsOK(w, r, n)
		}}
		c := newClientCfg(t, client.Config{Endpoints: []string{closedEndpoint(t), serve(t, rec.ServeHTTP).URL},
			DialRetry: time.Nanosecond, MaxRetry: time.Minute})
		if _, err := c.ListTenants(ctxTimeout(t, 2*time.Minute)); err != nil {
			t.Errorf("got %v, want success once the answering node is ready", err)
		}
	})
}
