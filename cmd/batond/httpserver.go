package main

import (
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/baton-dev/baton/server/core/tlsconf"
)

func (t tlsFlags) validate() error {
	switch {
	case (t.certFile == "") != (t.keyFile == ""):
		return errors.New("give both --tls-cert-file and --tls-key-file, or neither")
	case t.clientCAFile != "" && t.certFile == "":
		return errors.New("--client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	peer := 0
	for _, f := range []string{t.peerCertFile, t.peerKeyFile, t.peerCAFile} {
		if f != "" {
			peer++
		}
	}
	switch {
	case peer != 0 && peer != 3:
		return errors.New("give all of --peer-cert-file, --peer-key-file and --peer-ca-file, or none")
	case peer == 3 && t.certFile == "":
		// Node-to-node HTTP goes to the peers' API: mutual TLS there
		// needs the API on TLS too.
		return errors.New("--peer-* needs --tls-cert-file and --tls-key-file (node-to-node calls use the API); the peer certificate may serve for both")
	}
	return nil
}

// load reads the certificate files: nil, nil without TLS.
func (t tlsFlags) load() (*tlsconf.Peer, *tlsconf.API, error) {
	var peer *tlsconf.Peer
	var err error
	if t.peerCertFile != "" {
		if peer, err = tlsconf.LoadPeer(t.peerCertFile, t.peerKeyFile, t.peerCAFile); err != nil {
			return nil, nil, err
		}
	}
	if t.certFile == "" {
		return peer, nil, nil
	}
	api, err := tlsconf.LoadAPI(t.certFile, t.keyFile, t.clientCAFile, peer)
	if err != nil {
		return nil, nil, err
	}
	return peer, api, nil
}

// newHTTPServer is the API's http.Server, bounded so that no client holds
// it with idle, slow or oversized connections: headers (and the TLS
// handshake) within readHeaderTimeout, a body within bodyTimeout of its
// headers, idle kept-alive connections closed after idleTimeout. There is
// no write timeout: watches and long-poll claims are long requests.
func newHTTPServer(h http.Handler, l httpLimits, lg *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, l.bodyTimeout),
		ReadHeaderTimeout: l.readHeaderTimeout,
		IdleTimeout:       l.idleTimeout,
		MaxHeaderBytes:    l.maxHeaderBytes,
		ErrorLog:          log.New(slogWriter{lg}, "", 0),
	}
}

// bodyDeadline gives a request with a body until d after its headers to
// send all of it; a client that trickles its body is cut off there. The
// deadline is lifted when the body has been read, so that a long request
// (a long-poll claim) is not cut, and never set for a request without a
// body (a watch): net/http reads such a connection in the background to
// notice a client that leaves, and a deadline there would end the stream.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// slogWriter sends net/http's own log lines (TLS handshake errors, accept
// errors) to the node's log at debug level: a port scan must not flood it.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug("http server", "msg", string(p))
	return len(p), nil
}
