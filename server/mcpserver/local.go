package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// LocalTransport is an http.RoundTripper that serves each request with a
// handler in this process (batond's own API handler), streaming the answer
// as the handler writes it: a long-polled claim and a watch behave as over
// the network, and the request goes through the handler's authentication,
// authorization and forwarding like any other.
type LocalTransport struct {
	Handler http.Handler
}

// RoundTrip runs the handler on its own goroutine and returns once it has
// written its header (or returned).
func (t *LocalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(ctx)
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0" // the node itself, on the MCP caller's behalf
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.ensureHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("handler panic: %v", p))
				return
			}
			w.ensureHeader(http.StatusOK)
			pw.Close()
		}()
		t.Handler.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		cancel()
		return nil, ctx.Err()
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: &localBody{pr: pr, cancel: cancel},
		ContentLength: -1, Request: req}, nil
}

// localBody ends the handler's request when the caller closes the answer.
type localBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *localBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *localBody) Close() error {
	b.cancel()
	return b.pr.Close()
}

// pipeWriter is the handler's ResponseWriter: the header is handed over
// once, at the first write or flush, and the body goes through the pipe.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter

	mu     sync.Mutex
	status int
	sent   http.Header
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if code < 200 {
		return // informational answers are not relayed
	}
	w.ensureHeader(code)
}

func (w *pipeWriter) ensureHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent != nil {
		return
	}
	w.status, w.sent = code, w.header.Clone()
	close(w.ready)
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.ensureHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush hands over the header; the body is never buffered.
func (w *pipeWriter) Flush() { w.ensureHeader(http.StatusOK) }
