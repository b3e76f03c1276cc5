package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/client/internal/backoff"
	"github.com/baton-dev/baton/fsm/wire"
)

// ErrWatcherClosed is returned by Next after Close.
var ErrWatcherClosed = errors.New("watcher closed")

// errBadStream marks a stream the client cannot parse: resuming would read
// the same bytes again, so it ends the watch.
var errBadStream = errors.New("malformed watch stream")

// Watch stream limits.
const (
	// DefaultWatchIdleTimeout is how long a stream may stay silent before
	// the watcher gives up on it and reconnects. The server sends a
	// keepalive comment every 10 seconds.
	DefaultWatchIdleTimeout = 30 * time.Second
	// maxEventSize bounds one SSE event (a value is at most the 1 MiB
	// body limit, plus the event's envelope).
	maxEventSize = 16 << 20
)

// WatchOptions selects what a Watcher streams.
type WatchOptions struct {
	// Resources are any of tasks, refs, artifacts, kv, checkpoints, ops;
	// empty means all of them (which needs read grants on all).
	Resources []string
	// Prefix keeps only events whose key starts with it. Keys are a
	// task's id, "namespace/key" for kv, "thread/checkpoint" for
	// checkpoints, an op's id.
	Prefix string
	// FromIndex streams the changes applied after this Raft index, for
	// example the X-Baton-Index of a read of the current state (Meta.Index).
	// 0 means from the state the node has applied when the first Next
	// connects.
	FromIndex uint64
	// AfterID resumes exactly after an event the caller has already
	// handled (its Event.ID), for example one saved before a restart. It
	// overrides FromIndex.
	AfterID string
	// IdleTimeout: a stream silent for this long is dropped and resumed
	// elsewhere; 0 means DefaultWatchIdleTimeout.
	IdleTimeout time.Duration
}

// Event is one committed change.
type Event struct {
	// ID is the SSE event id: "INDEX" for the last event of a log index,
	// "INDEX.POS" for earlier ones. Events of a Watcher have strictly
	// increasing ids.
	ID       string          `json:"id"`
	Index    uint64          `json:"index"`    // the Raft index of the change
	Resource string          `json:"resource"` // tasks, refs, artifacts, kv, checkpoints, ops
	Key      string          `json:"key"`
	Type     string          `json:"type"`            // put or delete
	Value    json.RawMessage `json:"value,omitempty"` // the object after a put
}

// Watcher streams the changes of one tenant (GET .../watch, Server-Sent
// Events). It connects on the first Next, to the endpoint that last
// answered, and survives the loss of that node: when the stream breaks, is
// silent for IdleTimeout or an endpoint answers 503, it reconnects to the
// next endpoint of the client with Last-Event-ID, so no committed change is
// skipped or delivered twice. Connection failures back off as Do's do; after
// Config.MaxRetry without any endpoint accepting, Next returns an error
// matching ErrUnavailable (a later Next tries again).
//
// Next returns an error matching ErrCompacted when the watch cannot resume
// because the history it needs is gone: every endpoint tried in a round
// answered 410 (or could not be reached), or the watcher fell behind the
// server's retained history. The caller then reads the current state and
// watches again from its index. Other error answers (ErrForbidden,
// ErrInvalidArgument...) also end the watch; every later Next returns the
// same error.
//
// Next must not be called concurrently with itself; Close may be called
// from any goroutine at any time. The watcher starts no goroutine of its
// own, and Close releases the connection.
type Watcher struct {
	c      *Client
	tenant string
	opts   WatchOptions
	ctx    context.Context // the watcher's lifetime; cancelled by Close
	cancel context.CancelFunc
	closed atomic.Bool

	mu     sync.Mutex
	busy   bool     // a Next is running
	calls  uint64   // counts Next calls, so a late interrupt finds it is stale
	active *sseConn // the stream being dialled or read, nil between streams

	// Owned by the running Next.
	cursor    eventPos // the last event delivered, or where to start
	hasCursor bool
	ep        int   // endpoint to use for the next connection
	err       error // terminal
	down      outage
}

// Watch returns a Watcher of tenant's changes. It does no I/O: the first
// Next connects. ctx bounds the watcher's whole life; each Next also takes
// its own.
func (c *Client) Watch(ctx context.Context, tenant string, opts WatchOptions) *Watcher {
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{c: c, tenant: tenant, opts: opts, ctx: wctx, cancel: cancel,
		ep: int(c.preferred.Load()) % len(c.endpoints)}
	if w.opts.IdleTimeout <= 0 {
		w.opts.IdleTimeout = DefaultWatchIdleTimeout
	}
	switch {
	case tenant == "":
		w.err = fmt.Errorf("%w: tenant is required", ErrInvalidArgument)
	case opts.AfterID != "":
		p, ok := parseEventPos(opts.AfterID)
		if !ok {
			w.err = fmt.Errorf("%w: event id %q is not INDEX or INDEX.POS", ErrInvalidArgument, opts.AfterID)
		}
		w.cursor, w.hasCursor = p, ok
	case opts.FromIndex > 0:
		w.cursor, w.hasCursor = eventPos{Index: opts.FromIndex, Pos: -1}, true
	}
	return w
}

// Next returns the next event, connecting or reconnecting as needed. When
// ctx ends, Next returns its error and the watcher stays usable: the next
// call resumes after the last event returned.
func (w *Watcher) Next(ctx context.Context) (Event, error) {
	call, err := w.enter()
	if err != nil {
		return Event{}, err
	}
	defer w.leave()
	stop := context.AfterFunc(ctx, func() { w.interrupt(call) })
	defer stop()
	for {
		if err := w.usable(ctx); err != nil {
			return Event{}, err
		}
		conn := w.current()
		if conn == nil {
			var err error
			if conn, err = w.connect(ctx); err != nil {
				return Event{}, err
			}
		}
		ev, err := conn.next()
		if err == nil {
			if w.deliver(&ev) {
				conn.progress = true
				return ev, nil
			}
			continue
		}
		w.drop(conn)
		if err := w.streamEnded(ctx, conn, err); err != nil {
			return Event{}, err
		}
	}
}

// Close stops the watcher and releases its connection. It is idempotent
// and safe to call concurrently with Next, which then returns
// ErrWatcherClosed.
func (w *Watcher) Close() error {
	w.closed.Store(true)
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy && w.active != nil {
		w.active.close()
		w.active = nil
	}
	return nil
}

func (w *Watcher) enter() (call uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy {
		return 0, errors.New("client: Watcher.Next called concurrently")
	}
	w.busy = true
	w.calls++
	return w.calls, nil
}

func (w *Watcher) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	if w.ctx.Err() != nil && w.active != nil {
		w.active.close()
		w.active = nil
	}
}

// interrupt cuts the current stream when the ctx of Next call number call
// ends while it runs; the next Next resumes on the same endpoint.
func (w *Watcher) interrupt(call uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy && w.calls == call && w.active != nil {
		w.active.interrupted.Store(true)
		w.active.cancel()
	}
}

func (w *Watcher) current() *sseConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active
}

// setActive makes conn the current stream, cut at once if ctx already
// ended (interrupt may have run before conn was visible to it).
func (w *Watcher) setActive(ctx context.Context, conn *sseConn) {
	w.mu.Lock()
	w.active = conn
	w.mu.Unlock()
	if ctx.Err() != nil {
		conn.interrupted.Store(true)
		conn.cancel()
	}
}

func (w *Watcher) drop(conn *sseConn) {
	conn.close()
	w.mu.Lock()
	if w.active == conn {
		w.active = nil
	}
	w.mu.Unlock()
}

// usable returns why Next cannot go on, if it cannot.
func (w *Watcher) usable(ctx context.Context) error {
	switch {
	case w.err != nil:
		return w.err
	case w.ctx.Err() != nil:
		return w.closedErr()
	}
	return ctx.Err()
}

func (w *Watcher) closedErr() error {
	if w.closed.Load() {
		return ErrWatcherClosed
	}
	return fmt.Errorf("watch: %w", w.ctx.Err())
}

// deliver advances the cursor past ev and reports whether ev is new. An
// event at or before the cursor was already delivered before a reconnect.
func (w *Watcher) deliver(ev *Event) bool {
	p, ok := parseEventPos(ev.ID)
	if !ok {
		return true // no usable id: nothing to dedupe against
	}
	if w.hasCursor && !p.After(w.cursor) {
		return false
	}
	w.cursor, w.hasCursor = p, true
	if ev.Index == 0 {
		ev.Index = p.Index
	}
	return true
}

// streamEnded decides what a broken stream means: nil to reconnect, or
// the error Next returns.
func (w *Watcher) streamEnded(ctx context.Context, conn *sseConn, err error) error {
	switch {
	case w.ctx.Err() != nil:
		return w.closedErr()
	case conn.interrupted.Load():
		return ctx.Err() // nil: cut too eagerly; resume on the same endpoint
	}
	if conn.progress {
		w.down = outage{} // the stream worked for a while: a fresh outage
	}
	var apiErr *Error
	switch {
	case errors.Is(err, ErrCompacted), errors.Is(err, ErrUnavailable):
	case errors.As(err, &apiErr), errors.Is(err, errBadStream):
		w.err = err
		return err
	default:
		err = fmt.Errorf("%w: watch stream from %s ended: %w", ErrUnavailable, conn.endpoint, err)
	}
	return w.failed(ctx, result{err: err, retry: true})
}

// connect opens a stream, failing over across the endpoints.
func (w *Watcher) connect(ctx context.Context) (*sseConn, error) {
	for {
		conn, res := w.dial(ctx, w.ep)
		if res.err == nil {
			w.c.preferred.Store(int64(w.ep))
			return conn, nil
		}
		switch {
		case w.ctx.Err() != nil:
			return nil, w.closedErr()
		case ctx.Err() != nil:
			return nil, fmt.Errorf("watch: %w (last error: %w)", ctx.Err(), res.err)
		case !res.retry && !errors.Is(res.err, ErrCompacted):
			w.err = res.err
			return nil, res.err
		}
		if err := w.failed(ctx, res); err != nil {
			return nil, err
		}
	}
}

// outage counts consecutive failed attempts to stream (failed connections
// and streams that ended before delivering an event).
type outage struct {
	attempts   int
	start      time.Time
	bo         backoff.Backoff
	retryAfter time.Duration
	compacted  error // a 410 or compacted event in the current round
}

// failed records a failed attempt and moves to the next endpoint. After
// each round over all endpoints it ends the watch with ErrCompacted if an
// endpoint reported compaction, gives up if the retry budget is spent, or
// backs off.
func (w *Watcher) failed(ctx context.Context, res result) error {
	d := &w.down
	if d.attempts == 0 {
		d.start, d.bo = time.Now(), backoff.Backoff{}
	}
	d.attempts++
	n := len(w.c.endpoints)
	w.ep = (w.ep + 1) % n
	d.retryAfter = max(d.retryAfter, res.retryAfter)
	if errors.Is(res.err, ErrCompacted) {
		d.compacted = res.err
	}
	if d.attempts%n != 0 {
		return nil
	}
	if d.compacted != nil {
		w.err, w.down = d.compacted, outage{}
		return w.err
	}
	remaining := time.Until(d.start.Add(w.c.maxRetry))
	delay := d.bo.Delay(d.retryAfter, remaining)
	d.retryAfter = 0
	if delay >= remaining {
		attempts := d.attempts
		w.down = outage{}
		return fmt.Errorf("%w (gave up after %d attempts)", res.err, attempts)
	}
	return w.sleep(ctx, delay)
}

func (w *Watcher) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ctx.Done():
		return w.closedErr()
	}
}

// dial opens a stream on endpoint ep, resuming after the cursor.
func (w *Watcher) dial(ctx context.Context, ep int) (*sseConn, result) {
	endpoint := w.c.endpoints[ep]
	cctx, cancel := context.WithCancel(w.ctx)
	conn := &sseConn{endpoint: endpoint, cancel: cancel, idleTimeout: w.opts.IdleTimeout}
	w.setActive(ctx, conn)
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, endpoint+w.path(), nil)
	if err != nil {
		w.drop(conn)
		return nil, result{err: fmt.Errorf("%w: %w", ErrInvalidArgument, err)}
	}
	w.header(req)
	headerTimer := time.AfterFunc(w.c.timeout, cancel)
	resp, err := w.c.hc.Do(req)
	timedOut := !headerTimer.Stop()
	if err == nil && timedOut {
		resp.Body.Close()
		err = fmt.Errorf("no answer within %v", w.c.timeout)
	}
	if err != nil {
		w.drop(conn)
		return nil, result{retry: true, err: fmt.Errorf("%w: GET %s%s: %w", ErrUnavailable, endpoint, w.path(), err)}
	}
	if res := w.checkResponse(resp); res.err != nil {
		w.drop(conn)
		return nil, res
	}
	conn.start(resp.Body)
	if !w.hasCursor {
		// "From now": pin now to the index the node reports, so a
		// reconnect before the first event resumes there.
		idx, _ := strconv.ParseUint(resp.Header.Get("X-Baton-Index"), 10, 64)
		w.cursor, w.hasCursor = eventPos{Index: idx, Pos: -1}, idx > 0
	}
	return conn, result{}
}

func (w *Watcher) path() string {
	q := url.Values{}
	if len(w.opts.Resources) > 0 {
		q.Set("resources", strings.Join(w.opts.Resources, ","))
	}
	setIf(q, "prefix", w.opts.Prefix)
	if w.hasCursor {
		q.Set("from_index", strconv.FormatUint(w.cursor.Index, 10))
	}
	return withQuery(tenantPath(w.tenant, "watch"), q)
}

func (w *Watcher) header(req *http.Request) {
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("User-Agent", "baton-go-client/1")
	if w.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.c.token)
	}
	if w.hasCursor {
		req.Header.Set("Last-Event-ID", w.cursor.String())
	}
}

// checkResponse turns a non-stream answer into an attempt result; the body
// is closed unless the answer is a stream.
func (w *Watcher) checkResponse(resp *http.Response) result {
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return result{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return result{retry: true, err: fmt.Errorf("%w: reading watch answer: %w", ErrUnavailable, err)}
	}
	if resp.StatusCode == http.StatusOK {
		return result{err: fmt.Errorf("%w: got Content-Type %q, want text/event-stream", errBadStream, resp.Header.Get("Content-Type"))}
	}
	return responseResult(resp, body)
}

// eventPos orders events (wire.EventPos: Pos -1 stands for the last
// event of Index, which comes after every other event of that index).
type eventPos = wire.EventPos

func parseEventPos(id string) (eventPos, bool) { return wire.ParseEventID(id) }

// sseConn is one open event stream.
type sseConn struct {
	endpoint    string
	cancel      context.CancelFunc
	idleTimeout time.Duration
	interrupted atomic.Bool // cut because a Next's ctx ended
	idled       atomic.Bool // cut by the idle timer

	body io.ReadCloser
	r    *bufio.Reader
	idle *time.Timer
	// progress: the stream delivered an event. Lines alone (the open
	// acknowledgement and keepalive comments) do not count, or a node that
	// accepts every watch and then breaks it would be retried without
	// backoff.
	progress bool
}

func (s *sseConn) start(body io.ReadCloser) {
	s.body, s.r = body, bufio.NewReaderSize(body, 64<<10)
	s.idle = time.AfterFunc(s.idleTimeout, func() {
		s.idled.Store(true)
		s.cancel()
	})
}

func (s *sseConn) close() {
	s.cancel()
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.body != nil {
		s.body.Close()
	}
}

// next reads up to the next event. A stream error event comes back as an
// *Error (ErrCompacted when the watcher fell behind).
func (s *sseConn) next() (Event, error) {
	var id, typ string
	var data []byte
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if s.idled.Load() {
				err = fmt.Errorf("nothing received for %v", s.idleTimeout)
			}
			return Event{}, err
		}
		s.idle.Reset(s.idleTimeout) // comments too: keepalives keep it open
		if len(line) > 0 {
			if field, value := sseField(line); field == "id" {
				id = value
			} else if field == "event" {
				typ = value
			} else if field == "data" {
				if hasData {
					data = append(data, '\n')
				}
				data, hasData = append(data, value...), true
			}
			continue
		}
		if !hasData {
			id, typ = "", ""
			continue
		}
		switch typ {
		case "", "message":
			return decodeEvent(id, data)
		case "error":
			return Event{}, decodeStreamError(data)
		}
		id, typ, data, hasData = "", "", nil, false
	}
}

// sseField splits "field: value"; comments (":...") have no field.
func sseField(line []byte) (field, value string) {
	if line[0] == ':' {
		return "", ""
	}
	f, v, _ := bytes.Cut(line, []byte(":"))
	v, _ = bytes.CutPrefix(v, []byte(" "))
	return string(f), string(v)
}

// readLine returns one line without its end ("\n" or "\r\n").
func (s *sseConn) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(line)+len(chunk) > maxEventSize {
			return nil, fmt.Errorf("%w: a line over %d bytes", errBadStream, maxEventSize)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
}

func decodeEvent(id string, data []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, fmt.Errorf("%w: event %s: %w", errBadStream, id, err)
	}
	ev.ID = id
	return ev, nil
}

// decodeStreamError reads the data of an "event: error", which has the
// shape of an error response.
func decodeStreamError(data []byte) error {
	e := decodeError(http.StatusOK, 0, data)
	if e.Code == "" {
		e.Code = "unavailable"
	}
	if e.Code == "compacted" {
		e.Status = http.StatusGone
	}
	return e
}
