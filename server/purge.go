package server

import (
	"context"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// purgeLoop runs on every node but acts only on the leader: when the
// earliest KV expiry has passed by the leader's clock, it proposes a purge
// command stamped with that time. Expiry is decided in Apply by the
// command's time, never by a replica's clock; readers hide expired entries
// in the meantime.
func (s *Server) purgeLoop() { s.every(250*time.Millisecond, s.purgeExpired) }

func (s *Server) purgeExpired() {
	if !s.cluster.IsLeader() {
		return
	}
	if next := s.fsm.NextKVExpiry(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cluster.Apply(ctx, fsm.NewCommand(fsm.KindKVPurge, s.now(), "", "", &fsm.KVPurgeArgs{Max: 1000})); err != nil {
		s.log.Debug("kv purge", "err", err)
	}
}

// every calls f every d until the server closes: the skeleton of the
// server's background loops (purgeLoop, registerLoop).
func (s *Server) every(d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}
