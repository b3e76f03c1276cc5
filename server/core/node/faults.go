package node

import (
	"errors"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Faults is a node's failpoint set, used by the chaos harness (batond
// --failpoints) and never otherwise. Cutting a link makes this node refuse
// to open Raft connections to that peer and closes the ones it has. Every
// Raft RPC travels on a connection its sender opened, so a node that cuts
// its links to a peer no longer reaches it; when both sides cut, neither
// hears the other (a partition); when one side cuts, the cut is one-way.
type Faults struct {
	mu      sync.Mutex
	cut     map[string]bool // Raft addresses this node may not dial
	conns   map[string]map[*faultConn]struct{}
	clockMs int64 // added to the time a leader stamps into commands
}

// NewFaults returns an empty failpoint set: no cut, no clock offset.
func NewFaults() *Faults {
	return &Faults{cut: map[string]bool{}, conns: map[string]map[*faultConn]struct{}{}}
}

// ErrLinkCut is what a dial over a cut link returns.
var ErrLinkCut = errors.New("failpoint: link cut")

// SetCut replaces the set of cut peers (Raft addresses) and closes open
// connections to newly cut ones.
func (f *Faults) SetCut(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = map[string]bool{}
	for _, a := range addrs {
		f.cut[a] = true
		for c := range f.conns[a] {
			c.Conn.Close()
		}
	}
}

// Cut returns the cut peers, sorted.
func (f *Faults) Cut() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.cut))
	for a := range f.cut {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// SetClockOffset skews the time this node stamps when it leads.
func (f *Faults) SetClockOffset(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clockMs = d.Milliseconds()
}

// ClockOffset is the current skew.
func (f *Faults) ClockOffset() time.Duration {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Duration(f.clockMs) * time.Millisecond
}

func (f *Faults) track(target string, c *faultConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut[target] {
		return false
	}
	if f.conns[target] == nil {
		f.conns[target] = map[*faultConn]struct{}{}
	}
	f.conns[target][c] = struct{}{}
	return true
}

func (f *Faults) untrack(target string, c *faultConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns[target], c)
}

// faultStream is a raft.StreamLayer over TCP whose dials obey Faults.
type faultStream struct {
	net.Listener
	advertise net.Addr
	faults    *Faults
}

func (s *faultStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

func (s *faultStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	target := string(address)
	if s.faults.isCut(target) {
		return nil, ErrLinkCut
	}
	conn, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", target)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: conn, target: target, faults: s.faults}
	if !s.faults.track(target, fc) {
		conn.Close()
		return nil, ErrLinkCut
	}
	return fc, nil
}

func (f *Faults) isCut(target string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut[target]
}

type faultConn struct {
	net.Conn
	target string
	faults *Faults
	once   sync.Once
}

func (c *faultConn) Close() error {
	c.once.Do(func() { c.faults.untrack(c.target, c) })
	return c.Conn.Close()
}
