package server

import (
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// handleTaskUpdate is POST .../tasks/{id}/update. With claim_next it also
// claims the next task of a queue, in the same command
// (fsm.KindTaskUpdateClaim): a worker finishes a task and gets the next in
// one round trip. The claim is checked as a queue claim is (a write grant
// on its queue, its fields as QueueClaim's); it does not wait.
func (s *Server) handleTaskUpdate(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
	if _, err := s.authorizeTask(id, tenant, taskID, actWrite); err != nil {
		return s.replayGone(w, r, id, tenant, fsm.KindTaskUpdate, err)
	}
	var req wire.TaskUpdateClaim
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	update, err := taskUpdateArgs(&req.TaskUpdate, taskID)
	if err != nil {
		return err
	}
	next := req.ClaimNext
	if next == nil {
		return s.proposeAndReply(w, r, id, tenant, fsm.KindTaskUpdate, update, body)
	}
	claim, err := queueClaimArgs(&wire.QueueClaim{Owner: next.Owner, LeaseMs: next.LeaseMs, Statuses: next.Statuses,
		SetStatus: next.SetStatus, Max: next.Max}, next.Queue)
	if err != nil {
		return claimNextError(err)
	}
	if err := s.tenantAccess(id, tenant, resTasks, next.Queue, actWrite); err != nil {
		return err
	}
	// One attempt, whose "nothing claimable" is remembered with the
	// update for the request's Idempotency-Key or session place.
	claim.Final = true
	return s.proposeAndReply(w, r, id, tenant, fsm.KindTaskUpdateClaim, &fsm.TaskUpdateClaimArgs{Update: *update, Claim: *claim}, body)
}

// claimNextError names claim_next in a refusal of one of its fields.
func claimNextError(err error) error {
	if e, ok := err.(*apiError); ok {
		return badRequest("claim_next: %s", e.Message)
	}
	return err
}

// handleQueueBatch is POST .../queues/{queue}/batch: task updates, each
// with its own outcome, and a claim of up to max tasks of the queue, in
// one command (fsm.KindTaskUpdateBatch). The caller needs a write grant
// on the queue, checked before the body is read, and on every updated
// task's queue; a refused grant, a bad field or too many updates refuse
// the whole request and nothing is written. A missing task is the
// outcome of its update (not_found) for a caller who may write every
// queue, as a single update would answer it.
func (s *Server) handleQueueBatch(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if err := validName("queue", queue); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resTasks, queue, actWrite); err != nil {
		return err
	}
	var req wire.QueueBatch
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if len(req.Updates) == 0 && req.Claim == nil {
		return badRequest("a batch has updates or a claim")
	}
	if len(req.Updates) > fsm.MaxBatchUpdates {
		return badRequest("a batch has at most %d updates, not %d", fsm.MaxBatchUpdates, len(req.Updates))
	}
	args := &fsm.TaskUpdateBatchArgs{Updates: make([]fsm.TaskUpdateArgs, len(req.Updates))}
	for i := range req.Updates {
		u := &req.Updates[i]
		if u.ID == "" {
			return badRequest("updates[%d]: id is required", i)
		}
		if _, err := s.authorizeTask(id, tenant, u.ID, actWrite); err != nil {
			if e, ok := err.(*apiError); !ok || e.Code != fsm.CodeNotFound {
				// A retry of a batch that was applied may find one of
				// its tasks gone since (deleted, purged): its first
				// answer, as replayGone gives a single update's.
				if res, ok := s.replayKnown(r, id, tenant, fsm.KindTaskUpdateBatch, body, err); ok {
					return reply(w, res, nil)
				}
				return err
			}
		}
		a, err := taskUpdateArgs(&u.TaskUpdate, u.ID)
		if err != nil {
			return batchError(i, err)
		}
		args.Updates[i] = *a
	}
	if c := req.Claim; c != nil {
		if c.Max < 1 {
			return badRequest("claim: max must be between 1 and %d, not %d", fsm.MaxClaimBatch, c.Max)
		}
		claim, err := queueClaimArgs(&wire.QueueClaim{Owner: c.Owner, LeaseMs: c.LeaseMs, Statuses: c.Statuses,
			SetStatus: c.SetStatus, Max: c.Max}, queue)
		if err != nil {
			if e, ok := err.(*apiError); ok {
				return badRequest("claim: %s", e.Message)
			}
			return err
		}
		claim.Final = true // one attempt: it does not wait
		args.Claim = claim
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindTaskUpdateBatch, args, body)
}

// batchError names the update a refusal of one of its fields is about.
func batchError(i int, err error) error {
	if e, ok := err.(*apiError); ok {
		return badRequest("updates[%d]: %s", i, e.Message)
	}
	return err
}
