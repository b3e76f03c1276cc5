package client_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
)

// The tests here run against the package's real batond (TestMain): faults
// are a refused port, a listener that hangs up or never answers, the node
// without a leader (a real 503), and a recording proxy in front of the
// node that sends chosen attempts there or cuts them.

func TestFailoverToLiveEndpoint(t *testing.T) {
	cases := []struct {
		name string
		dead func(t *testing.T) string
	}{
		{"connection refused", func(t *testing.T) string { return clustertest.ClosedEndpoint(t) }},
		{"connection closed", func(t *testing.T) string { u, _ := clustertest.HangupEndpoint(t); return u }},
		{"attempt timeout", func(t *testing.T) string { u, _ := clustertest.StallEndpoint(t); return u }},
		{"503", func(t *testing.T) string { return env.Leaderless }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := proxy(t, nil)
			c := newClientCfg(t, client.Config{Endpoints: []string{tc.dead(t), live.URL}, Token: env.Token,
				Timeout: 200 * time.Millisecond, MaxRetry: 5 * time.Second})
			got, err := c.ListTenants(ctxTimeout(t, 10*time.Second))
			if err != nil {
				t.Fatalf("ListTenants: %v", err)
			}
			if !slices.Contains(got, "acme") {
				t.Errorf("got tenants %v, want acme among them", got)
			}
			if n := live.Count(); n != 1 {
				t.Errorf("live endpoint got %d requests, want 1", n)
			}
		})
	}
}

func TestRemembersLastGoodEndpoint(t *testing.T) {
	dead, accepted := clustertest.HangupEndpoint(t)
	live := proxy(t, nil)
	c := newClient(t, dead, live.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 3 {
		if _, err := c.ListTenants(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("dead endpoint saw %d connections, want 1 (only the first call tries it)", n)
	}
	if n := live.Count(); n != 3 {
		t.Errorf("live endpoint got %d requests, want 3", n)
	}
}

func TestRetryOn503ReusesIdempotencyKey(t *testing.T) {
	p := proxy(t, func(n int, _ *http.Request) clustertest.Hop {
		if n%3 != 0 { // two 503s, then success, for each logical call
			return leaderless()
		}
		return clustertest.Hop{}
	})
	c := newClient(t, p.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	for range 2 {
		if _, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "retry503"}); err != nil {
			t.Fatalf("CreateTask: %v", err)
		}
	}
	reqs := p.Requests()
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
// tries again with the same Idempotency-Key and returns the real answer,
// which the node replays: the write is applied once.
func TestEmptyAnswerIsRetried(t *testing.T) {
	queue := "empty-" + uuid.NewString()
	p := proxy(t, func(n int, _ *http.Request) clustertest.Hop {
		if n == 1 {
			return clustertest.Hop{Fault: clustertest.DropBody} // applied, answered without a body
		}
		return clustertest.Hop{}
	})
	c := newClient(t, p.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	task, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	if task.TaskID == "" || task.Queue != queue || task.Version == 0 {
		t.Fatalf("CreateTask returned %+v, want the second (real) answer", task)
	}
	reqs := p.Requests()
	if len(reqs) != 2 || reqs[0].Key == "" || reqs[1].Key != reqs[0].Key {
		t.Fatalf("got %d requests with keys %v, want 2 with the same key", len(reqs), keys(reqs))
	}
	list, err := nodeClient(t).ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID {
		t.Errorf("queue holds %v, want the one task %s", taskIDs(list.Tasks), task.TaskID)
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
			p := proxy(t, nil)
			c := newClient(t, p.URL)
			if _, err := c.PutTenant(tc.ctx, "acme", tc.opts...); err != nil {
				t.Fatal(err)
			}
			got := p.Requests()[0].Key
			if tc.want == "" && (got == "" || got == "ctx-key") {
				t.Errorf("got key %q, want a fresh one", got)
			} else if tc.want != "" && got != tc.want {
				t.Errorf("got key %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInvalidIdempotencyKeyIsNotSent(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	for _, key := range []string{"has space", strings.Repeat("k", 129), "tab\t"} {
		_, err := c.PutTenant(context.Background(), "acme", client.IdempotencyKey(key))
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("key %q: got %v, want ErrInvalidArgument", key, err)
		}
	}
	if n := p.Count(); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestReadsCarryNoIdempotencyKey(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	if _, err := c.ListTenants(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := p.Requests()[0]
	if r.Key != "" {
		t.Errorf("GET carried Idempotency-Key %q, want none", r.Key)
	}
	if r.Auth != "Bearer "+env.Token {
		t.Errorf("got Authorization %q, want the client's token", r.Auth)
	}
}

func TestNonRetryableErrorsAreNotRetried(t *testing.T) {
	ctx := ctxTimeout(t, 30*time.Second)
	admin := nodeClient(t)
	existing, err := admin.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "nonretryable"})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := admin.CreatePrincipal(ctx, "acme", "reader-"+uuid.NewString()[:8],
		[]client.Grant{{Resource: "kv", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		status int
		token  string
		call   func(ctx context.Context, c *client.Client) error
	}{
		{400, "", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "not a name"})
			return err
		}},
		{401, "not-a-token", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q"})
			return err
		}},
		{403, reader.Token, func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q"})
			return err
		}},
		{404, "", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "no-such-tenant", client.CreateTaskRequest{Queue: "q"})
			return err
		}},
		{409, "", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: existing.TaskID, Queue: "other"})
			return err
		}},
		{413, "", func(ctx context.Context, c *client.Client) error {
			big, _ := json.Marshal(strings.Repeat("x", 16<<20))
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "q", Payload: big})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			a, b := proxy(t, nil), proxy(t, nil)
			c := newClientCfg(t, client.Config{Endpoints: []string{a.URL, b.URL}, Token: cmp.Or(tc.token, env.Token),
				NoSession: true, Timeout: 10 * time.Second, MaxRetry: 5 * time.Second})
			err := tc.call(ctx, c)
			var e *client.Error
			if !errors.As(err, &e) || e.Status != tc.status {
				t.Fatalf("got %v, want *Error with status %d", err, tc.status)
			}
			if n := a.Count() + b.Count(); n != 1 {
				t.Errorf("got %d attempts, want 1", n)
			}
		})
	}
	// A real batond answers 410 only to a watch resumed from compacted
	// history, and 500 or 502 not at all on cue (a server bug, a gateway):
	// stubs stand in for them.
	for _, status := range []int{410, 500, 502} {
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
		{"all refused", func(t *testing.T) []string {
			return []string{clustertest.ClosedEndpoint(t), clustertest.ClosedEndpoint(t)}
		}, client.ErrUnavailable},
		{"all 503", func(t *testing.T) []string { return []string{env.Leaderless} }, client.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClientCfg(t, client.Config{Endpoints: tc.endpoints(t), Token: env.Token, MaxRetry: 300 * time.Millisecond})
			ctx := ctxTimeout(t, time.Minute)
			_, err := c.ListTenants(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// The budget ended the retries, not the caller's context.
			if !strings.Contains(err.Error(), "gave up after") {
				t.Errorf("error %q does not say it gave up", err)
			}
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v with the caller's context ended, want the budget to end the retries", err)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	// Retry-After caps the client's backoff (50 ms first) instead of
	// stretching it: a new leader usually serves well within a second. The
	// node without a leader answers the first attempt 503 with
	// Retry-After: 1, longer than the whole budget: a client that waited
	// it would give up; one that backs off its own 50 ms retries and gets
	// the answer.
	p := proxy(t, func(n int, _ *http.Request) clustertest.Hop {
		if n == 1 {
			return leaderless()
		}
		return clustertest.Hop{}
	})
	c := newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, MaxRetry: 900 * time.Millisecond})
	if _, err := c.ListTenants(ctxTimeout(t, 30*time.Second)); err != nil {
		t.Fatalf("got %v, want the second attempt's answer", err)
	}
	if reqs := p.Requests(); len(reqs) != 2 || reqs[0].Status != http.StatusServiceUnavailable || reqs[1].Status != http.StatusOK {
		t.Errorf("got %d attempts (%+v), want a 503 then a 200", len(reqs), reqs)
	}
}

func TestContextStopsRetries(t *testing.T) {
	t.Run("cancel between retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p := clustertest.NewProxy(t, env.Leaderless, func(n int, _ *http.Request) clustertest.Hop {
			if n == 2 {
				cancel()
			}
			return clustertest.Hop{}
		})
		c := newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, MaxRetry: time.Minute})
		_, err := c.ListTenants(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("got %v, want it to wrap the last failure (unavailable)", err)
		}
		if n := p.Count(); n != 2 {
			t.Errorf("got %d attempts, want 2 (none after cancel)", n)
		}
	})
	t.Run("cancel during an attempt does not fail over", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stall := proxy(t, func(int, *http.Request) clustertest.Hop {
			cancel()
			return clustertest.Hop{Fault: clustertest.Stall}
		})
		other := proxy(t, nil)
		c := newClientCfg(t, client.Config{Endpoints: []string{stall.URL, other.URL}, Token: env.Token, MaxRetry: time.Minute})
		_, err := c.ListTenants(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if n := other.Count(); n != 0 {
			t.Errorf("second endpoint got %d requests, want 0", n)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		c := newClientCfg(t, client.Config{Endpoints: []string{clustertest.ClosedEndpoint(t)}, MaxRetry: time.Minute})
		ctx := ctxTimeout(t, 300*time.Millisecond)
		_, err := c.ListTenants(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
			t.Fatalf("got %v (context: %v), want context.DeadlineExceeded once the context ended", err, ctx.Err())
		}
	})
}

func TestPinnedEndpointMakesOneAttempt(t *testing.T) {
	down := clustertest.NewProxy(t, env.Leaderless, func(int, *http.Request) clustertest.Hop {
		return clustertest.Hop{Fault: clustertest.Hangup}
	})
	other := proxy(t, nil)
	c := newClient(t, other.URL, down.URL)
	_, err := c.ClusterAt(context.Background(), down.URL)
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if n := down.Count(); n != 1 {
		t.Errorf("pinned endpoint got %d requests, want 1", n)
	}
	if n := other.Count(); n != 0 {
		t.Errorf("other endpoint got %d requests, want 0", n)
	}
	if q := down.Requests()[0].Query; q != "consistency=stale" {
		t.Errorf("got query %q, want consistency=stale", q)
	}
}

func TestConcurrentCalls(t *testing.T) {
	dead, _ := clustertest.HangupEndpoint(t)
	c := newClient(t, dead, proxy(t, nil).URL)
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
// leader address that is not a configured endpoint changes nothing. The
// cluster is the test's own, of two real nodes, each behind a proxy that
// counts its requests; the first proxy publishes the leader's address as
// its own (MapLeader), as a load balancer would, the second does not.
func TestGoesStraightToTheLeader(t *testing.T) {
	cl := clustertest.StartCluster(t, env, 2)
	ctx := ctxTimeout(t, 30*time.Second)
	lead, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	foll := 1 - lead
	leader := clustertest.NewProxy(t, cl.URL(lead), nil)
	follower := clustertest.NewProxy(t, cl.URL(foll), nil)
	follower.MapLeader(cl.HTTPAddr(lead), leader.Host)
	c := newClient(t, follower.URL, leader.URL)
	for i := range 3 {
		if _, err := c.PutTenant(ctx, "acme"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := follower.Count(); n != 1 {
		t.Errorf("follower got %d requests, want 1 (the first call only)", n)
	}
	if n := leader.Count(); n != 2 {
		t.Errorf("leader got %d requests, want 2", n)
	}

	// This follower's answers name the leader by its own address, which
	// is published but not one of this client's endpoints.
	stranger := clustertest.NewProxy(t, cl.URL(foll), nil)
	other := clustertest.NewProxy(t, cl.URL(lead), nil)
	c = newClient(t, stranger.URL, other.URL)
	for i := range 2 {
		if _, err := c.PutTenant(ctx, "acme"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	reqs := stranger.Requests()
	if len(reqs) != 2 {
		t.Errorf("endpoint naming an unknown leader got %d requests, want 2 (kept)", len(reqs))
	}
	if n := other.Count(); n != 0 {
		t.Errorf("other endpoint got %d requests, want 0", n)
	}
}

// TestOutcomeUnknown: a 504 outcome_unknown (the write was proposed, its
// outcome is not known) is retried only by a call that carries what makes
// a retry safe, a write's Idempotency-Key or session place, with the same
// key; any other call returns it at once. The real 504 comes from a leader
// of two nodes whose follower is paused: it proposes the write, loses its
// leadership while committing it, and cannot tell the outcome. The retry,
// after the follower is resumed, finds the write applied once.
func TestOutcomeUnknown(t *testing.T) {
	t.Run("keyed write retried", func(t *testing.T) {
		cl := clustertest.StartCluster(t, env, 2)
		ctx := ctxTimeout(t, 30*time.Second)
		lead, err := cl.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		foll := 1 - lead
		if err := cl.Pause(foll); err != nil {
			t.Fatal(err)
		}
		p := clustertest.NewProxy(t, cl.URL(lead), func(n int, _ *http.Request) clustertest.Hop {
			if n == 2 {
				if err := cl.Resume(foll); err != nil {
					t.Error(err)
				}
			}
			return clustertest.Hop{}
		})
		// The node that lost its leadership may hold or refuse attempts
		// until the next election: the retry budget covers it.
		c := newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, NoSession: true,
			Timeout: 10 * time.Second, MaxRetry: 20 * time.Second})
		queue := "unknown-" + uuid.NewString()
		task, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue})
		if err != nil {
			t.Fatalf("got err %v, want success on the retry", err)
		}
		reqs := p.Requests()
		if len(reqs) < 2 || reqs[0].Status != http.StatusGatewayTimeout {
			t.Fatalf("got %d requests, the first answered %d, want a 504 and a retry", len(reqs), reqs[0].Status)
		}
		for i, r := range reqs {
			if r.Key != reqs[0].Key {
				t.Errorf("attempt %d key %q, want the first attempt's %q", i, r.Key, reqs[0].Key)
			}
		}
		list, err := newClient(t, cl.URL(lead), cl.URL(foll)).ListTasks(ctx, "acme", client.ListTasksOptions{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID {
			t.Errorf("queue holds %v, want the one task %s", taskIDs(list.Tasks), task.TaskID)
		}
	})
	// A stub: batond never answers a read outcome_unknown, so only a stub
	// shows that a call without a key returns it at once.
	t.Run("read not retried", func(t *testing.T) {
		rec := &recorder{reply: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "0")
			writeError(w, http.StatusGatewayTimeout, "outcome_unknown", "timed out after proposing", nil)
		}}
		c := newClient(t, serve(t, rec.ServeHTTP).URL)
		_, err := c.ListTenants(ctxTimeout(t, 10*time.Second))
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "outcome_unknown" || e.Status != http.StatusGatewayTimeout {
			t.Errorf("got err %v, want a 504 outcome_unknown *Error", err)
		}
		if n := len(rec.requests()); n != 1 {
			t.Fatalf("got %d requests, want 1", n)
		}
	})
}

// TestDialRetry: while no endpoint accepts a connection, a call gives up
// after DialRetry instead of MaxRetry; once one has (a node answering 503),
// MaxRetry applies and the call goes on to succeed.
func TestDialRetry(t *testing.T) {
	t.Run("all refused", func(t *testing.T) {
		c := newClientCfg(t, client.Config{Endpoints: []string{clustertest.ClosedEndpoint(t), clustertest.ClosedEndpoint(t)},
			DialRetry: 200 * time.Millisecond, MaxRetry: time.Minute})
		ctx := ctxTimeout(t, 2*time.Minute)
		_, err := c.ListTenants(ctx)
		// Ended by DialRetry, which the error names, not by MaxRetry.
		if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "no endpoint accepted a connection within 200ms") ||
			ctx.Err() != nil {
			t.Errorf("got %v, want ErrUnavailable saying no endpoint accepted a connection within 200ms", err)
		}
	})
	t.Run("one accepts", func(t *testing.T) {
		p := proxy(t, func(n int, _ *http.Request) clustertest.Hop {
			if n <= 3 {
				return leaderless()
			}
			return clustertest.Hop{}
		})
		c := newClientCfg(t, client.Config{Endpoints: []string{clustertest.ClosedEndpoint(t), p.URL}, Token: env.Token,
			DialRetry: time.Nanosecond, MaxRetry: time.Minute})
		if _, err := c.ListTenants(ctxTimeout(t, 2*time.Minute)); err != nil {
			t.Errorf("got %v, want success once the answering node is ready", err)
		}
	})
}

func keys(reqs []clustertest.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Key
	}
	return out
}

func taskIDs(tasks []client.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.TaskID
	}
	return out
}
