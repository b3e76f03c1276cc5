package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"go.uber.org/goleak"
)

// The tests run against the package's real batond processes (TestMain,
// clustertest); the helpers here are thin shorthands for them.

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
	return clustertest.NewClient(t, cfg)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context { return clustertest.CtxTimeout(t, d) }

func closedEndpoint(t *testing.T) string { return clustertest.ClosedEndpoint(t) }

// serve starts a stub node (clustertest.Stub), only for a subject a real
// batond cannot produce; each caller says why.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server { return clustertest.Stub(t, h) }

var (
	writeJSON  = clustertest.WriteJSON
	writeError = clustertest.WriteError
)

// recorder is a stub's handler that records requests and answers with
// reply.
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

func unavailable(w http.ResponseWriter, _ *http.Request, _ int) {
	w.Header().Set("Retry-After", "0")
	writeError(w, 503, "unavailable", "no leader", nil)
}

// nodeClient is a client of the package's batond (TestMain), as the
// examples find it, with a transport of its own that the test's cleanup
// closes.
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
