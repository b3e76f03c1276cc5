package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/baton-dev/baton/server/core/replica"
)

// headerForwarded marks a request a follower forwarded, so that a node that
// is not the leader either answers 503 instead of forwarding in a loop.
const headerForwarded = "X-Baton-Forwarded-By"

// headerLeader, on an answer a follower forwarded, is the leader's HTTP
// address (host:port), so that a client can send its next requests there
// and spare both nodes the extra hop.
const headerLeader = "X-Baton-Leader"

type forwarder struct {
	probeMu sync.Mutex
	probe   *commitProbe // the next probe of the leader's commit index, not yet sent
	closed  bool         // under probeMu: no probe starts after close
	probes  sync.WaitGroup
	ctx     context.Context // the server's lifetime; probes run under it

	cluster   Cluster
	fsm       *fsm.FSM
	log       *slog.Logger
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	holdMax   time.Duration // the longest one request is held
	// bodyTimeout bounds the read of a body to be forwarded (readBody);
	// zero means the server's default.
	bodyTimeout time.Duration
	scheme      string // of the peers' API: http, or https (useTLS)
	// peerOf names the member that made a request on a peer route, or ""
	// (see Server.peerOf); a forwarded request carries it in headerPeer.
	peerOf func(*http.Request) string
}

// useTLS makes calls to peers https, with cfg (the peer certificate and CA).
func (f *forwarder) useTLS(cfg *tls.Config) {
	f.scheme = "https"
	f.transport.TLSClientConfig = cfg.Clone()
}

// url is a peer's URL for path.
func (f *forwarder) url(addr, path string) string { return f.scheme + "://" + addr + path }

type peerKey struct{}

type leaderKey struct{}

// dialFailure is where the proxy's error handler leaves an error it did not
// answer: the leader could not be dialled, so nothing reached it and the
// request may go to the next leader.
type dialFailure struct{ err error }

type dialFailureKey struct{}

// errLeaderLost is the cause a forwarded request is cancelled with when
// this node's Raft stops naming, as the leader, the member it was sent to
// before that member answered.
var errLeaderLost = errors.New("the leader changed while a forwarded request waited for its answer")

// errNoAnswer is the cause a forwarded request is cancelled with when the
// leader has not begun to answer it within the longest the leader itself
// takes (its request timeout, and the body's when the body is streamed),
// plus answerMargin: the leader's process is up but does not serve.
var errNoAnswer = errors.New("the leader did not answer the forwarded request in time")

// answerMargin is what a forwarded request allows on top of the leader's
// own bound before it stops waiting for the first byte of an answer.
const answerMargin = 2 * time.Second

// forwardState is what one attempt to forward learns: whether any of the
// request may have reached the leader, and whether the caller should send
// it to the next leader.
type forwardState struct {
	replayable bool        // the body is in memory and may be sent again
	sent       atomic.Bool // the request's headers were written to the leader's connection
	resend     bool        // set by the error handler: send it again
}

type forwardStateKey struct{}

// leaderPoll is how often a forwarded request that has not been answered
// yet checks that its leader is still the leader.
const leaderPoll = 20 * time.Millisecond

// Forwarding holds a request while the cluster has no usable leader (an
// election is under way, or the leader this node knows stopped accepting
// connections) and forwards it to the next leader, instead of answering
// 503 and leaving the client to back off and guess when to come back.
// It holds only while this node heard from a leader recently: a node cut
// off for longer answers 503 at once so that clients move on.
const (
	holdPoll       = 5 * time.Millisecond
	holdAfterLeads = 2 * time.Second // about two elections at the default timeouts
)

func newForwarder(ctx context.Context, c Cluster, f0 *fsm.FSM, log *slog.Logger, holdMax time.Duration) *forwarder {
	f := &forwarder{ctx: ctx, cluster: c, fsm: f0, log: log, holdMax: holdMax, scheme: "http",
		peerOf: func(*http.Request) string { return "" }}
	f.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	f.proxy = &httputil.ReverseProxy{
		Transport: f.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr := pr.In.Context().Value(leaderKey{}).(string)
			pr.SetURL(&url.URL{Scheme: f.scheme, Host: addr})
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(headerForwarded, c.ID())
			// Only this node vouches for a peer, and only for the member
			// whose certificate it verified; never pass on a client's claim.
			pr.Out.Header.Del(headerPeer)
			if p, _ := pr.In.Context().Value(peerKey{}).(string); p != "" {
				pr.Out.Header.Set(headerPeer, p)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(headerLeader) != "" {
				return nil // a non-leader's refusal, with its own view of the leader
			}
			resp.Header.Set(headerLeader, resp.Request.URL.Host)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if cause := context.Cause(r.Context()); errors.Is(cause, errLeaderLost) || errors.Is(cause, errNoAnswer) {
				// This node stopped naming the leader the request went to
				// before it answered (a stopped or paused process accepts
				// connections and never answers), or the leader took longer
				// than it ever should.
				fs, _ := r.Context().Value(forwardStateKey{}).(*forwardState)
				sent := fs == nil || fs.sent.Load()
				read := r.Method == http.MethodGet || r.Method == http.MethodHead
				switch {
				case errors.Is(cause, errLeaderLost) && fs != nil && fs.replayable && (!sent || read):
					fs.resend = true // the caller sends it to the next leader
				case !sent || read:
					f.hint(w)
					writeError(w, errorf(codeUnavailable, "%v; nothing was done, retry", cause))
				default:
					f.hint(w)
					writeError(w, errorf(codeOutcomeUnknown, "%v after the write was sent; "+
						"retry only with the same Idempotency-Key or session place", cause))
				}
				return
			}
			if errors.Is(err, context.Canceled) {
				// The caller went away (or the node is closing): nobody
				// may read this, but never let it become an empty 200.
				writeError(w, errorf(codeUnavailable, "forwarding to the leader was canceled"))
				return
			}
			if df, ok := r.Context().Value(dialFailureKey{}).(*dialFailure); ok && isDialError(err) {
				df.err = err // the caller holds the request for the next leader
				return
			}
			log.Debug("forward to leader failed", "err", err)
			if r.Method != http.MethodGet && r.Method != http.MethodHead && !isDialError(err) {
				// The leader may have received the write, and applied it.
				writeError(w, errorf(codeOutcomeUnknown, "forwarding to the leader failed after sending the write (%v); "+
					"retry only with the same Idempotency-Key or session place", err))
				return
			}
			writeError(w, errorf(codeUnavailable, "forwarding to the leader failed: %v", err))
		},
	}
	return f
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// forward sends the request to the leader and reports true, or reports
// false when this node became the leader while it held the request (the
// caller serves it). It answers 503 when the request was already forwarded
// once, or when no leader turns up while holding is worthwhile.
//
// With limit >= 0 the caller is authenticated: its body, at most limit
// bytes (413 beyond), is read into memory so that it can be sent again to
// the next leader. With limit < 0 the caller is not known here: the body is
// never read by this node, only streamed to the leader, and never resent.
// within is the longest the leader takes to answer the route (its request
// timeout); a leader that has not begun to answer after that and
// answerMargin is given up on.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, limit int64, within time.Duration) bool {
	if r.Header.Get(headerForwarded) != "" {
		f.hint(w)
		writeError(w, errorf(codeUnavailable, "node %s is not the leader (forwarded by %s)",
			f.cluster.ID(), r.Header.Get(headerForwarded)))
		return true
	}
	var body []byte
	replayable := false
	if limit >= 0 {
		var err error
		if body, err = readBody(w, r, limit, cmp.Or(f.bodyTimeout, defaultBodyTimeout)); err != nil {
			writeError(w, err)
			return true
		}
		replayable = true
	} else {
		within += cmp.Or(f.bodyTimeout, defaultBodyTimeout) // the leader reads the body as it comes
	}
	within += answerMargin
	df := &dialFailure{}
	ctx := r.Context()
	if p := f.peerOf(r); p != "" {
		ctx = context.WithValue(ctx, peerKey{}, p)
	}
	if replayable {
		ctx = context.WithValue(ctx, dialFailureKey{}, df)
	}
	holdCtx, cancel := context.WithTimeout(r.Context(), f.holdMax)
	defer cancel()
	var unusable string // a leader id whose address refused connections
	why := ""
	for {
		if f.cluster.IsLeader() {
			if replayable {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			return false
		}
		id, _ := f.cluster.Leader()
		switch id {
		case "":
			why = "no leader is known right now"
		case unusable:
			why = fmt.Sprintf("the leader %s does not accept connections: %v", id, df.err)
		default:
			addr := f.leaderAddr(r.Context(), id)
			if addr == "" {
				writeError(w, errorf(codeUnavailable, "the leader %s has not published its HTTP address yet", id))
				return true
			}
			if replayable {
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				// A kept-alive connection found broken before anything was
				// written to it is replaced by a fresh one (net/http does so
				// only when it can rewind the body).
				r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			}
			df.err = nil
			fs := &forwardState{replayable: replayable}
			fctx, stop := f.whileLeading(context.WithValue(ctx, leaderKey{}, addr), id, within, fs)
			f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(fctx, forwardStateKey{}, fs)))
			stop()
			switch {
			case fs.resend && holdCtx.Err() != nil:
				f.hint(w)
				writeError(w, errorf(codeUnavailable, "the leader %s stopped leading before it answered; nothing was done, retry", id))
				return true
			case fs.resend:
				continue // to whichever leader the cluster has now, on a fresh connection
			case df.err == nil:
				return true
			}
			unusable = id
			continue
		}
		if !f.holdOn(holdCtx) {
			f.hint(w)
			writeError(w, errorf(codeUnavailable, "%s", why))
			return true
		}
	}
}

// whileLeading returns a context for forwarding to leader id: once the
// request has a connection and until the first byte of the answer, it is
// cancelled with errLeaderLost as soon as this node's Raft names another
// leader or none, and with errNoAnswer when within has passed. A leader
// whose process is stopped or paused still accepts connections (the
// kernel does) and never answers; without this the request would wait for
// as long as its client does. The answer's body is never cut: once the
// leader answers, its answer stands. stop ends the watch and releases the
// context.
func (f *forwarder) whileLeading(ctx context.Context, id string, within time.Duration, fs *forwardState) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	var once sync.Once
	answered := make(chan struct{})
	exited := make(chan struct{})
	watching := atomic.Bool{}
	watch := func() {
		defer close(exited)
		t := time.NewTicker(leaderPoll)
		defer t.Stop()
		limit := time.NewTimer(within)
		defer limit.Stop()
		for {
			select {
			case <-answered:
				return
			case <-ctx.Done():
				return
			case <-limit.C:
				cancel(errNoAnswer)
				return
			case <-t.C:
				select {
				case <-answered:
					return
				default:
				}
				if cur, _ := f.cluster.Leader(); cur != id {
					cancel(errLeaderLost)
					return
				}
			}
		}
	}
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			if watching.CompareAndSwap(false, true) {
				go watch()
			}
		},
		WroteHeaders:         func() { fs.sent.Store(true) },
		GotFirstResponseByte: func() { once.Do(func() { close(answered) }) },
	}
	return httptrace.WithClientTrace(ctx, trace), func() {
		once.Do(func() { close(answered) })
		if watching.Load() {
			<-exited
		}
		cancel(nil)
	}
}

// hint sets X-Baton-Leader on a 503 this node answers instead of
// forwarding: the HTTP address of the leader its Raft names now, if any
// and if that is another node, so that a client can go there directly.
func (f *forwarder) hint(w http.ResponseWriter) {
	id, _ := f.cluster.Leader()
	if id == "" || id == f.cluster.ID() {
		return
	}
	if addr := f.cluster.HTTPAddrOf(id); addr != "" {
		w.Header().Set(headerLeader, addr)
	}
}

// holdOn waits one poll interval for the leadership to change, and reports
// whether holding the request is still worthwhile.
func (f *forwarder) holdOn(ctx context.Context) bool {
	if time.Since(f.cluster.LastLeaderContact()) > holdAfterLeads {
		return false
	}
	t := time.NewTimer(holdPoll)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaderAddr returns the leader's HTTP address. A new leader publishes it
// in the first entry of its term; a follower that knows the leader but has
// not applied that entry yet waits for it, briefly.
func (f *forwarder) leaderAddr(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		_, changed := f.fsm.Changed()
		if addr := f.cluster.HTTPAddrOf(id); addr != "" {
			return addr
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ""
		}
	}
}

// commitProbe is one request for the leader's commit index, shared by every
// caller that asked before it was sent.
type commitProbe struct {
	done  chan struct{}
	index uint64
	err   error
}

// leaderCommit returns the leader's commit index, asked after this call
// began: everything the leader acknowledged before then is at or below it.
// Concurrent callers share one request (GET /readyz of the leader, over
// the kept-alive connections), so a flood of unknown tokens costs the
// leader about one small request per round trip.
func (f *forwarder) leaderCommit(ctx context.Context) (uint64, error) {
	f.probeMu.Lock()
	if f.closed {
		f.probeMu.Unlock()
		return 0, errors.New("this node is shutting down")
	}
	p := f.probe
	if p == nil {
		p = &commitProbe{done: make(chan struct{})}
		f.probe = p
		f.probes.Go(func() { f.runProbe(p) })
	}
	f.probeMu.Unlock()
	select {
	case <-p.done:
		return p.index, p.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ready asks the node at addr for its /readyz and returns nil on 200, or
// the reason it gave.
func (f *forwarder) ready(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url(addr, "/readyz"), nil)
	if err != nil {
		return err
	}
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	if body.Error.Message == "" {
		return fmt.Errorf("its /readyz answered %s", resp.Status)
	}
	return errors.New(body.Error.Message)
}

func (f *forwarder) runProbe(p *commitProbe) {
	defer close(p.done)
	f.probeMu.Lock()
	f.probe = nil // later callers need a probe sent after they asked
	f.probeMu.Unlock()
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Second)
	defer cancel()
	id, _ := f.cluster.Leader()
	if id == "" {
		p.err = errors.New("no leader is known")
		return
	}
	addr := f.leaderAddr(ctx, id)
	if addr == "" {
		p.err = fmt.Errorf("the leader %s has no published address", id)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url(addr, "/readyz"), nil)
	if err != nil {
		p.err = err
		return
	}
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		p.err = err
		return
	}
	defer resp.Body.Close()
	var body struct {
		NodeID      string  `json:"node_id"`
		CommitIndex *uint64 `json:"commit_index"`
		Error       struct {
			NodeID      string  `json:"node_id"`
			CommitIndex *uint64 `json:"commit_index"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body); err != nil {
		p.err = err
		return
	}
	node, commit := body.NodeID, body.CommitIndex
	if commit == nil {
		node, commit = body.Error.NodeID, body.Error.CommitIndex
	}
	if commit == nil || node != id {
		p.err = fmt.Errorf("no commit index from the leader %s", id)
		return
	}
	p.index = *commit
}

// close waits for the probe in flight (the server's context, cancelled
// first, ends it) and refuses new ones; forwarding itself needs no close.
func (f *forwarder) close() {
	f.probeMu.Lock()
	f.closed = true
	f.probeMu.Unlock()
	f.probes.Wait()
	f.transport.CloseIdleConnections()
}

// unavailable maps node errors to 503 unavailable (nothing was done) or,
// for a command that was proposed, 504 outcome_unknown; other errors pass
// through.
func unavailable(err error) error {
	switch {
	case errors.Is(err, node.ErrOutcomeUnknown):
		return errorf(codeOutcomeUnknown, "the write was proposed but its outcome is not known (%v); "+
			"retry only with the same Idempotency-Key or session place", err)
	case errors.Is(err, node.ErrNotLeader), errors.Is(err, node.ErrUnavailable), errors.Is(err, node.ErrClosed),
		errors.Is(err, replica.ErrLeadershipChanged):
		return errorf(codeUnavailable, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(codeUnavailable, "timed out waiting for the cluster; retry")
	case errors.Is(err, context.Canceled):
		return errorf(codeUnavailable, "request cancelled")
	}
	return err
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
