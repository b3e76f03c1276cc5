package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Client sessions make the SDK's automatic retries exactly-once at a cost
// per client, not per write. The client opens one session (POST
// /v1/sessions) before its first write and numbers its writes; each
// attempt carries the session, the write's number and the lowest number
// the client still waits for, so the cluster keeps the answers of the
// writes in flight only. A retry, after a timeout, a 503, a leader change
// or a node crash, is answered from the session and applied at most once.
//
// A session the cluster no longer has (unused for its TTL, or dropped to
// keep the cluster's bound) is replaced transparently when the first
// attempt of a write is refused for it, and a write whose first attempt
// was refused for its number (the session dropped answers while it was on
// its way) gets a new number: an attempt sent once and refused applied
// nothing. (The client's transport never sends a session write twice
// within one attempt.) A later attempt of a write that is refused so
// returns ErrIdempotencyExpired: the write may or may not have been
// applied, and the client cannot tell.
//
// An explicit Idempotency-Key (IdempotencyKey, WithIdempotencyKey) is sent
// instead of the session place; against a server without sessions every
// write gets a random Idempotency-Key, as before sessions.

const (
	headerSession    = "X-Baton-Session"
	headerSessionSeq = "X-Baton-Seq"
	headerSessionAck = "X-Baton-Ack"
)

// sessions is a client's session and its writes in flight.
type sessions struct {
	mu       sync.Mutex
	id       uint64 // 0: none open
	off      bool   // the server has no sessions: random keys instead
	next     uint64 // number of the next write
	inflight map[uint64]struct{}
	opening  chan struct{} // closed when the open under way ends; nil when none is
	openErr  error         // how the last open failed
	openCtx  bool          // it failed because the opener's own context ended
}

// place is a write's place in a session.
type place struct {
	id, seq uint64
}

// beginWrite gives a write its place, opening a session first if none is
// open. ok is false when the server has no sessions. One open runs at a
// time, outside the lock; the writes that wait for it wait on their own
// contexts.
func (c *Client) beginWrite(ctx context.Context) (p place, ok bool, err error) {
	s := &c.sess
	for {
		s.mu.Lock()
		switch {
		case s.off:
			s.mu.Unlock()
			return place{}, false, nil
		case s.id != 0:
			p = place{id: s.id, seq: s.next}
			s.next++
			s.inflight[p.seq] = struct{}{}
			s.mu.Unlock()
			return p, true, nil
		case s.opening != nil:
			wait := s.opening
			s.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return place{}, false, ctx.Err()
			}
			s.mu.Lock()
			err, theirs := s.openErr, s.openCtx
			s.mu.Unlock()
			if err != nil && theirs && ctx.Err() == nil {
				continue // the opener's own context ended, not this caller's: it opens one itself
			}
			if err != nil {
				return place{}, false, err
			}
			continue
		}
		done := make(chan struct{})
		s.opening = done
		s.mu.Unlock()
		id, err := c.openSession(ctx)
		s.mu.Lock()
		s.opening, s.openErr, s.openCtx = nil, nil, false
		var e *Error
		switch {
		case errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed):
			s.off = true
		case err != nil:
			s.openErr = fmt.Errorf("open a client session: %w", err)
			s.openCtx = ctx.Err() != nil
		default:
			s.id, s.next, s.inflight = id, 1, map[uint64]struct{}{}
		}
		openErr := s.openErr
		s.mu.Unlock()
		close(done)
		if openErr != nil {
			return place{}, false, openErr
		}
	}
}

// endWrite says the client waits no more for p's answer.
func (c *Client) endWrite(p place) {
	s := &c.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == p.id {
		delete(s.inflight, p.seq)
	}
}

// ack is the lowest number of session id the client still waits for.
func (c *Client) ack(id uint64) uint64 {
	s := &c.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != id {
		return 0 // an older session: acknowledge nothing
	}
	low := s.next
	for seq := range s.inflight {
		low = min(low, seq)
	}
	return low
}

// dropSession forgets session id, so that the next write opens another.
func (c *Client) dropSession(id uint64) {
	s := &c.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == id {
		s.id, s.inflight = 0, nil
	}
}

// openSession opens a session. The open carries no key and no session:
// a retried open may leave an unused session behind, which expires.
func (c *Client) openSession(ctx context.Context) (uint64, error) {
	cl := &call{method: http.MethodPost, path: "/v1/sessions", timeout: c.timeout}
	res := c.failover(ctx, cl)
	if res.err != nil {
		return 0, res.err
	}
	var out struct {
		SessionID string `json:"session_id"`
	}
	if err := decodeBody(res, &out); err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(out.SessionID, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("open a client session: bad session_id %q", out.SessionID)
	}
	return id, nil
}

// refusedUnapplied reports whether err refuses a write in a session
// without applying it: its session is unknown or expired (gone), or its
// number is at or below what the session remembers (the session dropped
// answers while this write was on its way). Only for an attempt that was
// sent once does it mean that the write was not applied.
func refusedUnapplied(err error) (refused, gone bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != "idempotency_expired" {
		return false, false
	}
	switch e.Details["reason"] {
	case "session":
		return true, true
	case "seq":
		return true, false
	}
	return false, false
}
