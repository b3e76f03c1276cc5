package node

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/hashicorp/raft"
)

// tlsStream is mutual TLS over another raft.StreamLayer (faultStream, so
// failpoints still cut links). A dial presents this node's certificate and
// trusts only the peer CA; an accepted connection must present a
// certificate signed by the peer CA. The server side handshakes before the
// first byte of a Raft RPC is read, within tlsconf.HandshakeTimeout: a
// plaintext or foreign-CA connection is closed there, and a silent one
// when the deadline passes.
type tlsStream struct {
	raft.StreamLayer
	server, client *tls.Config
	timeout        time.Duration
}

// handshakeTimeout is tlsconf.HandshakeTimeout; tests shorten it.
var handshakeTimeout = tlsconf.HandshakeTimeout

func newTLSStream(inner raft.StreamLayer, p *tlsconf.Peer) *tlsStream {
	return &tlsStream{StreamLayer: inner, server: p.ServerConfig(), client: p.ClientConfig(),
		timeout: handshakeTimeout}
}

func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	// The handshake happens on the connection's own goroutine (raft's
	// handleConn), at its first read, so a slow client never holds the
	// accept loop.
	return &serverConn{Conn: tls.Server(c, s.server), raw: c, timeout: s.timeout}, nil
}

func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	cfg := s.client.Clone()
	cfg.ServerName = tlsconf.ServerName(string(address))
	tc := tls.Client(c, cfg)
	if timeout <= 0 || timeout > s.timeout {
		timeout = s.timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// serverConn handshakes before its first read or write, within a deadline.
type serverConn struct {
	*tls.Conn
	raw     net.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if c.err = c.Conn.HandshakeContext(ctx); c.err != nil {
			c.raw.Close()
		}
	})
	return c.err
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
