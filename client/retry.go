package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-dev/baton/client/internal/backoff"
	"github.com/baton-dev/baton/client/internal/transport"
)

// result is the outcome of one attempt.
type result struct {
	meta       Meta
	body       []byte
	err        error
	retry      bool          // a connection error or 503: another endpoint may do
	answered   bool          // the endpoint answered with something other than 503
	retryAfter time.Duration // from a 503's (or 504's) Retry-After
	leader     string        // X-Baton-Leader: the leader's host:port, when a follower forwarded
	// rateLimited: a 429; the caller waits retryAfter before trying again.
	rateLimited bool
	// outcomeUnknown: a 504 outcome_unknown, a write proposed whose
	// outcome is not known; retried only when the call carries what makes
	// a retry safe (see attempt).
	outcomeUnknown bool
	// dialFailed: no connection was made (refused, unreachable, timed out
	// dialing); see Config.DialRetry.
	dialFailed bool
}

// prefer makes the next call start at the endpoint that answered, or at
// the leader's endpoint when a follower forwarded the answer and the
// leader is one of the configured endpoints (its published address may be
// one this client cannot reach, so only configured endpoints are used).
func (c *Client) prefer(answered int, leader string) {
	if leader != "" {
		for i, h := range c.hosts {
			if h == leader {
				c.preferred.Store(int64(i))
				return
			}
		}
	}
	c.preferred.Store(int64(answered))
}

// pinned makes a single attempt against endpoint.
func (c *Client) pinned(ctx context.Context, endpoint string, cl *call) result {
	ep, err := transport.Endpoint(endpoint)
	if err != nil {
		return result{err: err}
	}
	return c.attempt(ctx, ep, cl)
}

// failover tries the endpoints in turn, starting with the one that last
// answered, backing off after each full round of failures, until an
// endpoint answers, the retry budget is spent or ctx is done. A write
// that ends without an answer after an attempt that may have applied
// fails with an error that matches ErrOutcomeUnknown too (inDoubt).
func (c *Client) failover(ctx context.Context, cl *call) (res result) {
	var doubt error // the failure of an attempt that may have applied
	defer func() {
		if doubt != nil && (!res.answered || res.rateLimited) {
			res.err = inDoubt(res.err, doubt)
		}
	}()
	began := time.Now()
	deadline := began.Add(c.maxRetry)
	// Until an endpoint accepts a connection, DialRetry may end it sooner.
	dialDeadline := deadline
	if c.dialRetry > 0 && c.dialRetry < c.maxRetry {
		dialDeadline = began.Add(c.dialRetry)
	}
	connected := false
	n := len(c.endpoints)
	start := int(c.preferred.Load())
	bo := backoff.Backoff{}
	var roundRetryAfter time.Duration
	var last error // the previous retryable failure
	for i := 0; ; i++ {
		idx := (start + i) % n
		res = c.attempt(ctx, c.endpoints[idx], cl)
		if res.answered {
			c.prefer(idx, res.leader)
		}
		if res.retry && mayHaveApplied(cl, res) {
			doubt = res.err
		}
		if !res.retry {
			if res.err != nil && ctx.Err() != nil && last != nil {
				res.err = fmt.Errorf("%w (last error: %w)", res.err, last)
			}
			return res
		}
		last = res.err
		connected = connected || !res.dialFailed
		remaining := time.Until(deadline)
		dialOver := !connected && i+1 >= n // every endpoint tried, none connected
		if dialOver {
			remaining = time.Until(dialDeadline)
		}
		if res.rateLimited {
			if res.retryAfter >= remaining {
				return res
			}
			if err := backoff.Sleep(ctx, res.retryAfter); err != nil {
				res.err = fmt.Errorf("%w (last error: %w)", err, res.err)
				return res
			}
			continue
		}
		roundRetryAfter = max(roundRetryAfter, res.retryAfter)
		delay := time.Duration(0)
		if (i+1)%n == 0 {
			delay = bo.Delay(roundRetryAfter, remaining)
			roundRetryAfter = 0
		}
		if delay >= remaining {
			if dialOver && dialDeadline.Before(deadline) {
				res.err = fmt.Errorf("%w (no endpoint accepted a connection within %v; gave up after %d attempts)", res.err, c.dialRetry, i+1)
			} else {
				res.err = fmt.Errorf("%w (gave up after %d attempts)", res.err, i+1)
			}
			return res
		}
		if err := backoff.Sleep(ctx, delay); err != nil {
			res.err = fmt.Errorf("%w (last error: %w)", err, res.err)
			return res
		}
	}
}

// mayHaveApplied reports whether a retryable failure of a write may have
// been applied: the request may have reached a node (a connection made,
// then no answer, or an answer cut), or a node said the outcome is
// unknown (504). A 503, a 429 or a connection never made applied nothing.
// Only a write that carries a key or a session place counts: it is the
// one a retry could not apply twice, and whose caller may retry anew.
func mayHaveApplied(cl *call, res result) bool {
	if cl.key == "" && cl.place.id == 0 {
		return false
	}
	return res.outcomeUnknown || (res.meta.Status == 0 && !res.dialFailed)
}

// inDoubt is err, a write's final failure without an answer (no endpoint
// answered within the budget, or ctx ended), after doubt, the failure of
// an earlier attempt that may have applied: it matches ErrOutcomeUnknown
// as well as what err matches, since "nothing was done" (ErrUnavailable)
// no longer holds.
func inDoubt(err, doubt error) error {
	if err == nil || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w: an earlier attempt got no answer and may have been applied (%v): %w", ErrOutcomeUnknown, doubt, err)
}

// attempt sends cl to one endpoint, bounded by the per-attempt timeout.
func (c *Client) attempt(ctx context.Context, endpoint string, cl *call) result {
	cl.attempts++
	actx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	req, err := c.request(actx, endpoint, cl)
	if err != nil {
		return result{err: err}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return transportFailure(ctx, cl, endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return transportFailure(ctx, cl, endpoint, err)
	}
	if cl.wantValue && len(body) == 0 && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated) {
		// The server writes a value with every 200 and 201 of a JSON
		// call: an empty one was cut on the way (a proxy or a node that
		// gave up on it). The write may have been applied; the retry
		// carries the same key or session number, so it is not applied
		// twice, and it returns the real answer.
		return transportFailure(ctx, cl, endpoint, fmt.Errorf("%d answer without a body", resp.StatusCode))
	}
	res := responseResult(resp, body)
	if res.outcomeUnknown && (cl.key != "" || cl.place.id != 0) {
		// The write may have been applied: the retry carries the same
		// Idempotency-Key or session place, so it is not applied twice.
		res.retry = true
	}
	return res
}

func (c *Client) request(ctx context.Context, endpoint string, cl *call) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, cl.method, endpoint+cl.path, bytes.NewReader(cl.body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "baton-go-client/1")
	if cl.contentType != "" {
		req.Header.Set("Content-Type", cl.contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	} else if cl.place.id != 0 {
		req.Header.Set(headerSession, strconv.FormatUint(cl.place.id, 10))
		req.Header.Set(headerSessionSeq, strconv.FormatUint(cl.place.seq, 10))
		req.Header.Set(headerSessionAck, strconv.FormatUint(c.ack(cl.place.id), 10))
	}
	return req, nil
}

// transportFailure classifies an error before a complete response: final
// when the caller's ctx is done, retryable otherwise (refused, reset, EOF,
// attempt timeout).
func transportFailure(ctx context.Context, cl *call, endpoint string, err error) result {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if ctx.Err() != nil {
		return result{err: fmt.Errorf("%s %s%s: %w", cl.method, endpoint, cl.path, ctx.Err())}
	}
	// A certificate the client does not trust, or one the node refuses,
	// is a configuration problem (CAFile, client certificate): retrying
	// for the whole budget would only hide it.
	var verr *tls.CertificateVerificationError
	var alert tls.AlertError
	if errors.As(err, &verr) || errors.As(err, &alert) {
		return result{err: fmt.Errorf("%s %s%s: %w (check the CA file and client certificate)", cl.method, endpoint, cl.path, err)}
	}
	var op *net.OpError
	return result{retry: true, dialFailed: errors.As(err, &op) && op.Op == "dial",
		err: fmt.Errorf("%w: %s %s%s: %w", ErrUnavailable, cl.method, endpoint, cl.path, err)}
}

func responseResult(resp *http.Response, body []byte) result {
	meta := Meta{Status: resp.StatusCode, Replay: resp.Header.Get("Idempotent-Replay") == "true"}
	meta.Index, _ = strconv.ParseUint(resp.Header.Get("X-Baton-Index"), 10, 64)
	if meta.Position, _ = strconv.ParseUint(resp.Header.Get("X-Baton-Position"), 10, 64); meta.Position == 0 && meta.Index != 0 {
		meta.Position = meta.Index<<16 | 0xFFFF // a node from before the header
	}
	leader := resp.Header.Get("X-Baton-Leader")
	if resp.StatusCode < 300 {
		return result{meta: meta, body: body, answered: true, leader: leader}
	}
	res := result{meta: meta, err: decodeError(resp.StatusCode, meta.Index, body), leader: leader}
	if resp.StatusCode == http.StatusServiceUnavailable {
		res.retry = true
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	} else if errors.Is(res.err, ErrOutcomeUnknown) {
		// Not retried here: only a write with a key or a session place
		// may be sent again (attempt decides).
		res.outcomeUnknown = true
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	} else if resp.StatusCode == http.StatusTooManyRequests {
		// Over a rate: wait as long as the server says, then try again
		// (the same request; nothing was applied).
		res.retry, res.answered, res.rateLimited = true, true, true
		res.retryAfter = max(parseRetryAfter(resp.Header.Get("Retry-After")), time.Second)
	} else {
		res.answered = true
	}
	return res
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
