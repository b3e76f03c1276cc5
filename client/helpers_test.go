package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"go.uber.org/goleak"
)

// newClient builds a client with the package's admin token, a short
// per-attempt timeout and retry budget, and no session: every write
// carries a random Idempotency-Key (session_test.go covers sessions).
func newClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	return newClientCfg(t, client.Config{Endpoints: endpoints, Token: env.Token, NoSession: true,
		Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
}

// proxy is a recording proxy in front of the package's node; route, when
// not nil, chooses each request's hop (clustertest.NewProxy).
func proxy(t *testing.T, route func(n int, r *http.Request) clustertest.Hop) *clustertest.Proxy {
	return clustertest.NewProxy(t, env.URL(), route)
}

// leaderless is the hop to the node without a leader: a real 503.
func leaderless() clustertest.Hop { return clustertest.Hop{To: env.Leaderless} }

func newClientCfg(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// serve starts a fake node. It has no client sessions, as a server from
// before them: the client then sends a random Idempotency-Key with every
// write (session_test.go covers sessions).
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(withoutSessions(h))
	t.Cleanup(s.Close)
	return s
}

func withoutSessions(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint", nil)
			return
		}
		h.ServeHTTP(w, r)
	}
}

// recorder is a fake node that records requests and answers with reply.
type recorder struct {
	mu    sync.Mutex
	reqs  []recorded
	reply func(w http.ResponseWriter, r *http.Request, n int)
}

type recorded struct {
	Method, Path, Query, Key, Auth string
	Body                           []byte
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery,
		r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), body})
	n := len(rec.reqs)
	rec.mu.Unlock()
	rec.reply(w, r, n)
}

func (rec *recorder) requests() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.reqs...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	obj := map[string]any{"code": code, "message": msg}
	for k, v := range details {
		obj[k] = v
	}
	writeJSON(w, status, map[string]any{"error": obj})
}

func tenantsOK(w http.ResponseWriter, _ *http.Request, _ int) {
	writeJSON(w, 200, map[string]any{"tenants": []string{"acme"}})
}

func unavailable(w http.ResponseWriter, _ *http.Request, _ int) {
	w.Header().Set("Retry-After", "0")
	writeError(w, 503, "unavailable", "no leader", nil)
}

// closedEndpoint returns the URL of a server that has been shut down, so
// connecting to it is refused.
func closedEndpoint(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	return s.URL
}

// hangupEndpoint accepts connections and closes them at once (EOF before
// any response). It returns the URL and a counter of accepted connections.
func hangupEndpoint(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String(), &n
}

// stallEndpoint holds every request until the client gives up on it.
func stallEndpoint(t *testing.T) (string, *atomic.Int64) {
	var n atomic.Int64
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		<-r.Context().Done()
	})
	return s.URL, &n
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeClient is a client of the examples' batond (TestMain), with a
// transport of its own that the test's cleanup closes.
func nodeClient(t *testing.T) *client.Client {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	return newClientCfg(t, client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","),
		Token: os.Getenv("BATON_TOKEN"), HTTPClient: hc})
}

// noLeaks fails the test if it leaves goroutines behind. Call it first, so
// that its cleanup runs after every other (servers closed, clients idle).
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}
