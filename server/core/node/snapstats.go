package node

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/hashicorp/raft"
)

// SnapshotStats is what the node knows of the snapshots it wrote since it
// started: how many, and the size and the time to persist the last one.
type SnapshotStats struct {
	Count       uint64
	LastBytes   int64
	LastSeconds float64
}

// snapStats are updated by timedFSM; read by SnapshotStats.
type snapStats struct {
	count   atomic.Uint64
	bytes   atomic.Int64
	seconds atomic.Uint64 // float64 bits
}

// SnapshotStats reports the snapshots persisted since start.
func (n *Node) SnapshotStats() SnapshotStats {
	return SnapshotStats{Count: n.snapStats.count.Load(), LastBytes: n.snapStats.bytes.Load(),
		LastSeconds: float64frombits(n.snapStats.seconds.Load())}
}

// timedFSM is the FSM as Raft sees it: snapshots are measured on their
// way to disk. ApplyBatch, Apply and Restore are the FSM's own.
type timedFSM struct {
	*fsm.FSM
	stats *snapStats
}

func (t timedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := t.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &timedSnapshot{FSMSnapshot: s, stats: t.stats}, nil
}

type timedSnapshot struct {
	raft.FSMSnapshot
	stats *snapStats
}

func (s *timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	cs := &countingSink{SnapshotSink: sink}
	err := s.FSMSnapshot.Persist(cs)
	if err == nil {
		s.stats.bytes.Store(cs.n)
		s.stats.seconds.Store(float64bits(time.Since(start).Seconds()))
		s.stats.count.Add(1)
	}
	return err
}

type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}

func float64bits(f float64) uint64     { return math.Float64bits(f) }
func float64frombits(b uint64) float64 { return math.Float64frombits(b) }
