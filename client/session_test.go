package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
)

// The session tests run against the package's node through the recording
// proxy, which reads each write's session headers. A real 503 comes from
// the node without a leader; a session the node does not know, from a
// second real node (a cluster of the test's own) that opened it.

type sessionHeaders struct{ Session, Seq, Ack, Key string }

// sessionRoute sends the session opens and write attempts where opens and
// writes say (numbered from 1 each; an empty hop is the proxy's node).
func sessionRoute(opens, writes func(n int) clustertest.Hop) func(int, *http.Request) clustertest.Hop {
	var o, w atomic.Int64
	return func(_ int, r *http.Request) clustertest.Hop {
		if r.URL.Path == "/v1/sessions" {
			return opens(int(o.Add(1)))
		}
		return writes(int(w.Add(1)))
	}
}

// seen splits what the proxy saw into session opens and writes.
func seen(p *clustertest.Proxy) (opened int, writes []sessionHeaders) {
	for _, r := range p.Requests() {
		if r.Path == "/v1/sessions" {
			opened++
			continue
		}
		writes = append(writes, sessionHeaders{r.Header.Get("X-Baton-Session"), r.Header.Get("X-Baton-Seq"),
			r.Header.Get("X-Baton-Ack"), r.Key})
	}
	return opened, writes
}

// sessionClient is a client with sessions (newClient has none).
func sessionClient(t *testing.T, endpoint string) *client.Client {
	return newClientCfg(t, client.Config{Endpoints: []string{endpoint}, Token: env.Token,
		Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
}

func putKV(c *client.Client, key string) error {
	_, err := c.PutKV(context.Background(), "acme", "ns", key, client.PutKVRequest{Value: []byte(`1`)})
	return err
}

func anywhere(int) clustertest.Hop { return clustertest.Hop{} }

// TestSessionNumbersWrites: one session for the client; writes numbered
// from 1; a retry (after a 503) sends the same number; the ack is the
// lowest number still in flight; no Idempotency-Key is spent per write.
func TestSessionNumbersWrites(t *testing.T) {
	p := proxy(t, sessionRoute(anywhere, func(n int) clustertest.Hop {
		if n == 2 {
			return leaderless()
		}
		return clustertest.Hop{}
	}))
	c := sessionClient(t, p.URL)
	for _, k := range []string{"a", "b", "c"} {
		if err := putKV(c, k); err != nil {
			t.Fatal(err)
		}
	}
	opened, writes := seen(p)
	if opened != 1 {
		t.Errorf("sessions opened: %d, want 1", opened)
	}
	if len(writes) != 4 || writes[0].Session == "" {
		t.Fatalf("writes: %+v, want 4 in one session", writes)
	}
	id := writes[0].Session
	want := []sessionHeaders{{id, "1", "1", ""}, {id, "2", "2", ""}, {id, "2", "2", ""}, {id, "3", "3", ""}}
	for i := range want {
		if writes[i] != want[i] {
			t.Errorf("attempt %d: %+v, want %+v", i+1, writes[i], want[i])
		}
	}
}

// TestSessionGoneOnFirstAttempt: a first attempt refused because the
// session is gone applied nothing, so the write goes again in a new
// session; a later attempt refused so is the caller's
// ErrIdempotencyExpired (the write may have been applied). The session
// that is gone is one another node opened.
func TestSessionGoneOnFirstAttempt(t *testing.T) {
	other := clustertest.StartCluster(t, env, 1)
	onOther := func(n int) clustertest.Hop {
		if n == 1 {
			return clustertest.Hop{To: other.URL(0)}
		}
		return clustertest.Hop{}
	}
	p := proxy(t, sessionRoute(onOther, anywhere))
	if err := putKV(sessionClient(t, p.URL), "a"); err != nil {
		t.Fatalf("write whose first attempt found the session gone: %v", err)
	}
	opened, writes := seen(p)
	if opened != 2 || len(writes) != 2 || writes[1].Session == writes[0].Session || writes[1].Seq != "1" {
		t.Errorf("opened %d, writes %+v; want a second session and the write as its first", opened, writes)
	}

	p2 := proxy(t, sessionRoute(onOther, func(n int) clustertest.Hop {
		if n == 1 {
			return leaderless()
		}
		return clustertest.Hop{}
	}))
	err := putKV(sessionClient(t, p2.URL), "a")
	if !errors.Is(err, client.ErrIdempotencyExpired) {
		t.Errorf("retry refused for its session: got %v, want ErrIdempotencyExpired", err)
	}
	if opened, _ := seen(p2); opened != 1 {
		t.Errorf("sessions opened: %d, want 1 (a retry is never moved to a new session)", opened)
	}
}

// TestNoSessionsFallsBackToKeys: against a server without sessions every
// write carries a random Idempotency-Key, the same on its retries. A stub:
// such a server is a batond from before sessions, not one of this tree.
func TestNoSessionsFallsBackToKeys(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "no leader", nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": "ns", "key": "k", "value": 1, "version": n})
	}}
	srv := serve(t, rec.ServeHTTP)
	c := newClientCfg(t, client.Config{Endpoints: []string{srv.URL}, Token: env.Token,
		Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
	if err := putKV(c, "a"); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].Key == "" || reqs[0].Key != reqs[1].Key {
		t.Errorf("requests %+v: want two attempts with one random key", reqs)
	}
}

// TestSessionOpenOutlivesTheOpenersContext: writes waiting for another
// caller's session open do not inherit that caller's context ending: the
// first write's open stalls until its 1 s context runs out, and the
// write that waited for it (with a context of its own, still live) opens
// a session itself and is applied. Before, it failed with the first
// caller's "context deadline exceeded".
func TestSessionOpenOutlivesTheOpenersContext(t *testing.T) {
	p := proxy(t, sessionRoute(func(n int) clustertest.Hop {
		if n == 1 {
			return clustertest.Hop{Fault: clustertest.Stall}
		}
		return clustertest.Hop{}
	}, anywhere))
	c := sessionClient(t, p.URL)
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := c.PutKV(short, "acme", "ns", "opener", client.PutKVRequest{Value: []byte(`1`)})
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for p.Count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first session open never reached the proxy")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, bounded by deadline
	}
	if _, err := c.PutKV(ctxTimeout(t, 20*time.Second), "acme", "ns", "waiter", client.PutKVRequest{Value: []byte(`1`)}); err != nil {
		t.Fatalf("the write that waited for the open: %v", err)
	}
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the opener's write: %v, want its own context.DeadlineExceeded", err)
	}
	if opened, _ := seen(p); opened != 2 {
		t.Errorf("sessions opened: %d, want 2 (the stalled one, then the waiter's)", opened)
	}
}
