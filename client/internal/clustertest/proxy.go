package clustertest

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Fault is what a Proxy does with one request.
type Fault int

const (
	// Pass forwards the request and answers what the node answered.
	Pass Fault = iota
	// Hangup closes the connection before forwarding: nothing reached a
	// node.
	Hangup
	// Stall holds the request, unforwarded, until the client gives up.
	Stall
	// DropBody forwards the request, then answers the node's status and
	// headers without the body, as a proxy on the way that gave up
	// mid-answer: the write reached the node, the answer did not.
	DropBody
	// CutAfter forwards the request, then closes the connection without
	// answering: the write reached the node, the client cannot tell.
	CutAfter
	// Corrupt forwards the request and answers the node's answer with one
	// byte of its body changed, as a faulty link or disk on the way.
	Corrupt
	// Truncate forwards the request, answers the node's status, headers
	// and the first half of its body, then cuts the connection.
	Truncate
	// StallBody forwards the request, answers the node's status, headers
	// and the first half of its body, then sends nothing more until the
	// client gives up.
	StallBody
	// HeadThenCut forwards the request, answers the node's status and
	// headers as soon as they come, then cuts the connection: a stream
	// (a watch) that breaks before its first event.
	HeadThenCut
	// HeadThenStall is HeadThenCut that holds the connection, silent,
	// until the client gives up or the proxy closes: a paused node.
	HeadThenStall
	// AckThenCut is HeadThenCut that also passes the body's first write
	// (a watch's open acknowledgement, ": watching after index N") before
	// the cut: a stream that opens, then breaks before its first event.
	AckThenCut
)

// Hop is where and how a Proxy sends one request. An empty To is the
// Proxy's default node.
type Hop struct {
	To    string
	Fault Fault
}

// Request is what the client sent, as the proxy saw it.
type Request struct {
	Method, Path, Query, Key, Auth string
	Header                         http.Header
	Body                           []byte
	// Status is the answer's status; 0 when the client got none.
	Status int
	// Index is the answer's X-Baton-Index header.
	Index string
}

// Proxy is an HTTP proxy in front of real nodes: each request is recorded
// and sent where route says (numbered from 1), with the fault it says.
type Proxy struct {
	URL  string // http://host:port
	Host string // host:port

	to        string
	route     func(n int, r *http.Request) Hop
	rp        *httputil.ReverseProxy
	transport *http.Transport

	mu      sync.Mutex
	reqs    []Request
	leaders map[string]string
	conns   map[net.Conn]struct{} // the clients' open connections
	done    chan struct{}         // closed when the proxy stops
}

type hopKey struct{}

// NewProxy starts a proxy to the node at the URL to; route, when not nil,
// chooses each request's hop (nil: Pass to to), and may read the request's
// body and block. The test's cleanup stops it.
func NewProxy(t testing.TB, to string, route func(n int, r *http.Request) Hop) *Proxy {
	t.Helper()
	p := &Proxy{to: to, route: route, leaders: map[string]string{}, conns: map[net.Conn]struct{}{},
		done: make(chan struct{}), transport: http.DefaultTransport.(*http.Transport).Clone()}
	p.rp = &httputil.ReverseProxy{
		Transport: p.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(pr.In.Context().Value(hopKey{}).(string))
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.Out.Header["X-Forwarded-For"] = nil // the client's request, unchanged
		},
		ModifyResponse: func(resp *http.Response) error {
			if h := resp.Header.Get("X-Baton-Leader"); h != "" {
				p.mu.Lock()
				if m, ok := p.leaders[h]; ok {
					resp.Header.Set("X-Baton-Leader", m)
				}
				p.mu.Unlock()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The node went away mid-request: the client sees a cut
			// connection, never an answer the proxy made up.
			hangup(w)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Host = ln.Addr().String()
	p.URL = "http://" + p.Host
	srv := &http.Server{Handler: p, ConnState: func(c net.Conn, st http.ConnState) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch st {
		case http.StateNew:
			p.conns[c] = struct{}{}
		case http.StateClosed, http.StateHijacked:
			delete(p.conns, c)
		}
	}}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(p.done)
		srv.Close()
		<-done
		p.transport.CloseIdleConnections()
	})
	return p
}

// MapLeader makes the proxy rewrite a leader hint (X-Baton-Leader) naming
// the node at real (host:port) to name proxied instead, as a load balancer
// publishing its own addresses would.
func (p *Proxy) MapLeader(real, proxied string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaders[real] = proxied
}

// CutConnections closes every client connection open now, streams
// included: the node went away under them.
func (p *Proxy) CutConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Requests returns what the proxy received so far.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

// Count is len(Requests()).
func (p *Proxy) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Key: r.Header.Get("Idempotency-Key"), Auth: r.Header.Get("Authorization"),
		Header: r.Header.Clone(), Body: body})
	n := len(p.reqs)
	p.mu.Unlock()
	hop := Hop{}
	if p.route != nil {
		hop = p.route(n, r) // may read the body: it is set again below
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	to := hop.To
	if to == "" {
		to = p.to
	}
	r = r.WithContext(context.WithValue(r.Context(), hopKey{}, to))
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		p.mu.Lock()
		p.reqs[n-1].Status = sw.status
		p.reqs[n-1].Index = sw.index
		p.mu.Unlock()
	}()
	w = sw
	switch hop.Fault {
	case Hangup:
		hangup(w)
	case Stall:
		<-r.Context().Done()
	case DropBody:
		d := &discard{h: http.Header{}}
		p.rp.ServeHTTP(d, r)
		for k, v := range d.h {
			if !strings.EqualFold(k, "Content-Length") {
				w.Header()[k] = v
			}
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(d.status)
	case CutAfter:
		p.rp.ServeHTTP(&discard{h: http.Header{}}, r)
		hangup(w)
	case HeadThenCut, HeadThenStall, AckThenCut:
		// The node's stream is read (and dropped) by the proxy until the
		// cut, which also ends the request to the node. The handler's
		// goroutine alone touches the client's connection.
		client := r.Context()
		ctx, cancel := context.WithCancel(client)
		hw := &headWriter{h: http.Header{}, ready: make(chan int, 1), first: make(chan []byte, 1)}
		forwarded := make(chan struct{})
		go func() {
			defer close(forwarded)
			defer func() {
				// The proxy aborts a stream cut under it so; nothing else.
				if v := recover(); v != nil && v != http.ErrAbortHandler {
					panic(v)
				}
			}()
			p.rp.ServeHTTP(hw, r.WithContext(ctx))
		}()
		select {
		case code := <-hw.ready:
			maps.Copy(sw.Header(), hw.h)
			sw.WriteHeader(code)
			http.NewResponseController(sw).Flush()
			if hop.Fault == AckThenCut {
				select {
				case b := <-hw.first:
					if _, err := sw.Write(b); err == nil { // a client gone already is cut anyway
						http.NewResponseController(sw).Flush()
					}
				case <-client.Done():
				case <-forwarded:
				}
			}
			if hop.Fault == HeadThenStall {
				select {
				case <-client.Done():
				case <-p.done:
				}
			}
			hangup(sw)
		case <-client.Done():
		case <-forwarded:
		}
		cancel()
		<-forwarded
	case Corrupt, Truncate, StallBody:
		d := &discard{h: http.Header{}, keep: true}
		p.rp.ServeHTTP(d, r)
		maps.Copy(w.Header(), d.h)
		w.WriteHeader(d.status)
		body := d.body.Bytes()
		if hop.Fault == Corrupt {
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff
			}
			w.Write(body)
			return
		}
		w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush()
		if hop.Fault == StallBody {
			<-r.Context().Done()
			return
		}
		hangup(w)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// hangup closes the client's connection without an answer (unless it
// was closed already).
func hangup(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// discard takes a node's answer and keeps its status and headers, and
// its body when keep is set.
type discard struct {
	h      http.Header
	status int
	keep   bool
	body   bytes.Buffer
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	if d.keep {
		d.body.Write(b)
	}
	return len(b), nil
}

// statusWriter notes the status and index answered.
type statusWriter struct {
	http.ResponseWriter
	status int
	index  string
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status, s.index = code, s.Header().Get("X-Baton-Index")
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// headWriter takes a node's answer for HeadThenCut, HeadThenStall and
// AckThenCut: it hands the status on ready (its headers in h) and a copy
// of the body's first write on first, and drops the rest of the body.
type headWriter struct {
	h     http.Header
	ready chan int
	first chan []byte
	sent  bool
	wrote bool
}

func (h *headWriter) Header() http.Header { return h.h }

func (h *headWriter) WriteHeader(code int) {
	if !h.sent {
		h.sent = true
		h.ready <- code
	}
}

func (h *headWriter) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	if !h.wrote && len(b) > 0 {
		h.wrote = true
		h.first <- bytes.Clone(b)
	}
	return len(b), nil
}

func (h *headWriter) Flush() {}
