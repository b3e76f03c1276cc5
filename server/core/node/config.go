package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/hashicorp/raft"
)

// Config configures a Node. Start from DefaultConfig and call Validate.
type Config struct {
	ID       string
	DataDir  string
	RaftAddr string // host:port to listen on; also advertised unless RaftAdvertise is set
	HTTPAddr string // host:port of this node's HTTP API as peers reach it, replicated for forwarding
	// RaftAdvertise is the host:port peers dial for Raft, when it differs
	// from RaftAddr (a node listening on 0.0.0.0, or behind NAT). It is
	// announced as written, not resolved: a DNS name (a compose service,
	// a StatefulSet pod) keeps working when the node's IP changes, and it
	// is the name the peers verify the node's certificate against.
	RaftAdvertise string

	// Peers are the initial voters; used to bootstrap only when DataDir holds
	// no Raft state. Empty means: do not bootstrap (join or resume).
	Peers []raft.Server

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	MaxAppendEntries   int
	// MaxInflightEntries bounds the log entries this leader has with Raft
	// at once; proposals arriving meanwhile share the next entry. Two let
	// the leader write entry k+1 while its followers write entry k; more
	// mean more, smaller entries under load, and every entry costs each
	// replica an AppendEntries and a log write. Measured (cas fenced
	// updates, 3 nodes on one 2-core VM, 2 and 4 alternating, 6-8 s runs):
	// C=16 5,671 vs 5,185 ops/s (mean of 3 pairs), C=64 10,026 vs 8,948
	// (3 pairs), C=256 11,985 vs 11,863, C=1 unchanged.
	MaxInflightEntries int
	// RaftPipeline turns on hashicorp/raft's pipelined replication (the
	// leader sends a follower its next AppendEntries before the last one
	// is answered). Off by default: in raft v1.7.3 a pipeline whose
	// follower answers Success=false can park its sender for good
	// (hashicorp/raft#612, grafana/pyroscope#5518), so that follower gets
	// no more entries while its heartbeats keep it from an election, and
	// the leader's shutdown waits on the parked sender. Off, each follower
	// is sent one AppendEntries at a time (docs/operations.md, "Raft timing
	// and replication").
	RaftPipeline bool
	// ApplyTimeout bounds how long a proposal may wait to be enqueued.
	ApplyTimeout time.Duration
	// LogStore is the Raft log and stable store's format: "wal"
	// (hashicorp/raft-wal: append-only segment files, one fsync per append)
	// or "boltdb" (raft-boltdb: a B+tree file, two fsyncs per append). Empty
	// picks whatever DataDir already holds, and "wal" for a new one.
	LogStore string
	// Faults, if set, lets the chaos harness cut Raft links (batond
	// --failpoints). Nil: a plain TCP transport.
	Faults *Faults
	// PeerTLS, if set, is mutual TLS on the Raft transport: this node's
	// certificate and the peer CA. A connection without a certificate
	// signed by the peer CA is refused during the handshake. Nil: plain TCP.
	PeerTLS *tlsconf.Peer

	Logger *slog.Logger
}

// DefaultConfig has LAN defaults.
func DefaultConfig() Config {
	return Config{
		// LAN defaults: a follower suspects the leader after 300-600 ms
		// (hashicorp/raft randomizes between one and two timeouts), so a
		// lost leader is replaced in well under a second. Chosen by
		// measurement (bench recovery workload, 5 leader SIGKILLs under 64
		// clients): median unavailability 1,037 ms at 500 ms, 673 and
		// 700 ms at 300 ms, with no election beyond the five kills; the
		// chaos suite has always run at these timings.
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   120 * time.Second,
		TrailingLogs:       10240,
		MaxAppendEntries:   64,
		MaxInflightEntries: 2,
		ApplyTimeout:       5 * time.Second,
		Logger:             slog.Default(),
	}
}

// Validate checks the configuration once, at start.
func (c Config) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("node: ID is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("node: DataDir is required"))
	}
	for name, a := range map[string]string{"RaftAddr": c.RaftAddr, "HTTPAddr": c.HTTPAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("node: %s %q is not host:port", name, a))
		}
	}
	if c.RaftAdvertise != "" {
		if _, port, err := net.SplitHostPort(c.RaftAdvertise); err != nil || port == "0" {
			errs = append(errs, fmt.Errorf("node: RaftAdvertise %q is not host:port", c.RaftAdvertise))
		}
	}
	switch c.LogStore {
	case "", LogStoreWAL, LogStoreBolt:
	default:
		errs = append(errs, fmt.Errorf("node: LogStore %q: want %q or %q", c.LogStore, LogStoreWAL, LogStoreBolt))
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		errs = append(errs, fmt.Errorf("node: LeaderLeaseTimeout (%s) must not exceed HeartbeatTimeout (%s)",
			c.LeaderLeaseTimeout, c.HeartbeatTimeout))
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			found = found || string(p.ID) == c.ID
		}
		if !found {
			errs = append(errs, fmt.Errorf("node: Peers does not list this node's ID %q", c.ID))
		}
	}
	return errors.Join(errs...)
}

// ParsePeers parses "n1=127.0.0.1:8001,n2=127.0.0.1:8002" into voters.
func ParsePeers(s string) ([]raft.Server, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []raft.Server
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("peer %q: want ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer %q listed twice", id)
		}
		seen[id] = true
		out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: raft.Voter})
	}
	return out, nil
}

func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.PreVoteDisabled = false
	// Peer ids as labels only (raft_replication_heartbeat{peer_id="n2"}),
	// not also inside metric names as raft's legacy metrics put them.
	rc.NoLegacyTelemetry = true
	rc.Logger = newHCLogger(c.Logger)
	return rc
}
