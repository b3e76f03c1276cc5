package e2e

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/hashicorp/raft"
)

// TestTLSArtifactFollowerCatchUp is TestArtifactFollowerCatchUp on a
// cluster with TLS everywhere: forwarding to the leader, chunk copies to
// peers, repair of a restarted follower and a join all go over mutual TLS
// between members, and the internal routes they use accept no admin token
// (TestTLSRefusesStrangers), so they work only if members know each other
// by their certificates.
func TestTLSArtifactFollowerCatchUp(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	testArtifactFollowerCatchUp(t, true)
}

// tlsStream is a raft.StreamLayer that dials over TLS with cfg.
type tlsStream struct {
	net.Listener
	cfg *tls.Config
}

func (s tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
}

// intruder is hashicorp/raft's own NetworkTransport: plaintext TCP with
// cfg nil, else TLS with cfg.
func intruder(t *testing.T, cfg *tls.Config) *raft.NetworkTransport {
	t.Helper()
	if cfg == nil {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 3*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransport(tlsStream{Listener: ln, cfg: cfg}, 1, 3*time.Second, io.Discard)
	t.Cleanup(func() { tr.Close() })
	return tr
}

// selfSigned is a self-signed certificate that no cluster CA signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	ca, err := tlsconf.NewCA("intruder")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestTLSRefusesStrangers: the attack on real processes. A raw
// AppendEntries of a higher term, sent with hashicorp/raft's own transport
// in plaintext or over TLS with a self-signed certificate, is refused in
// the handshake and moves neither the member's term nor its log. On the
// API, the internal routes refuse the admin token without a member's
// certificate, and a client certificate no trusted CA signed fails the
// handshake.
func TestTLSRefusesStrangers(t *testing.T) {
	c := startClusterWith(t, cluster.Config{Nodes: 3, TLS: true})
	ctx := ctxFor(t, 60*time.Second)
	if _, err := adminClient(t, c).PutTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	// Every node publishes its HTTP address through the log once it knows
	// the leader; wait for all three, so that no such entry lands between
	// the two readings below.
	waitMembers(t, c, []int{0, 1, 2}, []int{0, 1, 2})
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := (leader + 1) % 3
	before, err := c.Status(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsconf.LoadPool(c.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"plaintext", nil},
		// It trusts the cluster's CA, so the refusal is the member's.
		{"self-signed", &tls.Config{RootCAs: pool, ServerName: cluster.Host, Certificates: []tls.Certificate{selfSigned(t)}}},
	} {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
			Term:      before.Term + 100, PrevLogEntry: before.CommitIndex, PrevLogTerm: before.Term,
			Entries:           []*raft.Log{{Index: before.CommitIndex + 1, Term: before.Term + 100, Type: raft.LogCommand, Data: []byte{1}}},
			LeaderCommitIndex: before.CommitIndex + 1,
		}
		var resp raft.AppendEntriesResponse
		if err := intruder(t, tc.cfg).AppendEntries("n1", raft.ServerAddress(c.RaftAddr(target)), req, &resp); err == nil {
			t.Errorf("%s: %s answered a forged AppendEntries (term %d, success %v)", tc.name, c.ID(target), resp.Term, resp.Success)
		}
	}
	after, err := c.Status(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	// A member that took the RPC would be at the forged term for good. An
	// election on a loaded machine moves the term by one or two, and its
	// leader appends an entry: the log is compared only without one.
	if after.Term >= before.Term+100 ||
		(after.Term == before.Term && (after.CommitIndex != before.CommitIndex || after.AppliedIndex != before.AppliedIndex)) {
		t.Errorf("%s: term/commit/applied %d/%d/%d became %d/%d/%d", c.ID(target),
			before.Term, before.CommitIndex, before.AppliedIndex, after.Term, after.CommitIndex, after.AppliedIndex)
	}

	// The internal routes: the admin token is not a member's certificate.
	digest := "sha256:" + strings.Repeat("0", 64)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		req, _ := http.NewRequestWithContext(ctx, method, c.URL(target)+"/v1/internal/chunks/"+digest, strings.NewReader("x"))
		req.Header.Set("Authorization", "Bearer "+c.AdminToken())
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s /v1/internal/chunks with the admin token and no peer certificate: %s, want 401", method, resp.Status)
		}
	}
	// A client certificate no trusted CA signed is refused in the handshake.
	stranger := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
		Certificates: []tls.Certificate{selfSigned(t)}}}}
	defer stranger.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(target)+"/v1/internal/chunks/"+digest, nil)
	if resp, err := stranger.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a self-signed client certificate was accepted: %s", resp.Status)
	}
	// Plain HTTP to the API is not served.
	plain, err := http.Get("http://" + c.HTTPAddr(target) + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS API")
		}
	}
}

// rawConn is one HTTP/1.1 connection written and read by hand.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{Conn: conn, br: bufio.NewReader(conn)}
}

// roundTrip sends a request and reads its response, within d.
func (rc *rawConn) roundTrip(req string, d time.Duration) (*http.Response, error) {
	_ = rc.SetDeadline(time.Now().Add(d))
	defer func() { _ = rc.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(rc, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedWithin reports whether the server closes the connection within d.
func (rc *rawConn) closedWithin(d time.Duration) error {
	_ = rc.SetReadDeadline(time.Now().Add(d))
	_, err := rc.br.ReadByte()
	if err == nil {
		return errors.New("the server sent more bytes")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", d)
	}
	return nil // EOF or reset: the server closed it
}

// TestHTTPServerBounds: the API's http.Server bounds on a real batond.
// Idle kept-alive connections are closed after --http-idle-timeout; a body
// trickled byte by byte is cut at --http-body-timeout; a made-up method
// adds no metric series; --max-connections holds connections beyond the
// cap until one closes.
func TestHTTPServerBounds(t *testing.T) {
	c := startClusterExact(t, cluster.Config{Nodes: 1, ExtraArgs: []string{"--http-idle-timeout=1s", "--http-body-timeout=1s", "--max-connections=300"}})
	ctx := ctxFor(t, 60*time.Second)
	if err := c.WaitReady(ctx, 0); err != nil {
		t.Fatal(err)
	}
	addr := c.HTTPAddr(0)
	get := "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"

	t.Run("idle connections closed", func(t *testing.T) {
		conns := make([]*rawConn, 200)
		for i := range conns {
			conns[i] = dialRaw(t, addr)
			resp, err := conns[i].roundTrip(get, 10*time.Second)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("connection %d: %v %v", i, resp, err)
			}
		}
		start := time.Now()
		for i, rc := range conns {
			if err := rc.closedWithin(15*time.Second - time.Since(start)); err != nil {
				t.Fatalf("idle connection %d: %v", i, err)
			}
		}
	})

	t.Run("slow body cut", func(t *testing.T) {
		rc := dialRaw(t, addr)
		head := "PUT /v1/tenants/slow HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + c.AdminToken() +
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
		if _, err := io.WriteString(rc, head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		trickled := make(chan struct{})
		go func() { // one byte every 50 ms: the body would take 50 s
			defer close(trickled)
			for range 1000 {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := rc.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		defer func() { close(stop); <-trickled }()
		start := time.Now()
		_ = rc.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(rc.br, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				t.Fatalf("a trickled body was accepted: %s", resp.Status)
			}
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the request was still open after %v", time.Since(start))
		}
		took := time.Since(start)
		t.Logf("cut after %v: %v %v", took.Round(time.Millisecond), resp, err)
		// --http-body-timeout=1s: the server's own body read must not
		// replace that deadline with a longer one (it once set 10 s).
		if took > 5*time.Second {
			t.Fatalf("the trickled body was cut after %v, want about --http-body-timeout=1s", took.Round(time.Millisecond))
		}
		if err := rc.closedWithin(5 * time.Second); err != nil {
			t.Fatalf("the connection of the trickled body: %v", err)
		}
	})

	t.Run("made-up methods add no metric series", func(t *testing.T) {
		series := func() (n int, text string) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "baton_http_requests_total{") {
					n++
				}
			}
			return n, string(b)
		}
		rc := dialRaw(t, addr)
		// One made-up method first: the "other" series may appear once.
		if _, err := rc.roundTrip("FROB0 /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		series() // its own series (GET /metrics) appears with the first scrape
		before, _ := series()
		for i := 1; i <= 50; i++ {
			if _, err := rc.roundTrip(fmt.Sprintf("FROB%d /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", i, addr), 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		after, text := series()
		if after != before || strings.Contains(text, "FROB") {
			t.Fatalf("50 made-up methods: %d request series became %d (FROB in /metrics: %v)", before, after, strings.Contains(text, "FROB"))
		}
	})
}

// TestHTTPMaxConnections: connections beyond --max-connections wait to be
// accepted until one closes.
func TestHTTPMaxConnections(t *testing.T) {
	c := startClusterExact(t, cluster.Config{Nodes: 1, ExtraArgs: []string{"--max-connections=4"}})
	ctx := ctxFor(t, 60*time.Second)
	if err := c.WaitReady(ctx, 0); err != nil {
		t.Fatal(err)
	}
	addr := c.HTTPAddr(0)
	get := "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	// The harness's kept-alive connections would count against the cap
	// (and a fourth connection here would then wait out its timeout).
	c.CloseIdleConnections()
	var held []*rawConn
	for range 4 {
		rc := dialRaw(t, addr)
		if _, err := rc.roundTrip(get, 10*time.Second); err != nil {
			t.Fatalf("connection %d of --max-connections=4: %v", len(held)+1, err)
		}
		held = append(held, rc)
	}
	extra := dialRaw(t, addr)
	if _, err := extra.roundTrip(get, time.Second); err == nil {
		t.Fatalf("a connection beyond --max-connections=4 was served (%d held here)", len(held))
	}
	for _, rc := range held {
		rc.Close()
	}
	if resp, err := dialRaw(t, addr).roundTrip(get, 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after closing the held connections: %v %v", resp, err)
	}
}
