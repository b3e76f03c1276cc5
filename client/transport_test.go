package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connServer is a test server that counts the connections it accepted.
type connServer struct {
	*httptest.Server
	conns  atomic.Int64
	closed atomic.Int64
}

func newConnServer(t *testing.T, h http.HandlerFunc) *connServer {
	t.Helper()
	s := &connServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// waitClosed waits, at most 5 s, until the server has seen n of its
// connections closed.
func (s *connServer) waitClosed(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.closed.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the server saw %d connections closed, want %d", s.closed.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func newTestTransport() *directTransport {
	return newDirectTransport(http.DefaultTransport.(*http.Transport).Clone(), 4)
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// Requests in turn share one connection, whatever the body's framing.
func TestDirectTransportReuse(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/chunked":
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush() // a flushed answer goes out chunked
			w.Write([]byte("part two"))
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s key=%s", r.Method, b, r.Header.Get("Idempotency-Key"))
		default:
			io.WriteString(w, "plain")
		}
	})
	hc := &http.Client{Transport: newTestTransport()}
	for i := 0; i < 3; i++ {
		if code, body := get(t, hc, srv.URL+"/plain"); code != 200 || body != "plain" {
			t.Fatalf("plain: %d %q", code, body)
		}
		if code, body := get(t, hc, srv.URL+"/empty"); code != 204 || body != "" {
			t.Fatalf("empty: %d %q", code, body)
		}
		if code, body := get(t, hc, srv.URL+"/chunked"); code != 200 || body != "part one, part two" {
			t.Fatalf("chunked: %d %q", code, body)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/echo", strings.NewReader(`{"a":1}`))
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != `POST {"a":1} key=k1` {
			t.Fatalf("echo: %q", b)
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections for requests in turn, want 1", n)
	}
}

// A connection idle for longer than IdleConnTimeout is closed, not used:
// the server may be closing it (batond's --http-idle-timeout).
func TestDirectTransportIdleTimeout(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	fallback := http.DefaultTransport.(*http.Transport).Clone()
	fallback.IdleConnTimeout = time.Hour
	tr := newDirectTransport(fallback, 4)
	hc := &http.Client{Transport: tr}
	get(t, hc, srv.URL)
	get(t, hc, srv.URL) // within the timeout: the same connection
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("%d connections for two requests in turn, want 1", n)
	}
	// get reads the timeout on every request: a nanosecond has passed.
	fallback.IdleConnTimeout = time.Nanosecond
	get(t, hc, srv.URL)
	if n := srv.conns.Load(); n != 2 {
		t.Fatalf("%d connections after the first was idle past IdleConnTimeout, want 2", n)
	}
	srv.waitClosed(t, 1) // the idle one, closed by the client
	if n := srv.closed.Load(); n != 1 {
		t.Fatalf("the server saw %d connections closed, want the idle one closed by the client", n)
	}
}

// A body closed before its end costs its connection: the next request
// does not read the rest of the old answer.
func TestDirectTransportUnreadBody(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "small")
	})
	hc := &http.Client{Transport: newTestTransport()}
	resp, err := hc.Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(buf); err == nil {
		t.Error("read after Close succeeded")
	}
	if code, body := get(t, hc, srv.URL+"/small"); code != 200 || body != "small" {
		t.Fatalf("after an unread body: %d %q", code, body)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the first closed with its unread body)", n)
	}
}

// The server closing a kept-alive connection while it is idle costs the
// caller nothing: the pool sees the close before it sends on the
// connection (connUsable), and sends on a new one instead.
func TestDirectTransportServerClosedIdle(t *testing.T) {
	var hits atomic.Int64
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%s", r.Method, b)
	})
	hc := &http.Client{Transport: newTestTransport()}
	closeIdle := func() {
		// The server ends its idle connections, as on a restart or an
		// idle timeout; the client still holds them. Once the server
		// has seen them closed, their FIN is on the client's sockets.
		closed := srv.closed.Load()
		srv.CloseClientConnections()
		srv.waitClosed(t, closed+1)
	}
	post := func(key string) (string, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	get(t, hc, srv.URL)
	closeIdle()
	if code, body := get(t, hc, srv.URL); code != 200 || body != "GET:" {
		t.Fatalf("GET after the server closed the idle connection: %d %q", code, body)
	}
	closeIdle()
	before := hits.Load()
	if body, err := post(""); err != nil || body != "POST:payload" {
		t.Fatalf("POST without an Idempotency-Key after the server closed the idle connection: %q, %v", body, err)
	}
	if n := hits.Load() - before; n != 1 {
		t.Errorf("the POST reached the server %d times, want 1", n)
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (a new one after each close)", n)
	}
}

// A request that fails on a kept-alive connection after it may have
// reached the server is sent again only when that is safe: a POST
// without an Idempotency-Key is not.
func TestDirectTransportNoUnsafeResend(t *testing.T) {
	var hits atomic.Int64
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/drop" {
			io.WriteString(w, "ok")
			return
		}
		hits.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no answer
		}
	})
	hc := &http.Client{Transport: newTestTransport()}
	send := func(key string) error {
		get(t, hc, srv.URL) // a kept-alive connection in the pool
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/drop", strings.NewReader("payload"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := send(""); err == nil {
		t.Fatal("a POST whose connection was dropped without an answer succeeded")
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the POST without an Idempotency-Key reached the server %d times, want 1", n)
	}
	hits.Store(0)
	if err := send("k"); err == nil {
		t.Fatal("a POST the server never answers succeeded")
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the POST with an Idempotency-Key reached the server %d times, want 2 (sent once more on a new connection)", n)
	}
}

// A request whose context ends while the server is slow returns the
// context's error at once, and its connection is not reused.
func TestDirectTransportCancel(t *testing.T) {
	release := make(chan struct{})
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	})
	defer close(release)
	hc := &http.Client{Transport: newTestTransport()}
	get(t, hc, srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	start := time.Now()
	_, err := hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow request: %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("slow request returned after %v", d)
	}
	if code, body := get(t, hc, srv.URL); code != 200 || body != "ok" {
		t.Fatalf("after a cancelled request: %d %q", code, body)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the cancelled one is not reused)", n)
	}

	// A context already done sends nothing.
	done, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	req, _ = http.NewRequestWithContext(done, http.MethodGet, srv.URL, nil)
	if _, err := hc.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("request with a done context: %v, want context.Canceled", err)
	}
}

// https goes to the fallback transport.
func TestDirectTransportTLSFallback(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls")
	}))
	defer srv.Close()
	hc := &http.Client{Transport: newDirectTransport(srv.Client().Transport.(*http.Transport), 4)}
	if code, body := get(t, hc, srv.URL); code != 200 || body != "tls" {
		t.Fatalf("https: %d %q", code, body)
	}
}

// Concurrent callers each get a connection of their own and the answer to
// their own request; the pool keeps at most maxIdle of them.
func TestDirectTransportConcurrent(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Query().Get("i"))
	})
	tr := newTestTransport()
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Go(func() {
			for i := 0; i < 50; i++ {
				want := fmt.Sprintf("%d-%d", g, i)
				resp, err := hc.Get(srv.URL + "/?i=" + want)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != want {
					t.Errorf("got %q, want %q", b, want)
				}
			}
		})
	}
	wg.Wait()
	host := strings.TrimPrefix(srv.URL, "http://")
	tr.mu.Lock()
	idle := len(tr.idle[host])
	tr.mu.Unlock()
	if idle > 4 {
		t.Errorf("%d idle connections kept, want at most 4", idle)
	}
	if n := srv.conns.Load(); n > 16+16*50/2 {
		t.Errorf("%d connections for 800 requests of 16 callers: connections are not reused", n)
	}
	hc.CloseIdleConnections()
	tr.mu.Lock()
	idle = len(tr.idle[host])
	tr.mu.Unlock()
	if idle != 0 {
		t.Errorf("%d idle connections after CloseIdleConnections", idle)
	}
}

// An answer the server gives without reading a large body (401, 413) is
// the request's answer, even when the server resets the connection while
// the body is still being written.
func TestDirectTransportEarlyAnswer(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	hc := &http.Client{Transport: newTestTransport()}
	for _, size := range []int{1 << 10, 8 << 20} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("x", size)))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST of %d bytes: %v; want the server's 413", size, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too large") {
			t.Fatalf("POST of %d bytes: %d %q, want 413", size, resp.StatusCode, b)
		}
	}
}

// An answer's head larger than the fallback's MaxResponseHeaderBytes is
// refused, as net/http's Transport refuses it; the bound covers only the
// head, and the next request on the connection has it afresh.
func TestDirectTransportHeaderLimit(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		size := 2 << 10
		if r.URL.Path == "/big" {
			size = 64 << 10
		}
		w.Header().Set("X-Filler", strings.Repeat("h", size))
		io.WriteString(w, strings.Repeat("b", 256<<10)) // a body larger than the bound
	})
	fallback := http.DefaultTransport.(*http.Transport).Clone()
	fallback.MaxResponseHeaderBytes = 16 << 10
	hc := &http.Client{Transport: newDirectTransport(fallback, 4)}
	for i := 0; i < 3; i++ {
		if code, body := get(t, hc, srv.URL+"/small"); code != 200 || len(body) != 256<<10 {
			t.Fatalf("small head, round %d: %d, %d body bytes", i, code, len(body))
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections for small heads in turn, want 1", n)
	}
	resp, err := hc.Get(srv.URL + "/big")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a 64 KiB head with a 16 KiB bound: %d, want an error", resp.StatusCode)
	}
	if !errors.Is(err, errHeaderTooLarge) {
		t.Fatalf("a 64 KiB head: %v, want %v", err, errHeaderTooLarge)
	}
}

// The default HTTP client sends plain-HTTP requests itself;
// StdHTTPTransport leaves them to net/http's Transport.
func TestDefaultHTTPClientTransport(t *testing.T) {
	for _, std := range []bool{false, true} {
		c, err := New(Config{Endpoints: []string{"http://127.0.0.1:1"}, StdHTTPTransport: std})
		if err != nil {
			t.Fatal(err)
		}
		_, direct := c.hc.Transport.(*directTransport)
		if direct != (canPeek && !std) {
			t.Errorf("StdHTTPTransport %v: the default client's transport is %T", std, c.hc.Transport)
		}
	}
	if err := (Config{Endpoints: []string{"http://127.0.0.1:1"}, StdHTTPTransport: true,
		HTTPClient: http.DefaultClient}).Validate(); err == nil {
		t.Error("StdHTTPTransport with an HTTPClient of the caller's: no error")
	}
}

// Connections idle past IdleConnTimeout are closed even when no request
// goes to their host any more (a former leader), as net/http closes them.
func TestDirectTransportSweepsIdle(t *testing.T) {
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	fallback := http.DefaultTransport.(*http.Transport).Clone()
	fallback.IdleConnTimeout = 100 * time.Millisecond
	tr := newDirectTransport(fallback, 4)
	get(t, &http.Client{Transport: tr}, srv.URL)
	srv.waitClosed(t, 1) // with no request after the first
	tr.mu.Lock()
	left := len(tr.idle)
	tr.mu.Unlock()
	if left != 0 {
		t.Errorf("%d hosts left in the idle pool after the sweep, want 0", left)
	}
}

// rawServer writes on the connection what answer says for the n-th
// request (from 1) it read, and then closes it when answer says so.
func rawServer(t *testing.T, answer func(n int64) (text string, close bool)) (url string, requests *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = &atomic.Int64{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					a, last := answer(requests.Add(1))
					if _, err := io.WriteString(conn, a); err != nil || last {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), requests
}

// A request whose answer broke off partway through its head is not sent
// again, even when it may be (a GET): the server has it, as net/http's
// Transport decides.
func TestDirectTransportNoResendAfterAnswer(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	url, requests := rawServer(t, func(n int64) (string, bool) {
		if n == 2 {
			return "HTTP/1.1 200 OK\r\nContent-Le", true
		}
		return ok, false
	})
	hc := &http.Client{Transport: newTestTransport()}
	get(t, hc, url)
	if resp, err := hc.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("a GET whose answer broke off: %d, want an error", resp.StatusCode)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the server read %d requests, want 2: the broken-off GET was sent again", n)
	}
}

// failConn is a connection whose writes fail before writing anything.
type failConn struct{ net.Conn }

func (failConn) Write([]byte) (int, error)        { return 0, errors.New("broken pipe") }
func (failConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (failConn) Close() error                     { return nil }
func (failConn) SetDeadline(time.Time) error      { return nil }
func (failConn) SetReadDeadline(time.Time) error  { return nil }
func (failConn) SetWriteDeadline(time.Time) error { return nil }

// A write in a client session is sent again on a new connection when none
// of it reached the old one: the client's count of its attempts stays
// right.
func TestDirectTransportResendUnsent(t *testing.T) {
	var hits atomic.Int64
	srv := newConnServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	})
	tr := newTestTransport()
	host := strings.TrimPrefix(srv.URL, "http://")
	dead := &directConn{t: tr, host: host, conn: failConn{}, lr: &limitedReader{conn: failConn{}, left: -1}, cw: &countingWriter{conn: failConn{}}}
	dead.br = bufio.NewReader(dead.lr)
	dead.bw = bufio.NewWriter(dead.cw)
	tr.put(dead) // as if kept alive and then broken
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
	req.Header.Set(headerSessionSeq, "7")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("a session write none of which was written: %v, want it sent on a new connection", err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 1 {
		t.Errorf("the write reached the server %d times, want 1", n)
	}
}
