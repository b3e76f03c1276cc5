// Package node runs one Baton cluster member: hashicorp/raft over TCP, a
// raft-wal (or raft-boltdb) log and stable store, a file snapshot store and the FSM.
//
// Contract: Open does all I/O and starts Raft; Close is idempotent. Apply
// returns only after the command is committed on a majority and applied
// here, or with an error (ErrNotLeader, ErrUnavailable, ctx's error) when
// the outcome is unknown or nothing was proposed. ReadBarrier makes a
// following local read linearizable.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/hashicorp/raft"
)

// Errors of the node, translated to HTTP by the server.
var (
	// ErrNotLeader: this node is not the leader; forward or retry elsewhere.
	ErrNotLeader = errors.New("node: not the leader")
	// ErrUnavailable: no leader or no quorum right now; Apply returns it
	// only for a command it did not propose.
	ErrUnavailable = errors.New("node: unavailable")
	// ErrClosed: the node is shutting down.
	ErrClosed = errors.New("node: closed")
	// ErrOutcomeUnknown wraps the error of an Apply whose command was
	// proposed (it may be in the log) but whose outcome is not known: the
	// wait ended, leadership was lost or the node closed after proposing.
	// Every other error of Apply means the command was not proposed.
	ErrOutcomeUnknown = errors.New("node: outcome unknown")
)

// Node is one member of the cluster.
type Node struct {
	cfg   Config
	log   *slog.Logger
	FSM   *fsm.FSM
	raft  *raft.Raft
	trans *raft.NetworkTransport
	store logStore
	snaps *raft.FileSnapshotStore

	commits  groupCommit
	admit    chan struct{} // one per proposal queued or with Raft: bounds them
	verifier *verifier

	barrierMu   sync.Mutex
	barrierTerm atomic.Uint64 // term in which this leader's barrier has applied

	wasMember atomic.Bool // in a configuration since it opened, or opened with state (removed.go)
	removed   atomic.Bool // removed from the configuration (removed.go)
	// removedByLeader: the leader said this node is not in its committed
	// configuration (removed.go).
	removedByLeader atomic.Bool
	memberMu        sync.Mutex // held by checkMembership
	snapStats       snapStats  // snapshots persisted since start (snapstats.go)

	done      chan struct{}
	ctx       context.Context // the node's lifetime: Close cancels it
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// Open starts the node. Bootstraps from cfg.Peers when DataDir is empty.
func Open(cfg Config, f *fsm.FSM) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, FSM: f, admit: make(chan struct{}, maxProposals), done: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.openStorage(); err != nil {
		return nil, err
	}
	if err := n.openTransport(); err != nil {
		n.store.Close()
		return nil, err
	}
	logs, err := raft.NewLogCache(logCacheEntries, n.store)
	if err != nil {
		n.trans.Close()
		n.store.Close()
		return nil, err
	}
	r, err := raft.NewRaft(cfg.raftConfig(), timedFSM{f, &n.snapStats}, logs, n.store, n.snaps, n.trans)
	if err != nil {
		n.trans.Close()
		n.store.Close()
		return nil, fmt.Errorf("node: start raft: %w", err)
	}
	n.raft = r
	if has, err := raft.HasExistingState(n.store, n.store, n.snaps); err == nil && has {
		n.wasMember.Store(true)
	}
	n.verifier = &verifier{verify: func() error { return r.VerifyLeader().Error() }}
	if err := n.maybeBootstrap(); err != nil {
		n.Close()
		return nil, err
	}
	n.wg.Add(2)
	go n.leadershipLoop()
	go n.membershipLoop()
	return n, nil
}

// maxProposals bounds the proposals queued or with Raft at once; a caller
// beyond it waits (its context bounds the wait).
const maxProposals = 4096

// logCacheEntries is how many of the newest log entries Raft keeps in
// memory (hashicorp/raft's LogCache, written through to the log store).
// The leader reads each entry back to send it to every follower, and a
// follower reads each back to apply it: from the cache that is a slice
// copy, from raft-wal a pread and a decode. 64 covers the entries in flight
// (MaxInflightEntries) many times over. Group commit packs at most
// maxEntryBytes of commands into an entry (a larger command gets one of
// its own, within the request size limits), so the cache holds about
// 64 MiB at the very most.
const logCacheEntries = 64

func (n *Node) openStorage() error {
	st, kind, err := openLogStore(n.cfg.DataDir, n.cfg.LogStore)
	if err != nil {
		return err
	}
	n.log.Info("raft log opened", "format", kind)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(n.cfg.DataDir, 2, newHCLogger(n.log))
	if err != nil {
		st.Close()
		return fmt.Errorf("node: open snapshot store: %w", err)
	}
	n.store, n.snaps = st, snaps
	return nil
}

func (n *Node) openTransport() error {
	var advertise net.Addr // nil: the listener's own address (for port 0 in tests)
	if addr, err := net.ResolveTCPAddr("tcp", n.cfg.RaftAddr); err != nil {
		return err
	} else if addr.Port != 0 {
		advertise = addr
	}
	if n.cfg.RaftAdvertise != "" {
		advertise = advertisedAddr(n.cfg.RaftAdvertise)
	}
	ln, err := net.Listen("tcp", n.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("node: raft transport on %s: %w", n.cfg.RaftAddr, err)
	}
	faults := n.cfg.Faults
	if faults == nil {
		faults = NewFaults() // never changed: a plain TCP transport
	}
	var stream raft.StreamLayer = &faultStream{Listener: ln, advertise: advertise, faults: faults}
	if n.cfg.PeerTLS != nil {
		stream = newTLSStream(stream, n.cfg.PeerTLS, n.log)
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 8, Timeout: 5 * time.Second, Logger: newHCLogger(n.log),
		MaxRPCsInFlight: maxRPCsInFlight(n.cfg.RaftPipeline),
	})
	return nil
}

// maxRPCsInFlight is the transport's setting for Config.RaftPipeline: 1
// turns pipelining off (raft then replicates with one AppendEntries at a
// time), 0 leaves raft's default of 2 in flight.
func maxRPCsInFlight(pipeline bool) int {
	if pipeline {
		return 0
	}
	return 1
}

// advertisedAddr is a Raft address announced as written (a DNS name stays
// a name, see Config.RaftAdvertise).
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

func (n *Node) maybeBootstrap() error {
	if len(n.cfg.Peers) == 0 {
		return nil
	}
	has, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return err
	}
	if has {
		n.log.Info("existing raft state found; resuming and ignoring --peers")
		return nil
	}
	err = n.raft.BootstrapCluster(raft.Configuration{Servers: n.cfg.Peers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	return nil
}

// Close shuts Raft down and closes storage. Safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		close(n.done)
		n.wg.Wait()
		if n.raft != nil {
			n.closeErr = n.raft.Shutdown().Error()
		}
		if n.trans != nil {
			n.trans.CloseStreams() // pooled and inbound connections, with their goroutines
			n.trans.Close()
		}
		if n.store != nil {
			if err := n.store.Close(); err != nil && n.closeErr == nil {
				n.closeErr = err
			}
		}
	})
	return n.closeErr
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// HTTPAddr is this node's own HTTP address.
func (n *Node) HTTPAddr() string { return n.cfg.HTTPAddr }

// RaftAddr is this node's Raft address.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// IsLeader reports whether this node believes it leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the id and Raft address of the leader as this node knows it.
func (n *Node) Leader() (id, raftAddr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// LastLeaderContact is when this node last heard from a leader (now, on
// the leader itself).
func (n *Node) LastLeaderContact() time.Time {
	if n.IsLeader() {
		return time.Now()
	}
	return n.raft.LastContact()
}

// Raft exposes the underlying Raft instance to the status and admin code.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Snapshot takes a Raft snapshot now (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// LastSnapshotIndex is the index of the newest snapshot on disk, or 0.
func (n *Node) LastSnapshotIndex() uint64 {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0
	}
	return metas[0].Index
}

func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// proposedError is translate for the future of an entry handed to Raft:
// an entry Raft refused before appending it (not the leader, its queue
// full, a leadership transfer) was not proposed; after any other failure
// (leadership lost while committing, shutdown, a restore) it may be in the
// log, so the outcome is unknown.
func proposedError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return translate(err)
	}
	return outcomeUnknown(translate(err))
}

// outcomeUnknown marks err as the failure of a command that was proposed.
func outcomeUnknown(err error) error {
	if errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Term is the current Raft term.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// CommitIndex is the commit index this node knows.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// now is the time this node stamps into the commands it proposes itself.
func (n *Node) now() int64 { return time.Now().Add(n.cfg.Faults.ClockOffset()).UnixMilli() }
