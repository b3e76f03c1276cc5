package server

import (
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
	if !fw.forward(rec, req, 1<<20) {
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
	fw.forward(rec, httptest.NewRequest("POST", "/v1/tenants/acme/tasks", strings.NewReader(`{}`)), 1<<20)
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
		if !fw.forward(rec, req, 1<<20) || rec.Code != http.StatusOK {
			t.Fatalf("forward: %d %s", rec.Code, rec.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "" || got[1] != "n2" {
		t.Fatalf("the leader saw %s %q, want \"\" then \"n2\"", headerPeer, got)
	}
}
