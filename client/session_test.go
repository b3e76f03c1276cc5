package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/baton-dev/baton/client"
)

// sessionNode is a fake node with client sessions: it records each write's
// session headers and answers with reply.
type sessionNode struct {
	mu     sync.Mutex
	opened int
	writes []sessionHeaders
	reply  func(w http.ResponseWriter, h sessionHeaders, n int)
}

type sessionHeaders struct{ Session, Seq, Ack, Key string }

func (s *sessionNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if r.URL.Path == "/v1/sessions" {
		s.opened++
		id := s.opened * 1000
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"session_id": strconv.Itoa(id), "ttl_ms": 3600000})
		return
	}
	h := sessionHeaders{r.Header.Get("X-Baton-Session"), r.Header.Get("X-Baton-Seq"), r.Header.Get("X-Baton-Ack"), r.Header.Get("Idempotency-Key")}
	s.writes = append(s.writes, h)
	n := len(s.writes)
	s.mu.Unlock()
	s.reply(w, h, n)
}

func (s *sessionNode) seen() (int, []sessionHeaders) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, append([]sessionHeaders(nil), s.writes...)
}

func startSessionNode(t *testing.T, reply func(w http.ResponseWriter, h sessionHeaders, n int)) (*sessionNode, *client.Client) {
	node := &sessionNode{reply: reply}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	return node, newClient(t, srv.URL)
}

func putKV(c *client.Client, key string) error {
	_, err := c.PutKV(context.Background(), "acme", "ns", key, client.PutKVRequest{Value: []byte(`1`)})
	return err
}

// TestSessionNumbersWrites: one session for the client; writes numbered
// from 1; a retry (after a 503) sends the same number; the ack is the
// lowest number still in flight; no Idempotency-Key is spent per write.
func TestSessionNumbersWrites(t *testing.T) {
	node, c := startSessionNode(t, func(w http.ResponseWriter, h sessionHeaders, n int) {
		if n == 2 {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "no leader", nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": "ns", "key": "k", "value": 1, "version": n})
	})
	for _, k := range []string{"a", "b", "c"} {
		if err := putKV(c, k); err != nil {
			t.Fatal(err)
		}
	}
	opened, writes := node.seen()
	if opened != 1 {
		t.Errorf("sessions opened: %d, want 1", opened)
	}
	want := []sessionHeaders{{"1000", "1", "1", ""}, {"1000", "2", "2", ""}, {"1000", "2", "2", ""}, {"1000", "3", "3", ""}}
	if len(writes) != len(want) {
		t.Fatalf("writes: %+v, want %+v", writes, want)
	}
	for i := range want {
		if writes[i] != want[i] {
			t.Errorf("attempt %d: %+v, want %+v", i+1, writes[i], want[i])
		}
	}
}

// TestSessionGoneOnFirstAttempt: a first attempt refused because the
// session is gone applied nothing, so the write goes again in a new
// session; a later attempt refused so is the caller's
// ErrIdempotencyExpired (the write may have been applied).
func TestSessionGoneOnFirstAttempt(t *testing.T) {
	gone := func(w http.ResponseWriter) {
		writeError(w, http.StatusConflict, "idempotency_expired", "session is unknown or expired",
			map[string]any{"reason": "session"})
	}
	node, c := startSessionNode(t, func(w http.ResponseWriter, h sessionHeaders, n int) {
		if h.Session == "1000" {
			gone(w)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": "ns", "key": "k", "value": 1, "version": n})
	})
	if err := putKV(c, "a"); err != nil {
		t.Fatalf("write whose first attempt found the session gone: %v", err)
	}
	opened, writes := node.seen()
	if opened != 2 || len(writes) != 2 || writes[1].Session != "2000" || writes[1].Seq != "1" {
		t.Errorf("opened %d, writes %+v; want a second session and the write as its first", opened, writes)
	}

	node2, c2 := startSessionNode(t, func(w http.ResponseWriter, h sessionHeaders, n int) {
		if n == 1 {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "no leader", nil)
			return
		}
		gone(w)
	})
	err := putKV(c2, "a")
	if !errors.Is(err, client.ErrIdempotencyExpired) {
		t.Errorf("retry refused for its session: got %v, want ErrIdempotencyExpired", err)
	}
	if opened, _ := node2.seen(); opened != 1 {
		t.Errorf("sessions opened: %d, want 1 (a retry is never moved to a new session)", opened)
	}
}

// TestNoSessionsFallsBackToKeys: against a server without sessions every
// write carries a random Idempotency-Key, the same on its retries.
func TestNoSessionsFallsBackToKeys(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "no leader", nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": "ns", "key": "k", "value": 1, "version": n})
	}}
	srv := serve(t, rec.ServeHTTP)
	c := newClient(t, srv.URL)
	if err := putKV(c, "a"); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].Key == "" || reqs[0].Key != reqs[1].Key {
		t.Errorf("requests %+v: want two attempts with one random key", reqs)
	}
}
