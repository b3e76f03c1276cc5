package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/node"
)

// headerForwarded marks a request a follower forwarded, so that a node that
// is not the leader either answers 503 instead of forwarding in a loop.
const headerForwarded = "X-Baton-Forwarded-By"

// headerLeader, on an answer a follower forwarded, is the leader's HTTP
// address (host:port), so that a client can send its next requests there
// and spare both nodes the extra hop.
const headerLeader = "X-Baton-Leader"

type forwarder struct {
	cluster   Cluster
	fsm       *fsm.FSM
	log       *slog.Logger
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	holdMax   time.Duration // the longest one request is held
	scheme    string        // of the peers' API: http, or https (useTLS)
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

// Forwarding holds a request while the cluster has no usable leader (an
// election is under way, or the leader this node knows stopped accepting
// connections) and forwards it to the next leader, instead of answering
// 503 and leaving the client to back off and guess when to come back.
// It holds only while this node heard from a leader recently: a node cut
// off for longer answers 503 at once so that clients move on.
const (
	holdPoll       = 5 * time.Millisecond
	holdAfterLeads = 2 * time.Second // about two elections at the default timeouts
	maxHeldBody    = 8 << 20         // bodies above this are not replayed
)

func newForwarder(c Cluster, f0 *fsm.FSM, log *slog.Logger, holdMax time.Duration) *forwarder {
	f := &forwarder{cluster: c, fsm: f0, log: log, holdMax: holdMax, scheme: "http",
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
			resp.Header.Set(headerLeader, resp.Request.URL.Host)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			if df, ok := r.Context().Value(dialFailureKey{}).(*dialFailure); ok && isDialError(err) {
				df.err = err // the caller holds the request for the next leader
				return
			}
			log.Debug("forward to leader failed", "err", err)
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
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(headerForwarded) != "" {
		writeError(w, errorf(codeUnavailable, "node %s is not the leader (forwarded by %s)",
			f.cluster.ID(), r.Header.Get(headerForwarded)))
		return true
	}
	body, replayable := f.replayableBody(r)
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
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			return false
		}
		id, _ := f.cluster.Leader()
		switch {
		case id == "":
			why = "no leader is known right now"
		case id == unusable:
			why = fmt.Sprintf("the leader %s does not accept connections: %v", id, df.err)
		default:
			addr := f.leaderAddr(r.Context(), id)
			if addr == "" {
				writeError(w, errorf(codeUnavailable, "the leader %s has not published its HTTP address yet", id))
				return true
			}
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			df.err = nil
			f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, leaderKey{}, addr)))
			if df.err == nil {
				return true
			}
			unusable = id
			continue
		}
		if !f.holdOn(holdCtx) {
			writeError(w, errorf(codeUnavailable, "%s", why))
			return true
		}
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

// replayableBody reads a small body into memory so that the request can be
// sent again after a failed dial. Large bodies are sent once.
func (f *forwarder) replayableBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength < 0 || r.ContentLength > maxHeldBody {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxHeldBody+1))
	if err != nil || len(b) > maxHeldBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
		return nil, false
	}
	r.Body.Close()
	return b, true
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

func (f *forwarder) close() { f.transport.CloseIdleConnections() }

// unavailable maps node errors to 503; other errors pass through.
func unavailable(err error) error {
	switch {
	case errors.Is(err, node.ErrNotLeader), errors.Is(err, node.ErrUnavailable), errors.Is(err, node.ErrClosed):
		return errorf(codeUnavailable, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(codeUnavailable, "timed out waiting for the cluster; the outcome is unknown, retry with the same Idempotency-Key")
	case errors.Is(err, context.Canceled):
		return errorf(codeUnavailable, "request cancelled")
	}
	return err
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
