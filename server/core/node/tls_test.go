package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/hashicorp/raft"
)

// peerCert returns a Peer with the given certificate that trusts ca.
func peerCert(t *testing.T, trusted *tlsconf.CA, certPEM, keyPEM []byte) *tlsconf.Peer {
	t.Helper()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(trusted.Cert)
	return &tlsconf.Peer{Cert: cert, Pool: pool}
}

func issuedPeer(t *testing.T, ca *tlsconf.CA, name string) *tlsconf.Peer {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(name, []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return peerCert(t, ca, certPEM, keyPEM)
}

// openCluster opens n bootstrapped in-process nodes on 127.0.0.1; with ca,
// their Raft transport is mutual TLS under it.
func openCluster(t *testing.T, n int, ca *tlsconf.CA) []*Node {
	t.Helper()
	var addrs []string
	for range n {
		addrs = append(addrs, freeAddr(t))
	}
	var peers []raft.Server
	for i, a := range addrs {
		peers = append(peers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(a), Suffrage: raft.Voter})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*Node
	for i := range n {
		cfg := DefaultConfig()
		cfg.ID, cfg.DataDir = string(peers[i].ID), filepath.Join(t.TempDir(), string(peers[i].ID))
		cfg.RaftAddr, cfg.HTTPAddr, cfg.Peers, cfg.Logger = addrs[i], "127.0.0.1:0", peers, log
		cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<40
		if ca != nil {
			cfg.PeerTLS = issuedPeer(t, ca, cfg.ID)
		}
		nd, err := Open(cfg, fsm.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	return nodes
}

// settled waits until one node leads and every node applied the same
// index as the leader's commit index: nothing more is in flight.
func settled(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var leader *Node
		for _, nd := range nodes {
			if nd.IsLeader() {
				leader = nd
			}
		}
		ok := leader != nil && leader.barrierTerm.Load() == leader.Term()
		for _, nd := range nodes {
			ok = ok && leader != nil && nd.FSM.AppliedIndex() == leader.CommitIndex() && nd.Term() == leader.Term()
		}
		if ok {
			return leader
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the cluster did not settle")
	return nil
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// rawTransport is hashicorp/raft's own NetworkTransport, over TCP, or over
// TLS with the given certificate.
func rawTransport(t *testing.T, p *tlsconf.Peer) *raft.NetworkTransport {
	t.Helper()
	if p == nil {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeTransport(tr) })
		return tr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream := newTLSStream(&faultStream{Listener: ln, faults: NewFaults()}, p, discardLog)
	tr := raft.NewNetworkTransport(stream, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() { closeTransport(tr) })
	return tr
}

// closeTransport closes tr's pooled connections too (Close alone leaves
// them open), so the member at their other end ends its reading goroutine.
func closeTransport(tr *raft.NetworkTransport) {
	tr.CloseStreams()
	tr.Close()
}

// forgedAppend sends what the issue's attacker sent: an AppendEntries of a
// higher term carrying a new entry, to target.
func forgedAppend(tr *raft.NetworkTransport, target *Node) error {
	last := target.raft.LastIndex()
	var lastTerm uint64
	var l raft.Log
	if err := target.store.GetLog(last, &l); err == nil {
		lastTerm = l.Term
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(tr.LocalAddr())},
		Term:         target.Term() + 100,
		PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: target.Term() + 100, Type: raft.LogCommand, Data: []byte{0x01}}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries("n1", raft.ServerAddress(target.RaftAddr()), req, &resp)
}

// The issue's attack: hashicorp/raft's own transport sends a member an
// AppendEntries of a higher term. A member with peer TLS refuses it in the
// handshake, plaintext or with a foreign (self-signed) certificate, and its
// term, log and applied index do not move. A certificate from the cluster
// CA does get through (the control: the attack is real).
func TestRaftTLSRefusesStrangers(t *testing.T) {
	ca, err := tlsconf.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	nodes := openCluster(t, 3, ca)
	settled(t, nodes)
	var target *Node // a follower: the attack does not need the leader
	for _, nd := range nodes {
		if !nd.IsLeader() {
			target = nd
		}
	}
	foreign, err := tlsconf.NewCA("intruder")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		peer *tlsconf.Peer
	}{
		{"plaintext", nil},
		// Self-signed, and trusting the cluster CA so that the client
		// side completes its part of the handshake: the refusal is the
		// member's.
		{"self-signed certificate", peerCert(t, ca, foreign.CertPEM, foreign.KeyPEM)},
		{"certificate of another CA", func() *tlsconf.Peer {
			c, k, err := foreign.Issue("n9", []string{"127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			return peerCert(t, ca, c, k)
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			term, last, applied := target.Term(), target.raft.LastIndex(), target.FSM.AppliedIndex()
			if err := forgedAppend(rawTransport(t, tc.peer), target); err == nil {
				t.Fatal("the member answered a forged AppendEntries")
			}
			// Taking the RPC would put the member at the forged term for
			// good; an election on a loaded machine moves the term by one
			// or two and appends an entry, so the log is compared only
			// without one.
			now := target.Term()
			if now >= term+100 || (now == term && (target.raft.LastIndex() != last || target.FSM.AppliedIndex() != applied)) {
				t.Fatalf("term/last/applied %d/%d/%d became %d/%d/%d", term, last, applied,
					target.Term(), target.raft.LastIndex(), target.FSM.AppliedIndex())
			}
		})
	}
	term := target.Term()
	if err := forgedAppend(rawTransport(t, issuedPeer(t, ca, "n9")), target); err != nil {
		t.Fatalf("control: a cluster certificate's AppendEntries: %v", err)
	}
	if target.Term() <= term {
		t.Fatalf("control: term %d did not move with a cluster certificate", term)
	}
}

// A connection that says nothing is closed when the handshake deadline
// passes: a silent socket holds no goroutine of the member for longer.
func TestRaftTLSHandshakeDeadline(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	ca, err := tlsconf.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	nd := openCluster(t, 1, ca)[0]
	conn, err := net.Dial("tcp", nd.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a silent connection was still open after %v", time.Since(start))
	}
	if err == nil {
		t.Fatal("the member sent bytes to a silent client")
	}
	t.Logf("closed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// The TLS stream is layered over the failpoint stream: a cut link refuses
// TLS dials and closes the TLS connections already open.
func TestRaftTLSObeysFailpoints(t *testing.T) {
	ca, err := tlsconf.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	serverLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := newTLSStream(&faultStream{Listener: serverLn, faults: NewFaults()}, issuedPeer(t, ca, "n1"), discardLog)
	defer server.Close()
	go func() { // echo one byte per accepted connection, until closed
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
					if _, err := c.Write(b); err != nil {
						return
					}
				}
			}()
		}
	}()
	clientLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	faults := NewFaults()
	client := newTLSStream(&faultStream{Listener: clientLn, faults: faults}, issuedPeer(t, ca, "n2"), discardLog)
	defer client.Close()
	target := raft.ServerAddress(serverLn.Addr().String())

	conn, err := client.Dial(target, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(b); err != nil || b[0] != 7 {
		t.Fatalf("echo over TLS: %v %v", b, err)
	}
	faults.SetCut([]string{string(target)})
	if _, err := conn.Read(b); err == nil {
		t.Fatal("a cut link's TLS connection stayed open")
	}
	if _, err := client.Dial(target, 5*time.Second); !errors.Is(err, ErrLinkCut) {
		t.Fatalf("dial over a cut link: %v, want ErrLinkCut", err)
	}
	faults.SetCut(nil)
	again, err := client.Dial(target, 5*time.Second)
	if err != nil {
		t.Fatalf("dial after healing: %v", err)
	}
	again.Close()
}

// logLines is a slog handler that keeps every record's message and
// attributes, for tests that count log lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (h *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *logLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logLines) WithGroup(string) slog.Handler            { return h }
func (h *logLines) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, m)
	h.mu.Unlock()
	return nil
}

// refusals sums what the log says about refused Raft connections: the
// lines naming a failed handshake (one refusal, or "count" of them), and
// the ERROR lines of any kind.
func (h *logLines) refusals() (lines, refused, errors int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.lines {
		if m["level"] == "ERROR" {
			errors++
		}
		if msg, _ := m["msg"].(string); strings.Contains(msg, "handshake") {
			lines++
			if n, ok := m["count"].(int64); ok {
				refused += int(n)
			} else {
				refused++
			}
		}
	}
	return lines, refused, errors
}

// Connections refused in the TLS handshake are logged in aggregate, not a
// line each: 200 plaintext connections to the Raft port leave a few WARN
// lines that count all 200 (the last on Close), and no ERROR line.
func TestRaftTLSRefusalsLogAggregated(t *testing.T) {
	ca, err := tlsconf.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := &logLines{}
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", filepath.Join(t.TempDir(), "n1")
	cfg.RaftAddr, cfg.HTTPAddr, cfg.Logger = addr, "127.0.0.1:0", slog.New(h)
	cfg.Peers = []raft.Server{{ID: "n1", Address: raft.ServerAddress(addr), Suffrage: raft.Voter}}
	cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<40
	cfg.PeerTLS = issuedPeer(t, ca, "n1")
	nd, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatal(err)
	}
	const conns = 200
	for i := range conns {
		c, err := net.Dial("tcp", nd.RaftAddr())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_, _ = c.Write([]byte("plaintext, not a TLS hello\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, c) // until the member closes it
		c.Close()
	}
	nd.Close()
	deadline := time.Now().Add(10 * time.Second)
	lines, refused, errors := h.refusals()
	for refused < conns && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		lines, refused, errors = h.refusals()
	}
	if refused != conns || lines > 5 || errors != 0 {
		t.Errorf("after %d refused connections: got %d handshake lines counting %d refusals and %d ERROR lines, want at most 5 lines counting %d and no ERROR",
			conns, lines, refused, errors, conns)
	}
}
