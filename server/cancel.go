package server

import (
	"context"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// Cancellation (docs/api.md "Cancellation"): the route's args, and the
// leader's sweep of leases that ran out with a cancellation requested.

func taskCancelArgs(req *wire.TaskCancel, id string) (*fsm.TaskCancelArgs, error) {
	if len(req.Reason) > maxErrorBytes {
		return nil, badRequest("reason is %d bytes; at most %d", len(req.Reason), maxErrorBytes)
	}
	return &fsm.TaskCancelArgs{ID: id, FencingToken: req.FencingToken, ExpectVersion: req.ExpectVersion, Reason: req.Reason}, nil
}

// cancelSweepBatch bounds the tasks one task.cancel_sweep cancels (each is
// a task write and a watch event); a longer backlog takes a command per
// tick of purgeLoop.
const cancelSweepBatch = 256

// sweepCancelled proposes task.cancel_sweep, stamped with the leader's
// time, once the earliest lease of a task with a cancellation requested
// has run out by that time; Apply decides which are due by the command's
// time.
func (s *Server) sweepCancelled() {
	if !s.cluster.IsLeader() {
		return
	}
	if next := s.fsm.NextCancelDue(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindTaskCancelSweep, "", &fsm.TaskCancelSweepArgs{Max: cancelSweepBatch}); err != nil {
		s.log.Debug("task cancel sweep", "err", err)
	}
}
