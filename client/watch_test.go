package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"go.uber.org/goleak"
)

// sseNode is a fake node whose watch answers are scripted per connection.
type sseNode struct {
	URL    string
	stop   chan struct{} // closed at cleanup: every held stream ends
	script func(w http.ResponseWriter, r *http.Request, n int)

	mu    sync.Mutex
	conns []sseConnReq
}

type sseConnReq struct {
	query, lastEventID, auth, accept string
}

func newSSENode(t *testing.T, script func(w http.ResponseWriter, r *http.Request, n int)) *sseNode {
	t.Helper()
	node := &sseNode{stop: make(chan struct{}), script: script}
	s := httptest.NewServer(http.HandlerFunc(node.serve))
	node.URL = s.URL
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(node.stop) }) // runs first: held streams end before Close waits for them
	return node
}

func (node *sseNode) serve(w http.ResponseWriter, r *http.Request) {
	node.mu.Lock()
	node.conns = append(node.conns, sseConnReq{r.URL.RawQuery, r.Header.Get("Last-Event-ID"),
		r.Header.Get("Authorization"), r.Header.Get("Accept")})
	n := len(node.conns)
	node.mu.Unlock()
	node.script(w, r, n)
}

func (node *sseNode) requests() []sseConnReq {
	node.mu.Lock()
	defer node.mu.Unlock()
	return append([]sseConnReq(nil), node.conns...)
}

// hold keeps a stream open until the client or the test goes away.
func (node *sseNode) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-node.stop:
	}
}

// streamHead starts an event stream reporting index as X-Baton-Index.
func streamHead(w http.ResponseWriter, index uint64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Baton-Index", fmt.Sprint(index))
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
}

// sendEvents writes kv put events with the given ids; the key is "ns/<id>".
func sendEvents(w http.ResponseWriter, ids ...string) {
	for _, id := range ids {
		idx, _, _ := strings.Cut(id, ".")
		fmt.Fprintf(w, "id: %s\ndata: {\"index\": %s, \"resource\": \"kv\", \"key\": \"ns/%s\", \"type\": \"put\", \"value\": {\"v\": %q}}\n\n", id, idx, id, id)
	}
	w.(http.Flusher).Flush()
}

func sseError(w http.ResponseWriter, code string) {
	fmt.Fprintf(w, "event: error\ndata: {\"error\": {\"code\": %q, \"message\": \"dropped\"}}\n\n", code)
	w.(http.Flusher).Flush()
}

func watchClient(t *testing.T, endpoints ...string) *client.Client {
	return newClientCfg(t, client.Config{Endpoints: endpoints, Token: "tok", Timeout: 2 * time.Second, MaxRetry: 3 * time.Second})
}

// startWatch returns a watcher closed at cleanup (before the fake nodes).
func startWatch(t *testing.T, c *client.Client, opts client.WatchOptions) *client.Watcher {
	w := c.Watch(context.Background(), "acme", opts)
	t.Cleanup(func() { w.Close() })
	return w
}

// nextIDs reads n events and returns their ids.
func nextIDs(t *testing.T, w *client.Watcher, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		ev, err := w.Next(ctxTimeout(t, 5*time.Second))
		if err != nil {
			t.Fatalf("after %v: got %v, want another event", ids, err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func TestWatchParsesStream(t *testing.T) {
	node := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 9)
		fmt.Fprint(w, ": keepalive\n\n")
		fmt.Fprint(w, "id: 5.0\r\ndata: {\"index\": 5, \"resource\": \"tasks\", \"key\": \"t1\", \"type\": \"put\", \"value\": {\"task_id\": \"t1\"}}\r\n\r\n")
		fmt.Fprint(w, "event: other\ndata: {}\n\n") // unknown event types are skipped
		fmt.Fprint(w, "id: 5\ndata: {\"index\": 5, \"resource\": \"kv\",\ndata:  \"key\": \"ns/a\", \"type\": \"delete\"}\n\n")
		fmt.Fprint(w, "retry: 100\n\n")
		sendEvents(w, "6")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, node.URL), client.WatchOptions{Resources: []string{"kv", "tasks"}, Prefix: "p", FromIndex: 4})
	want := []client.Event{
		{ID: "5.0", Index: 5, Resource: "tasks", Key: "t1", Type: "put", Value: []byte(`{"task_id": "t1"}`)},
		{ID: "5", Index: 5, Resource: "kv", Key: "ns/a", Type: "delete"},
		{ID: "6", Index: 6, Resource: "kv", Key: "ns/6", Type: "put", Value: []byte(`{"v": "6"}`)},
	}
	for i, wantEv := range want {
		ev, err := w.Next(ctxTimeout(t, 5*time.Second))
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if fmt.Sprintf("%+v", ev) != fmt.Sprintf("%+v", wantEv) {
			t.Errorf("event %d: got %+v\nwant %+v", i, ev, wantEv)
		}
	}
	req := node.requests()[0]
	if req.query != "from_index=4&prefix=p&resources=kv%2Ctasks" || req.lastEventID != "4" || req.auth != "Bearer tok" || req.accept != "text/event-stream" {
		t.Errorf("got request %+v", req)
	}
}

// TestWatchResumesOnNextEndpoint: a stream that breaks resumes on the next
// endpoint with Last-Event-ID; events the new node sends again are dropped,
// so every event is delivered once, in order.
func TestWatchResumesOnNextEndpoint(t *testing.T) {
	a := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 0)
		sendEvents(w, "1.0", "1", "3.0", "3.1") // then the node dies
	})
	b := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 3)
		sendEvents(w, "1", "3.0", "3.1", "3", "4")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, a.URL, b.URL), client.WatchOptions{FromIndex: 0})
	got := nextIDs(t, w, 6)
	if want := "1.0 1 3.0 3.1 3 4"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if reqs := b.requests(); len(reqs) != 1 || reqs[0].lastEventID != "3.1" || reqs[0].query != "from_index=3" {
		t.Errorf("got requests on the second node %+v, want one resuming after 3.1", reqs)
	}
}

func TestWatchFailsOver(t *testing.T) {
	down := closedEndpoint(t)
	busy := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) { unavailable(w, r, n) })
	live := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 1)
		sendEvents(w, "2")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, down, busy.URL, live.URL), client.WatchOptions{})
	if got := nextIDs(t, w, 1); got[0] != "2" {
		t.Errorf("got %v, want [2]", got)
	}
	if n := len(busy.requests()); n != 1 {
		t.Errorf("got %d requests to the 503 node, want 1", n)
	}
}

// TestWatchFromNowPinsIndex: a watch "from now" that reconnects before its
// first event resumes at the index the first node reported.
func TestWatchFromNowPinsIndex(t *testing.T) {
	a := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) { streamHead(w, 7) })
	b := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 9)
		sendEvents(w, "8")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, a.URL, b.URL), client.WatchOptions{})
	nextIDs(t, w, 1)
	if reqs := a.requests(); reqs[0].query != "" || reqs[0].lastEventID != "" {
		t.Errorf("got first request %+v, want no resume point", reqs[0])
	}
	if reqs := b.requests(); reqs[0].lastEventID != "7" || reqs[0].query != "from_index=7" {
		t.Errorf("got resumed request %+v, want it after index 7", reqs[0])
	}
}

func TestWatchCompacted(t *testing.T) {
	gone := func(w http.ResponseWriter, r *http.Request, n int) {
		writeError(w, 410, "compacted", "index 3 is older than this node's retained history", map[string]any{"floor": 10})
	}
	droppedAfter := func(ids ...string) func(w http.ResponseWriter, r *http.Request, n int) {
		return func(w http.ResponseWriter, r *http.Request, n int) {
			if n > 1 {
				gone(w, r, n)
				return
			}
			streamHead(w, 3)
			sendEvents(w, ids...)
			sseError(w, "compacted")
		}
	}
	serving := func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 3)
		sendEvents(w, "4")
		<-r.Context().Done()
	}
	cases := []struct {
		name    string
		scripts []func(w http.ResponseWriter, r *http.Request, n int)
		wantIDs []string
		wantErr bool
	}{
		{"410", []func(http.ResponseWriter, *http.Request, int){gone}, nil, true},
		{"410 everywhere", []func(http.ResponseWriter, *http.Request, int){gone, gone}, nil, true},
		{"410 on one node only", []func(http.ResponseWriter, *http.Request, int){gone, serving}, []string{"4"}, false},
		{"fell behind", []func(http.ResponseWriter, *http.Request, int){droppedAfter("4")}, []string{"4"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var eps []string
			for _, s := range tc.scripts {
				eps = append(eps, newSSENode(t, s).URL)
			}
			w := startWatch(t, watchClient(t, eps...), client.WatchOptions{FromIndex: 3})
			nextIDs(t, w, len(tc.wantIDs))
			if !tc.wantErr {
				return
			}
			for range 2 { // the error is final
				_, err := w.Next(ctxTimeout(t, 5*time.Second))
				if !errors.Is(err, client.ErrCompacted) {
					t.Fatalf("got %v, want ErrCompacted", err)
				}
			}
		})
	}
}

func TestWatchForbiddenIsFinal(t *testing.T) {
	var hits []*sseNode
	for range 2 {
		hits = append(hits, newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
			writeError(w, 403, "forbidden", `principal "p" cannot read tasks`, nil)
		}))
	}
	w := startWatch(t, watchClient(t, hits[0].URL, hits[1].URL), client.WatchOptions{Resources: []string{"tasks"}})
	for range 2 {
		if _, err := w.Next(ctxTimeout(t, 5*time.Second)); !errors.Is(err, client.ErrForbidden) {
			t.Fatalf("got %v, want ErrForbidden", err)
		}
	}
	if n0, n1 := len(hits[0].requests()), len(hits[1].requests()); n0+n1 != 1 {
		t.Errorf("got %d+%d requests, want 1 (a 403 is not retried)", n0, n1)
	}
}

// TestWatchIdleStreamIsDropped: a stream that stays silent past the idle
// timeout (a paused node) is abandoned for the next endpoint.
func TestWatchIdleStreamIsDropped(t *testing.T) {
	var silent *sseNode
	silent = newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 1)
		silent.hold(r)
	})
	live := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 1)
		sendEvents(w, "2")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, silent.URL, live.URL), client.WatchOptions{IdleTimeout: 200 * time.Millisecond})
	start := time.Now()
	nextIDs(t, w, 1)
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("got the event after %v, want it after the 200ms idle timeout", d)
	}
}

// TestWatchNextContext: a Next that times out leaves the watcher usable;
// the next call resumes after the last event delivered.
func TestWatchNextContext(t *testing.T) {
	release := make(chan struct{})
	node := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 1)
		if n == 1 {
			sendEvents(w, "2.0", "2.1")
			<-r.Context().Done()
			return
		}
		<-release
		sendEvents(w, "2.1", "2", "3")
		<-r.Context().Done()
	})
	w := startWatch(t, watchClient(t, node.URL), client.WatchOptions{FromIndex: 1})
	nextIDs(t, w, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	close(release)
	if got := nextIDs(t, w, 2); strings.Join(got, " ") != "2 3" {
		t.Errorf("got %v, want [2 3]", got)
	}
	if reqs := node.requests(); len(reqs) != 2 || reqs[1].lastEventID != "2.1" {
		t.Errorf("got requests %+v, want a second one resuming after 2.1", reqs)
	}
}

// TestWatchClose: Close unblocks a waiting Next, which returns
// ErrWatcherClosed, and leaves no goroutine behind.
func TestWatchClose(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(func() { // last: after the fake node has shut down
		tr.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
	var node *sseNode
	node = newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		streamHead(w, 1)
		sendEvents(w, "2")
		node.hold(r)
	})
	c := newClientCfg(t, client.Config{Endpoints: []string{node.URL}, HTTPClient: &http.Client{Transport: tr}})
	w := c.Watch(context.Background(), "acme", client.WatchOptions{})
	nextIDs(t, w, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("Next returned %v on a silent stream, want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, client.ErrWatcherClosed) {
			t.Errorf("got %v, want ErrWatcherClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still blocked 5s after Close")
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, client.ErrWatcherClosed) {
		t.Errorf("after Close: got %v, want ErrWatcherClosed", err)
	}
	w.Close() // idempotent
}

func TestWatchGivesUpWhenNoEndpointAnswers(t *testing.T) {
	c := newClientCfg(t, client.Config{Endpoints: []string{closedEndpoint(t), closedEndpoint(t)}, MaxRetry: 300 * time.Millisecond})
	w := startWatch(t, c, client.WatchOptions{})
	start := time.Now()
	if _, err := w.Next(ctxTimeout(t, 10*time.Second)); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("gave up after %v, want about the 300ms retry budget", d)
	}
}

func TestWatchValidates(t *testing.T) {
	c := watchClient(t, closedEndpoint(t))
	for _, tc := range []struct {
		tenant string
		opts   client.WatchOptions
	}{{"", client.WatchOptions{}}, {"acme", client.WatchOptions{AfterID: "x.1"}}} {
		w := c.Watch(context.Background(), tc.tenant, tc.opts)
		if _, err := w.Next(bg); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("Watch(%q, %+v): got %v, want ErrInvalidArgument", tc.tenant, tc.opts, err)
		}
		w.Close()
	}
}
