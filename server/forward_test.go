package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// electingCluster is a follower whose view of the leader follows a script:
// each call of Leader takes the next entry, and the last one stays.
type electingCluster struct {
	fakeCluster
	mu          sync.Mutex
	leaders     []string
	addrs       map[string]string
	lastContact time.Time
}

func (c *electingCluster) IsLeader() bool { return false }
func (c *electingCluster) Leader() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.leaders[0]
	if len(c.leaders) > 1 {
		c.leaders = c.leaders[1:]
	}
	return l, ""
}
func (c *electingCluster) HTTPAddrOf(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[id]
}
func (c *electingCluster) LastLeaderContact() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastContact
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestForwardHoldsThroughElection: a write that reaches a follower while its
// leader is dead (connection refused) and then while no leader is known is
// held and delivered, body intact, to the next leader, instead of 503.
func TestForwardHoldsThroughElection(t *testing.T) {
	var got []string
	var mu sync.Mutex
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get(headerForwarded)+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer next.Close()

	// The dead leader (twice: it is tried, then seen again), no leader for
	// a few polls (the election), then n3.
	c := &electingCluster{
		fakeCluster: fakeCluster{f: fsm.New()},
		leaders:     []string{"dead", "dead", "", "", "", "n3"},
		addrs:       map[string]string{"dead": closedAddr(t), "n3": strings.TrimPrefix(next.URL, "http://")},
		lastContact: time.Now(),
	}
	fw := newForwarder(t.Context(), c, c.f, slog.New(slog.DiscardHandler), 10*time.Second)
	defer fw.close()

	req := httptest.NewRequest("POST", "/v1/tenants/acme/tasks", strings.NewReader(`{"id":"t1"}`))
	rec := httptest.NewRecorder()
	if !fw.forward(rec, req, 1<<20, 10*time.Second) {
		t.Fatal("forward reported that this node leads")
	}
	if rec.Code != http.StatusCreated {
		t.Fatalf("forwarded write: got %d %s, want 201 from the next leader", rec.Code, rec.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `n1 {"id":"t1"}` {
		t.Fatalf("the next leader received %q, want one request with the whole body", got)
	}
}

// TestForwardNoHoldWhenCutOff: a follower that has not heard from a leader
// for a while answers 503 at once, so that clients move to another node.
func TestForwardNoHoldWhenCutOff(t *testing.T) {
	c := &electingCluster{
		fakeCluster: fakeCluster{f: fsm.New()},
		leaders:     []string{""},
		lastContact: time.Now().Add(-time.Minute),
	}
	fw := newForwarder(t.Context(), c, c.f, slog.New(slog.DiscardHandler), 10*time.Second)
	defer fw.close()
	start := time.Now()
	rec := httptest.NewRecorder()
	fw.forward(rec, httptest.NewRequest("POST", "/v1/tenants/acme/tasks", strings.NewReader(`{}`)), 1<<20, 10*time.Second)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no leader") {
		t.Fatalf("got %d %s, want 503 no leader", rec.Code, rec.Body)
	}
	if d := time.Since(start); d > holdAfterLeads/2 {
		t.Errorf("answered after %v; a cut-off node should not hold requests", d)
	}
}

// TestForwardPeerHeader: a follower names in headerPeer only the member
// its peerOf vouched for, and drops whatever a client put there.
func TestForwardPeerHeader(t *testing.T) {
	var got []string
	var mu sync.Mutex
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(headerPeer))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer leader.Close()
	c := &electingCluster{
		fakeCluster: fakeCluster{f: fsm.New()},
		leaders:     []string{"n3"},
		addrs:       map[string]string{"n3": strings.TrimPrefix(leader.URL, "http://")},
		lastContact: time.Now(),
	}
	fw := newForwarder(t.Context(), c, c.f, slog.New(slog.DiscardHandler), 10*time.Second)
	defer fw.close()
	for _, vouch := range []string{"", "n2"} {
		fw.peerOf = func(*http.Request) string { return vouch }
		req := httptest.NewRequest("POST", "/v1/cluster/members", strings.NewReader(`{}`))
		req.Header.Set(headerPeer, "n9") // a client's claim
		rec := httptest.NewRecorder()
		if !fw.forward(rec, req, 1<<20, 10*time.Second) || rec.Code != http.StatusOK {
			t.Fatalf("forward: %d %s", rec.Code, rec.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "" || got[1] != "n2" {
		t.Fatalf("the leader saw %s %q, want \"\" then \"n2\"", headerPeer, got)
	}
}

// stopAnswering makes node i's HTTP port behave as a stopped (SIGSTOP) or
// paused process's does: the kernel still accepts connections and takes
// the requests' bytes, and nothing ever answers. Its Raft goes on leading.
// Each connection that delivers bytes is reported on the channel returned.
func stopAnswering(t *testing.T, c *testCluster, i int) <-chan struct{} {
	t.Helper()
	tn := c.nodes[i]
	tn.hs.Close()
	ln, err := net.Listen("tcp", tn.httpAddr)
	if err != nil {
		t.Fatalf("listening on %s's HTTP address: %v", tn.id, err)
	}
	got := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				buf := make([]byte, 4096)
				if _, err := conn.Read(buf); err == nil {
					got <- struct{}{}
				}
				_, _ = io.Copy(io.Discard, conn)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, conn := range conns {
			conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return got
}

// forwardAnswer is what a client got from a request to a follower.
type forwardAnswer struct {
	code int
	body []byte
	err  error
}

// silentLeader starts a three-node cluster, writes ns/k = 1 through a
// follower, then stops the leader's HTTP port from answering
// (stopAnswering) and sends a PUT (ns/k = 2) and a GET of ns/k to the
// follower, which forwards both there. It returns once the leader's port
// has received both, with the cluster, the leader's index and the two
// answers to come (each within ctx).
func silentLeader(t *testing.T, ctx context.Context) (c *testCluster, leader int, write, read <-chan forwardAnswer) {
	t.Helper()
	c = newCluster(t, 3)
	l := c.WaitForLeader(t)
	f := c.Followers(l)[0]
	if code, _, body := c.do(t, l, "PUT", "/v1/tenants/acme", nil, adminAuth()); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", code, body)
	}
	if code, _, body := c.do(t, f, "PUT", "/v1/tenants/acme/kv/ns/k", `{"value": 1}`, adminAuth()); code != http.StatusOK {
		t.Fatalf("write through the follower: %d %s", code, body)
	}
	c.WaitConverged(t)
	received := stopAnswering(t, c, l)
	// Connections kept alive from before point at the closed server.
	c.nodes[f].srv.proxy.transport.CloseIdleConnections()
	send := func(method, body string) <-chan forwardAnswer {
		out := make(chan forwardAnswer, 1)
		go func() {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequestWithContext(ctx, method, "http://"+c.nodes[f].httpAddr+"/v1/tenants/acme/kv/ns/k", rd)
			if err != nil {
				out <- forwardAnswer{err: err}
				return
			}
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
			resp, err := c.client.Do(req)
			if err != nil {
				out <- forwardAnswer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- forwardAnswer{code: resp.StatusCode, body: b, err: err}
		}()
		return out
	}
	write, read = send("PUT", `{"value": 2}`), send("GET", "")
	for range 2 {
		select {
		case <-received:
		case <-ctx.Done():
			t.Fatal("the follower did not forward both requests to the leader")
		}
	}
	return c, l, write, read
}

// TestForwardLeaderStopsBeforeAnswering: a follower forwards a write and a
// linearizable read to a leader whose process stopped answering (its port
// still accepts them); the leader's Raft then stops too and the others
// elect a new leader. The follower answers both without waiting for its
// client to give up: the write, which reached the old leader, 504
// outcome_unknown; the read, sent again to the new leader, 200. Before
// the follower watched its leader during forwarding, both waited until the
// client's deadline.
func TestForwardLeaderStopsBeforeAnswering(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c, l, write, read := silentLeader(t, ctx)
	c.StopNode(l)

	w := <-write
	switch {
	case w.err != nil:
		t.Errorf("write: no answer (%v); the follower waited on a leader that had stopped", w.err)
	case w.code != http.StatusGatewayTimeout || errorCode(w.body) != codeOutcomeUnknown:
		t.Errorf("write: got %d %s, want 504 outcome_unknown (it reached the old leader)", w.code, w.body)
	}
	r := <-read
	switch {
	case r.err != nil:
		t.Errorf("read: no answer (%v); the follower waited on a leader that had stopped", r.err)
	case r.code != http.StatusOK || !strings.Contains(string(r.body), `"value":1`):
		t.Errorf("read: got %d %s, want 200 with the value acknowledged before, from the new leader", r.code, r.body)
	}
}

// TestForwardLeaderNeverAnswers: a leader whose Raft goes on leading but
// whose HTTP port never answers is given up on once the leader's own
// request timeout (and answerMargin) has passed without an answer: the
// write it was sent is 504 outcome_unknown, the read 503. Before, both
// waited until the client's deadline.
func TestForwardLeaderNeverAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	_, _, write, read := silentLeader(t, ctx)
	w := <-write
	switch {
	case w.err != nil:
		t.Errorf("write: no answer (%v)", w.err)
	case w.code != http.StatusGatewayTimeout || errorCode(w.body) != codeOutcomeUnknown:
		t.Errorf("write: got %d %s, want 504 outcome_unknown", w.code, w.body)
	}
	r := <-read
	switch {
	case r.err != nil:
		t.Errorf("read: no answer (%v)", r.err)
	case r.code != http.StatusServiceUnavailable || errorCode(r.body) != codeUnavailable:
		t.Errorf("read: got %d %s, want 503 unavailable", r.code, r.body)
	}
}

// TestForwardRefusalNamesLeader: a node that refuses a request forwarded
// to it (it is not the leader) names the leader its Raft knows in
// X-Baton-Leader, and the follower that forwarded it relays that hint
// instead of naming the node that refused.
func TestForwardRefusalNamesLeader(t *testing.T) {
	stale := &electingCluster{fakeCluster: fakeCluster{f: fsm.New()}, leaders: []string{"n3"},
		addrs: map[string]string{"n3": "127.0.0.1:7003"}, lastContact: time.Now()}
	fw := newForwarder(t.Context(), stale, stale.f, slog.New(slog.DiscardHandler), 10*time.Second)
	defer fw.close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw.forward(w, r, 1<<20, 10*time.Second)
	}))
	defer refusing.Close()

	c := &electingCluster{fakeCluster: fakeCluster{f: fsm.New()}, leaders: []string{"n2"},
		addrs: map[string]string{"n2": strings.TrimPrefix(refusing.URL, "http://")}, lastContact: time.Now()}
	follower := newForwarder(t.Context(), c, c.f, slog.New(slog.DiscardHandler), 10*time.Second)
	defer follower.close()
	rec := httptest.NewRecorder()
	follower.forward(rec, httptest.NewRequest("POST", "/v1/tenants/acme/tasks", strings.NewReader(`{}`)), 1<<20, 10*time.Second)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not the leader") {
		t.Fatalf("got %d %s, want 503 not the leader", rec.Code, rec.Body)
	}
	if got := rec.Header().Get(headerLeader); got != "127.0.0.1:7003" {
		t.Errorf("got X-Baton-Leader %q, want the leader the refusing node names, 127.0.0.1:7003", got)
	}
}
