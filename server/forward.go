package server

import (
	"context"
	"errors"
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

type forwarder struct {
	cluster   Cluster
	fsm       *fsm.FSM
	log       *slog.Logger
	transport *http.Transport
	proxy     *httputil.ReverseProxy
}

type leaderKey struct{}

func newForwarder(c Cluster, f0 *fsm.FSM, log *slog.Logger) *forwarder {
	f := &forwarder{cluster: c, fsm: f0, log: log}
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
			pr.SetURL(&url.URL{Scheme: "http", Host: addr})
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(headerForwarded, c.ID())
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			log.Debug("forward to leader failed", "err", err)
			writeError(w, errorf(codeUnavailable, "forwarding to the leader failed: %v", err))
		},
	}
	return f
}

// forward sends the request to the leader, or answers 503 when there is no
// known leader or the request was already forwarded once.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(headerForwarded) != "" {
		writeError(w, errorf(codeUnavailable, "node %s is not the leader (forwarded by %s)",
			f.cluster.ID(), r.Header.Get(headerForwarded)))
		return
	}
	id, _ := f.cluster.Leader()
	if id == "" {
		writeError(w, errorf(codeUnavailable, "no leader is known right now"))
		return
	}
	addr := f.leaderAddr(r.Context(), id)
	if addr == "" {
		writeError(w, errorf(codeUnavailable, "the leader %s has not published its HTTP address yet", id))
		return
	}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaderKey{}, addr)))
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
