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
		SetStatus: next.SetStatus}, next.Queue)
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
