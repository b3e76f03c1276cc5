package server

import (
	"context"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// purgeLoop runs on every node but acts only on the leader: when the
// earliest KV expiry (or retained task's, purgeRetained) has passed by the
// leader's clock, it proposes a purge command stamped with that time. Expiry is decided in Apply by the
// command's time, never by a replica's clock; readers hide expired entries
// in the meantime.
func (s *Server) purgeLoop() {
	s.every(250*time.Millisecond, func() {
		s.purgeExpired()
		s.purgeRetained()
		s.purgeCheckpoints()
		s.sweepCancelled()   // cancel.go
		s.resolveDeps()      // deps.go
		s.expireWaitpoints() // waitpoints.go
		s.tickSchedules()    // schedules.go
	})
}

// taskPurgeBatch bounds the tasks one task.purge deletes (each is a watch
// event and a few keys); a longer backlog takes a command per tick.
const taskPurgeBatch = 256

// purgeRetained proposes task.purge, stamped with the leader's time, when
// the earliest retained task's expiry has passed by that time; Apply
// decides which tasks are due by the command's time.
func (s *Server) purgeRetained() {
	if !s.cluster.IsLeader() {
		return
	}
	if next := s.fsm.NextTaskExpiry(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindTaskPurge, "", &fsm.TaskPurgeArgs{Max: taskPurgeBatch}); err != nil {
		s.log.Debug("task purge", "err", err)
	}
}

// checkpointPurgeBatch bounds the checkpoints one checkpoint.purge deletes.
const checkpointPurgeBatch = 256

// purgeCheckpoints proposes checkpoint.purge when the earliest checkpoint
// expiry (a retention policy's max age) has passed by the leader's clock.
func (s *Server) purgeCheckpoints() {
	if !s.cluster.IsLeader() {
		return
	}
	if next := s.fsm.NextCheckpointExpiry(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindCheckpointPurge, "", &fsm.CheckpointPurgeArgs{Max: checkpointPurgeBatch}); err != nil {
		s.log.Debug("checkpoint purge", "err", err)
	}
}

func (s *Server) purgeExpired() {
	if !s.cluster.IsLeader() {
		return
	}
	s.purgeStore() // kvstore.go
	if next := s.fsm.NextKVExpiry(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindKVPurge, "", &fsm.KVPurgeArgs{Max: 1000}); err != nil {
		s.log.Debug("kv purge", "err", err)
	}
}

// every calls f, waiting d before each call, until the server closes:
// the skeleton of the server's background loops (purgeLoop,
// registerLoop).
func (s *Server) every(d time.Duration, f func()) {
	s.after(d, func() time.Duration { f(); return d })
}

// after calls f once wait has passed, then again after each wait f
// returns, until the server closes (removalLoop's backoff).
func (s *Server) after(wait time.Duration, f func() time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(f())
	}
}
