package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"go.uber.org/goleak"
)

// Most watch tests run against the package's node through recording
// proxies, which cut a stream or hold it silent on cue. sseNode, a stub
// whose watch answers are scripted per connection, remains for what batond
// does not send: SSE forms it never writes (TestWatchParsesStream), a 503
// to a watch (any node serves one), and history compacted on cue.

// sseNode is a stub node whose watch answers are scripted per connection.
type sseNode struct {
	URL    string
	script func(w http.ResponseWriter, r *http.Request, n int)

	mu    sync.Mutex
	conns []sseConnReq
}

type sseConnReq struct {
	query, lastEventID, auth, accept string
}

func newSSENode(t *testing.T, script func(w http.ResponseWriter, r *http.Request, n int)) *sseNode {
	t.Helper()
	node := &sseNode{script: script}
	s := httptest.NewServer(http.HandlerFunc(node.serve))
	node.URL = s.URL
	t.Cleanup(s.Close)
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
	return newClientCfg(t, client.Config{Endpoints: endpoints, Token: env.Token, Timeout: 2 * time.Second, MaxRetry: 3 * time.Second})
}

// kvPut writes key in namespace ns on the package's node and returns the
// write's log index.
func kvPut(t *testing.T, ns, key string) uint64 {
	t.Helper()
	var m client.Meta
	if _, err := nodeClient(t).PutKV(bg, "acme", ns, key, client.PutKVRequest{Value: json.RawMessage(`1`)}, client.CaptureMeta(&m)); err != nil {
		t.Fatal(err)
	}
	return m.Index
}

// waitRequests polls until p has seen n requests.
func waitRequests(t *testing.T, p *clustertest.Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy saw %d requests, want %d", p.Count(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, bounded by deadline
	}
}

// startWatch returns a watcher closed at cleanup (before the proxies).
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

// TestWatchParsesStream: a stub, for SSE forms batond does not write but a
// proxy on the way may (CRLF line ends, data over several lines, comments,
// unknown events, retry fields). TestWatchRealStream reads a real one.
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
	if req.query != "from_index=4&prefix=p&resources=kv%2Ctasks" || req.lastEventID != "4" || req.auth != "Bearer "+env.Token || req.accept != "text/event-stream" {
		t.Errorf("got request %+v", req)
	}
}

// TestWatchRealStream: the node's own events come typed, in order, and the
// request carries the resume point, filter, token and Accept header.
func TestWatchRealStream(t *testing.T) {
	p := proxy(t, nil)
	ns := uniqueName("watch")
	from := kvPut(t, ns, "before")
	w := startWatch(t, watchClient(t, p.URL), client.WatchOptions{Resources: []string{"kv", "tasks"}, Prefix: ns + "/", FromIndex: from})
	put := kvPut(t, ns, "a")
	if err := nodeClient(t).DeleteKV(bg, "acme", ns, "a", nil); err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var entry client.KVEntry
	if err := json.Unmarshal(ev.Value, &entry); err != nil || entry.Key != "a" || !jsonEqual(entry.Value, `1`) {
		t.Errorf("got value %s (%v), want the entry a = 1", ev.Value, err)
	}
	if ev.Index != put || ev.ID != strconv.FormatUint(put, 10) || ev.Resource != "kv" || ev.Key != ns+"/a" || ev.Type != "put" {
		t.Errorf("got %+v, want the put of %s/a at index %d", ev, ns, put)
	}
	ev, err = w.Next(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Index <= put || ev.Resource != "kv" || ev.Key != ns+"/a" || ev.Type != "delete" {
		t.Errorf("got %+v, want the delete of %s/a after index %d", ev, ns, put)
	}
	req := p.Requests()[0]
	wantQuery := fmt.Sprintf("from_index=%d&prefix=%s%%2F&resources=kv%%2Ctasks", from, ns)
	if req.Query != wantQuery || req.Header.Get("Last-Event-ID") != strconv.FormatUint(from, 10) ||
		req.Auth != "Bearer "+env.Token || req.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("got request %s %v, want query %s", req.Query, req.Header, wantQuery)
	}
}

// TestWatchResumesOnNextEndpoint: a stream that breaks resumes on the next
// endpoint with Last-Event-ID; events the new node sends again are dropped,
// so every event is delivered once, in order.
func TestWatchResumesOnNextEndpoint(t *testing.T) {
	var down atomic.Bool
	a := proxy(t, func(int, *http.Request) clustertest.Hop {
		if down.Load() {
			return clustertest.Hop{Fault: clustertest.Hangup}
		}
		return clustertest.Hop{}
	})
	b := proxy(t, nil)
	ns := uniqueName("resume")
	from := kvPut(t, ns, "0")
	var want []string
	for _, k := range []string{"1", "2"} {
		want = append(want, strconv.FormatUint(kvPut(t, ns, k), 10))
	}
	w := startWatch(t, watchClient(t, a.URL, b.URL), client.WatchOptions{Prefix: ns + "/", FromIndex: from})
	got := nextIDs(t, w, 2)
	down.Store(true) // the first node dies under its stream
	a.CutConnections()
	for _, k := range []string{"3", "4"} {
		want = append(want, strconv.FormatUint(kvPut(t, ns, k), 10))
	}
	got = append(got, nextIDs(t, w, 2)...)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
	if reqs := b.Requests(); len(reqs) != 1 || reqs[0].Header.Get("Last-Event-ID") != want[1] || reqs[0].Query != "from_index="+want[1]+"&prefix="+ns+"%2F" {
		t.Errorf("got requests on the second node %+v, want one resuming after %s", reqs, want[1])
	}
}

// TestWatchFailsOver: a refused port, a cut connection and a 503 are
// passed over for the next endpoint. The 503 is a stub's: any batond
// serves a watch; a proxy or load balancer in front may refuse one.
func TestWatchFailsOver(t *testing.T) {
	down := closedEndpoint(t)
	hangup, accepted := clustertest.HangupEndpoint(t)
	busy := newSSENode(t, func(w http.ResponseWriter, r *http.Request, n int) { unavailable(w, r, n) })
	live := proxy(t, nil)
	ns := uniqueName("failover")
	from := kvPut(t, ns, "0")
	w := startWatch(t, watchClient(t, down, hangup, busy.URL, live.URL), client.WatchOptions{Prefix: ns + "/", FromIndex: from})
	want := strconv.FormatUint(kvPut(t, ns, "1"), 10)
	if got := nextIDs(t, w, 1); got[0] != want {
		t.Errorf("got %v, want [%s]", got, want)
	}
	if n := len(busy.requests()); n != 1 {
		t.Errorf("got %d requests to the 503 node, want 1", n)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("got %d connections to the hanging-up endpoint, want 1", n)
	}
}

// TestWatchFromNowPinsIndex: a watch "from now" that reconnects before its
// first event resumes at the index the first node reported.
func TestWatchFromNowPinsIndex(t *testing.T) {
	a := proxy(t, func(n int, _ *http.Request) clustertest.Hop {
		if n == 1 {
			return clustertest.Hop{Fault: clustertest.HeadThenCut}
		}
		return clustertest.Hop{Fault: clustertest.Hangup}
	})
	b := proxy(t, nil)
	ns := uniqueName("fromnow")
	w := startWatch(t, watchClient(t, a.URL, b.URL), client.WatchOptions{Prefix: ns + "/"})
	got := make(chan []string, 1)
	go func() { got <- nextIDs(t, w, 1) }() // Next connects
	// The node flushes the stream's head at once (with a comment line), so
	// the cut comes before any event and the watch resumes on b.
	waitRequests(t, b, 1)
	want := strconv.FormatUint(kvPut(t, ns, "1"), 10)
	if ids := <-got; len(ids) != 1 || ids[0] != want {
		t.Errorf("got %v, want [%s]", ids, want)
	}
	first := a.Requests()[0]
	if first.Query != "prefix="+ns+"%2F" || first.Header.Get("Last-Event-ID") != "" || first.Index == "" {
		t.Errorf("got first request %+v, want no resume point and an index answered", first)
	}
	if reqs := b.Requests(); reqs[0].Header.Get("Last-Event-ID") != first.Index || reqs[0].Query != "from_index="+first.Index+"&prefix="+ns+"%2F" {
		t.Errorf("got resumed request %+v, want it after index %s", reqs[0], first.Index)
	}
}

// TestWatchCompacted: a stub, as compacting a node's history on cue is
// out of a test's reach.
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
	reader, err := nodeClient(t).CreatePrincipal(bg, "acme", uniqueName("kvreader"),
		[]client.Grant{{Resource: "kv", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	hits := []*clustertest.Proxy{proxy(t, nil), proxy(t, nil)}
	c := newClientCfg(t, client.Config{Endpoints: []string{hits[0].URL, hits[1].URL}, Token: reader.Token,
		Timeout: 2 * time.Second, MaxRetry: 3 * time.Second})
	w := startWatch(t, c, client.WatchOptions{Resources: []string{"tasks"}})
	for range 2 {
		if _, err := w.Next(ctxTimeout(t, 5*time.Second)); !errors.Is(err, client.ErrForbidden) {
			t.Fatalf("got %v, want ErrForbidden", err)
		}
	}
	if n0, n1 := hits[0].Count(), hits[1].Count(); n0+n1 != 1 {
		t.Errorf("got %d+%d requests, want 1 (a 403 is not retried)", n0, n1)
	}
}

// TestWatchIdleStreamIsDropped: a stream that stays silent past the idle
// timeout (a paused node) is abandoned for the next endpoint.
func TestWatchIdleStreamIsDropped(t *testing.T) {
	silent := proxy(t, func(int, *http.Request) clustertest.Hop { return clustertest.Hop{Fault: clustertest.HeadThenStall} })
	live := proxy(t, nil)
	ns := uniqueName("idle")
	from := kvPut(t, ns, "0")
	kvPut(t, ns, "1")
	w := startWatch(t, watchClient(t, silent.URL, live.URL), client.WatchOptions{Prefix: ns + "/", FromIndex: from, IdleTimeout: 200 * time.Millisecond})
	start := time.Now()
	nextIDs(t, w, 1)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("got the event after %v, want it after the 200ms idle timeout", d)
	}
	if s, l := silent.Count(), live.Count(); s != 1 || l != 1 {
		t.Errorf("got %d requests to the silent node and %d to the live one, want 1 and 1", s, l)
	}
}

// TestWatchOpenThenBreakBacksOff: a node that accepts the watch, sends its
// open acknowledgement (an SSE comment) and then breaks the stream, every
// time, is retried with backoff until the retry budget is spent: only a
// delivered event counts as the stream having worked.
func TestWatchOpenThenBreakBacksOff(t *testing.T) {
	p := proxy(t, func(int, *http.Request) clustertest.Hop { return clustertest.Hop{Fault: clustertest.AckThenCut} })
	c := newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, Timeout: 2 * time.Second, MaxRetry: 500 * time.Millisecond})
	w := startWatch(t, c, client.WatchOptions{Prefix: uniqueName("ackcut") + "/"})
	ctx := ctxTimeout(t, 30*time.Second)
	if _, err := w.Next(ctx); !errors.Is(err, client.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("got %v (context: %v), want ErrUnavailable from the 500ms retry budget", err, ctx.Err())
	}
	// The proxy records a status when its handler ends, which may be
	// after the client saw the cut.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < len(p.Requests()); {
		switch r := p.Requests()[i]; {
		case r.Status == http.StatusOK:
			i++
		case r.Status == 0 && time.Now().Before(deadline):
			time.Sleep(5 * time.Millisecond) // polling interval, bounded by deadline
		default:
			t.Fatalf("request %d: status %d, want each watch opened (200)", i+1, r.Status)
		}
	}
}

// TestWatchNextContext: a Next that times out leaves the watcher usable;
// the next call resumes after the last event delivered.
func TestWatchNextContext(t *testing.T) {
	p := proxy(t, nil)
	ns := uniqueName("nextctx")
	from := kvPut(t, ns, "0")
	var want []string
	for _, k := range []string{"1", "2"} {
		want = append(want, strconv.FormatUint(kvPut(t, ns, k), 10))
	}
	w := startWatch(t, watchClient(t, p.URL), client.WatchOptions{Prefix: ns + "/", FromIndex: from})
	nextIDs(t, w, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	for _, k := range []string{"3", "4"} {
		want = append(want, strconv.FormatUint(kvPut(t, ns, k), 10))
	}
	if got := nextIDs(t, w, 2); strings.Join(got, " ") != strings.Join(want[2:], " ") {
		t.Errorf("got %v, want %v", got, want[2:])
	}
	if reqs := p.Requests(); len(reqs) != 2 || reqs[1].Header.Get("Last-Event-ID") != want[1] {
		t.Errorf("got %d requests, want a second one resuming after %s", len(reqs), want[1])
	}
}

// TestWatchClose: Close unblocks a waiting Next, which returns
// ErrWatcherClosed, and leaves no goroutine behind.
func TestWatchClose(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(func() { // last: after the proxy has shut down
		tr.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
	p := proxy(t, nil)
	ns := uniqueName("close")
	from := kvPut(t, ns, "0")
	kvPut(t, ns, "1")
	c := newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, HTTPClient: &http.Client{Transport: tr}})
	w := c.Watch(context.Background(), "acme", client.WatchOptions{Prefix: ns + "/", FromIndex: from})
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
	ctx := ctxTimeout(t, time.Minute)
	if _, err := w.Next(ctx); !errors.Is(err, client.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("got %v (context: %v), want ErrUnavailable from the 300ms retry budget", err, ctx.Err())
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
