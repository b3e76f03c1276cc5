package node

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
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
	refused        *refusals
}

// handshakeTimeout is tlsconf.HandshakeTimeout; tests shorten it.
var handshakeTimeout = tlsconf.HandshakeTimeout

func newTLSStream(inner raft.StreamLayer, p *tlsconf.Peer, log *slog.Logger) *tlsStream {
	return &tlsStream{StreamLayer: inner, server: p.ServerConfig(), client: p.ClientConfig(),
		timeout: handshakeTimeout, refused: &refusals{log: log}}
}

// Close closes the listener and logs the refusals not logged yet.
func (s *tlsStream) Close() error {
	s.refused.close()
	return s.StreamLayer.Close()
}

func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	// The handshake happens on the connection's own goroutine (raft's
	// handleConn), at its first read, so a slow client never holds the
	// accept loop.
	return &serverConn{Conn: tls.Server(c, s.server), raw: c, timeout: s.timeout, refused: s.refused}, nil
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
// A refused connection reads and writes io.EOF: raft's transport logs any
// other error of a connection at ERROR, one line per connection, which
// anyone who can reach the port could fill the log with. The refusal is
// logged by refusals instead, in aggregate.
type serverConn struct {
	*tls.Conn
	raw     net.Conn
	timeout time.Duration
	refused *refusals
	once    sync.Once
	err     error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if err := c.HandshakeContext(ctx); err != nil {
			c.refused.note(c.raw.RemoteAddr().String(), err)
			c.raw.Close()
			c.err = io.EOF
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

// refusalLogEvery is how often at most refusals logs a line while
// connections keep failing the handshake.
const refusalLogEvery = 10 * time.Second

// refusals logs the connections refused in the TLS handshake in aggregate:
// the first at once, then, while more come, one line per refusalLogEvery
// with their count and the last one's address and error; what is left is
// logged on close.
type refusals struct {
	log    *slog.Logger
	mu     sync.Mutex
	count  int // refused since the last line
	from   string
	err    error
	timer  *time.Timer // an interval is running
	closed bool
}

func (r *refusals) note(from string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer == nil || r.closed {
		r.log.Warn("refused a Raft connection: TLS handshake failed", "remote", from, "error", err)
		if !r.closed {
			r.timer = time.AfterFunc(refusalLogEvery, r.tick)
		}
		return
	}
	r.count, r.from, r.err = r.count+1, from, err
}

// tick ends an interval: it logs the count, and starts another interval if
// there was one (a quiet interval ends the aggregation).
func (r *refusals) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if r.count > 0 && !r.closed {
		r.flush()
		r.timer = time.AfterFunc(refusalLogEvery, r.tick)
	}
}

func (r *refusals) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.flush()
}

// flush logs the refusals counted since the last line, if any.
func (r *refusals) flush() {
	if r.count == 0 {
		return
	}
	r.log.Warn("refused more Raft connections: TLS handshake failed", "count", r.count,
		"within", refusalLogEvery.String(), "last_remote", r.from, "last_error", r.err)
	r.count = 0
}
