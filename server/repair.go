package server

import (
	"context"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// repairLoop makes this node hold every chunk body the replicated index
// says someone holds: a node that was down, is new, or lost a copy to
// corruption fetches the missing bodies from peers and verifies them. It
// also removes bodies that no tenant holds any more (after chunk GC), once
// they are older than the grace period, so an upload in flight is never
// swept.
func (s *Server) repairLoop() {
	defer s.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	sweep := time.Now()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.cfg.Chunks == nil {
			continue
		}
		s.repairOnce()
		if time.Since(sweep) > s.cfg.ChunkGCGrace/4 {
			s.sweepOnce()
			sweep = time.Now()
		}
	}
}

// repairOnce fetches up to 64 missing bodies; the next tick takes the rest.
func (s *Server) repairOnce() {
	fetched := 0
	for _, d := range s.fsm.AllChunks() {
		if fetched >= 64 {
			return
		}
		if s.cfg.Chunks.Has(d) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := s.fetchChunk(ctx, d)
		cancel()
		if err != nil {
			s.log.Debug("chunk repair", "digest", d, "err", err)
			return
		}
		fetched++
	}
	if fetched > 0 {
		s.log.Info("repaired missing chunk bodies", "count", fetched)
	}
}

func (s *Server) sweepOnce() {
	cutoff := time.Now().Add(-s.cfg.ChunkGCGrace)
	_ = s.cfg.Chunks.Walk(func(d string, mod time.Time) {
		if mod.After(cutoff) {
			return
		}
		if _, known := s.fsm.ChunkKnown(d); !known {
			_ = s.cfg.Chunks.Remove(d)
		}
	})
}

// maybeCollectChunks proposes chunk GC on the leader when an unreferenced
// chunk has outlived the grace period by the leader's clock.
func (s *Server) maybeCollectChunks() {
	oldest := s.fsm.OldestUnreferencedChunk()
	before := s.now() - s.cfg.ChunkGCGrace.Milliseconds()
	if oldest == 0 || oldest >= before {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cluster.Apply(ctx, fsm.NewCommand(fsm.KindChunkGC, s.now(), "", "", &fsm.ChunkGCArgs{Before: before, Max: 1000})); err != nil {
		s.log.Debug("chunk gc", "err", err)
	}
}
