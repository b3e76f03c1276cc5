package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// directTransport is the default client's transport for http://
// endpoints (Config.StdHTTPTransport opts out). It runs each request on
// the caller's goroutine: it writes the request on a kept-alive connection
// and reads the response from it, and the connection goes back to the
// pool once the body has been read to its end. net/http's Transport hands
// every request to a writer goroutine and every response from a reader
// goroutine of the connection: two goroutine wake-ups per request.
//
// What it gains, measured end to end on the 2-core benchmark machine (3
// nodes and the load generator on it, default GOMAXPROCS) with
// `go run ./bench/cmd/bench --workloads cas --systems baton --pinned=false
// --rounds 1 --cas-clients 64 --duration 10s`, with and without the SDK
// on net/http's Transport, interleaved, 6 pairs, with connUsable's peek
// before each reuse: the load generator's CPU per fenced update fell by
// 11-36% (from /proc/<pid>/stat over 6 s of each run: 71/76/95/99/76/103
// µs on net/http's Transport, 55/62/68/84/68/66 µs direct), 18% less
// relative to the leader's CPU per update in the same run, which is how
// the machine's speed, which drifts by ±25% between runs here, cancels
// out. Throughput moved by -2% to +32% per pair (mean +13%): a single
// pair's throughput is within this machine's noise, the CPU split is not.
// Earlier sets of 4 pairs, measuring throughput alone: +12%, +4%, and
// +2.5% with the peek.
//
// Where net/http's reader goroutine would notice something, this
// transport looks itself: before it reuses a connection it peeks at it
// without blocking (connUsable), so a connection the server closed while
// idle (a restarted node) is not used; and when writing a request fails,
// it still reads an answer the server gave before closing (a 401 or 413
// sent without reading a large body). A request that fails on a reused
// connection before any of an answer came is sent again on a new one
// only when replayable says so. Idle connections are closed after the
// fallback's IdleConnTimeout by a timer (sweep), on every host.
// The wire format is the standard library's (Request.Write,
// http.ReadResponse).
//
// https endpoints, requests through a proxy and protocol upgrades go to
// the fallback Transport.
type directTransport struct {
	fallback *http.Transport
	dialer   net.Dialer
	maxIdle  int // kept-alive connections per host

	mu       sync.Mutex
	idle     map[string][]*directConn // per host, oldest first
	sweeping bool                     // a sweep of idle connections is due
}

func newDirectTransport(fallback *http.Transport, maxIdlePerHost int) *directTransport {
	return &directTransport{
		fallback: fallback,
		dialer:   net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle:  maxIdlePerHost,
		idle:     map[string][]*directConn{},
	}
}

// directConn is one connection to a host.
type directConn struct {
	t         *directTransport
	host      string // host:port
	conn      net.Conn
	lr        *limitedReader // conn, as br reads it
	br        *bufio.Reader
	cw        *countingWriter // conn, as bw writes it
	bw        *bufio.Writer
	idleSince time.Time // when it went back to the pool
}

// limitedReader reads from a connection and counts what it read; while
// left is not negative, it reads at most left more bytes.
type limitedReader struct {
	conn net.Conn
	left int64
	read int64
}

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, errHeaderTooLarge
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.conn.Read(p)
	if r.left > 0 {
		r.left -= int64(n)
	}
	r.read += int64(n)
	return n, err
}

// countingWriter writes to a connection and counts what it wrote.
type countingWriter struct {
	conn    net.Conn
	written int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.conn.Write(p)
	w.written += int64(n)
	return n, err
}

// errHeaderTooLarge is the error for an answer whose head is larger than
// the fallback Transport's MaxResponseHeaderBytes (net/http's default
// when unset: 10 MiB).
var errHeaderTooLarge = errors.New("client: the server's response headers are too large")

// RoundTrip implements http.RoundTripper.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.direct(req) {
		return t.fallback.RoundTrip(req)
	}
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for {
		if err := req.Context().Err(); err != nil { // nothing is sent for a request already given up
			closeBody(req)
			return nil, err
		}
		dc, reused, err := t.get(req.Context(), host)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, at, err := dc.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		dc.conn.Close()
		// A kept-alive connection that the server closed while it was
		// idle fails before any answer: try once more on a new one when
		// the request may be sent twice. Once some of an answer came, the
		// server has the request: an error is the request's.
		if !reused || at.answered || req.Context().Err() != nil || !replayable(req, at.sent) {
			closeBody(req)
			return nil, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// direct reports whether req goes over a connection of this transport.
func (t *directTransport) direct(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Header.Get("Upgrade") != "" {
		return false
	}
	if t.fallback.Proxy != nil {
		if u, err := t.fallback.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// replayable reports whether req may be sent again after a failure on a
// reused connection before any answer: it has no body or one that can be
// had again (an attempt reads the body even when none of it reaches the
// connection), and it is idempotent or carries an Idempotency-Key (as
// net/http's Transport decides). A write in a client session is sent
// again only if none of it was written to the connection: the client
// counts its attempts (a first attempt refused for its session applied
// nothing only if it was sent once), and a resend here would be an
// attempt it does not see.
func replayable(req *http.Request, sent bool) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false // the attempt read its body
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	if req.Header.Get(headerSessionSeq) != "" {
		return !sent
	}
	return req.Header.Get("Idempotency-Key") != ""
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// get returns an idle connection to host, or dials one. Connections idle
// for longer than the fallback's IdleConnTimeout (90 s by default, less
// than batond's --http-idle-timeout) are closed instead, as net/http's
// Transport closes them, so that a request is not sent on a connection
// the server is closing; sweep closes them on every host meanwhile.
func (t *directTransport) get(ctx context.Context, host string) (*directConn, bool, error) {
	t.mu.Lock()
	stale := t.expireLocked(host, time.Now())
	var dc *directConn
	if conns := t.idle[host]; len(conns) > 0 {
		dc = conns[len(conns)-1]
		conns[len(conns)-1] = nil
		t.setIdleLocked(host, conns[:len(conns)-1])
	}
	t.mu.Unlock()
	for _, s := range stale {
		s.conn.Close()
	}
	if dc != nil {
		if connUsable(dc.conn) {
			return dc, true, nil
		}
		dc.conn.Close()
		return t.get(ctx, host) // the next idle one, or a new one
	}
	conn, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
	}
	lr, cw := &limitedReader{conn: conn, left: -1}, &countingWriter{conn: conn}
	return &directConn{t: t, host: host, conn: conn, lr: lr, cw: cw,
		br: bufio.NewReaderSize(lr, 4096), bw: bufio.NewWriterSize(cw, 4096)}, false, nil
}

// expireLocked takes host's connections idle for longer than
// IdleConnTimeout at now out of the pool and returns them, to be closed.
func (t *directTransport) expireLocked(host string, now time.Time) []*directConn {
	timeout := t.fallback.IdleConnTimeout
	conns := t.idle[host]
	if timeout <= 0 || len(conns) == 0 {
		return nil
	}
	cut := now.Add(-timeout)
	n := 0 // the pool is oldest first
	for n < len(conns) && conns[n].idleSince.Before(cut) {
		n++
	}
	if n == 0 {
		return nil
	}
	stale := append([]*directConn(nil), conns[:n]...)
	rest := copy(conns, conns[n:])
	clear(conns[rest:])
	t.setIdleLocked(host, conns[:rest])
	return stale
}

// setIdleLocked sets host's idle connections; an empty pool leaves the map.
func (t *directTransport) setIdleLocked(host string, conns []*directConn) {
	if len(conns) == 0 {
		delete(t.idle, host)
		return
	}
	t.idle[host] = conns
}

// sweep closes the connections idle for longer than IdleConnTimeout on
// every host, including hosts no request goes to any more (a former
// leader), and comes back when the oldest one left is due.
func (t *directTransport) sweep() {
	now := time.Now()
	var stale []*directConn
	var oldest time.Time
	t.mu.Lock()
	for host := range t.idle {
		stale = append(stale, t.expireLocked(host, now)...)
		if conns := t.idle[host]; len(conns) > 0 && (oldest.IsZero() || conns[0].idleSince.Before(oldest)) {
			oldest = conns[0].idleSince
		}
	}
	t.sweeping = !oldest.IsZero()
	if t.sweeping {
		time.AfterFunc(oldest.Add(t.fallback.IdleConnTimeout).Sub(now)+time.Millisecond, t.sweep)
	}
	t.mu.Unlock()
	for _, s := range stale {
		s.conn.Close()
	}
}

// put keeps dc for the next request to its host, or closes it when the
// pool is full.
func (t *directTransport) put(dc *directConn) {
	t.mu.Lock()
	if conns := t.idle[dc.host]; len(conns) < t.maxIdle {
		dc.idleSince = time.Now()
		t.idle[dc.host] = append(conns, dc)
		if timeout := t.fallback.IdleConnTimeout; timeout > 0 && !t.sweeping {
			t.sweeping = true
			time.AfterFunc(timeout+time.Millisecond, t.sweep)
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	dc.conn.Close()
}

// CloseIdleConnections closes the kept-alive connections not in use (and
// the fallback's); http.Client.CloseIdleConnections calls it.
func (t *directTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*directConn{}
	t.mu.Unlock()
	for _, conns := range idle {
		for _, dc := range conns {
			dc.conn.Close()
		}
	}
	t.fallback.CloseIdleConnections()
}

// aLongTimeAgo is a deadline in the past: it makes blocked I/O return.
var aLongTimeAgo = time.Unix(1, 0)

// attempt is how far a request on a connection got before it failed.
type attempt struct {
	sent     bool // some of the request was written to the connection
	answered bool // some of an answer was read from it
}

// roundTrip sends req on dc and reads the response's head.
func (dc *directConn) roundTrip(req *http.Request) (resp *http.Response, at attempt, err error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { dc.conn.SetDeadline(aLongTimeAgo) })
	written, read := dc.cw.written, dc.lr.read
	fail := func(err error) (*http.Response, attempt, error) {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		at.answered = dc.lr.read > read
		return nil, at, err
	}
	werr := req.Write(dc.bw)
	if werr == nil {
		werr = dc.bw.Flush()
	}
	at.sent = dc.cw.written > written
	if werr != nil {
		if !at.sent {
			return fail(werr)
		}
		// The server may have answered without reading the body (401,
		// 413) and then reset the connection under the write: its
		// answer, already received, is the request's. A request given up
		// meanwhile does not wait for it: once ctx has ended, its
		// AfterFunc's deadline, not this one, is the last word.
		dc.conn.SetReadDeadline(time.Now().Add(earlyAnswerWait))
		if ctx.Err() != nil {
			return fail(werr)
		}
		if resp, err = dc.readAnswer(req); err != nil {
			return fail(werr)
		}
		dc.conn.SetReadDeadline(time.Time{}) // the body is read without it
		if ctx.Err() != nil {
			resp.Body.Close()
			return fail(werr)
		}
		resp.Close = true // the connection is not reused
	} else if resp, err = dc.readAnswer(req); err != nil {
		return fail(err)
	}
	reuse := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	body := &directBody{dc: dc, rc: resp.Body, ctx: ctx, stop: stop, reuse: reuse}
	if resp.Body == http.NoBody {
		body.finish(true)
		return resp, at, nil
	}
	resp.Body = body
	return resp, at, nil
}

// earlyAnswerWait bounds the wait for an answer after the request's write
// failed: one the server gave before it closed is already received.
const earlyAnswerWait = 500 * time.Millisecond

// defaultMaxHeaderBytes is net/http's Transport's bound on a response's
// head when MaxResponseHeaderBytes is unset.
const defaultMaxHeaderBytes = 10 << 20

// maxInformational bounds the informational answers (100 Continue, 103
// Early Hints) read before the real one, as net/http's Transport does.
const maxInformational = 5

// readAnswer reads the answer to req, after its informational ones. Its
// head, as read from the connection, may be at most the fallback's
// MaxResponseHeaderBytes, as net/http's Transport bounds it (bytes of the
// body read along with the head count too, as they do there).
func (dc *directConn) readAnswer(req *http.Request) (*http.Response, error) {
	limit := dc.t.fallback.MaxResponseHeaderBytes
	if limit <= 0 {
		limit = defaultMaxHeaderBytes
	}
	dc.lr.left = limit - int64(dc.br.Buffered())
	defer func() { dc.lr.left = -1 }()
	for range maxInformational + 1 {
		resp, err := http.ReadResponse(dc.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("client: more than %d informational answers", maxInformational)
}

// directBody is a response body that gives its connection back once read
// to the end.
type directBody struct {
	dc    *directConn
	rc    io.ReadCloser
	ctx   context.Context
	stop  func() bool
	reuse bool

	mu    sync.Mutex
	done  bool
	atEOF bool
}

func (b *directBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	done, atEOF := b.done, b.atEOF
	b.mu.Unlock()
	if done { // the connection may serve another request by now
		if atEOF {
			return 0, io.EOF
		}
		return 0, errClosedBody
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
		b.finish(false)
	}
	return n, err
}

// Close ends the response; a body not read to its end costs its
// connection.
func (b *directBody) Close() error {
	b.finish(false)
	return nil
}

// finish releases the connection once: to the pool when the whole
// response was read and the connection may be kept, closed otherwise.
func (b *directBody) finish(atEOF bool) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done, b.atEOF = true, atEOF
	b.mu.Unlock()
	// stop is false when ctx ended meanwhile: the connection has a
	// deadline in the past and cannot be reused.
	if b.stop() && atEOF && b.reuse && b.dc.br.Buffered() == 0 {
		b.dc.t.put(b.dc)
		return
	}
	b.dc.conn.Close()
}

var errClosedBody = errors.New("client: read on a closed response body")
