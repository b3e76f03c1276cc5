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
func (s *Server) purgeLoop() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !s.cluster.IsLeader() {
			continue
		}
		if next := s.fsm.NextKVExpiry(); next == 0 || next > s.now() {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
		_, err := s.cluster.Apply(ctx, fsm.NewCommand(fsm.KindKVPurge, s.now(), "", "", &fsm.KVPurgeArgs{Max: 1000}))
		cancel()
		if err != nil {
			s.log.Debug("kv purge", "err", err)
		}
	}
}
