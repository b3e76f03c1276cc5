package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// Waitpoints (docs/api.md "Waitpoints"): create, read with a long poll,
// complete; a task holder parks its task on one; the leader times them
// out.

// maxWaitpointTimeoutMs bounds a waitpoint's timeout: 30 days.
const maxWaitpointTimeoutMs = 30 * 24 * 60 * 60 * 1000

func (s *Server) handleWaitpointCreate(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	var req wire.WaitpointCreate
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if req.WaitpointID == "" {
		b := make([]byte, 10)
		_, _ = rand.Read(b)
		req.WaitpointID = "wp-" + hex.EncodeToString(b)
	}
	if err := validName("waitpoint_id", req.WaitpointID); err != nil {
		return err
	}
	if req.TimeoutMs <= 0 || req.TimeoutMs > maxWaitpointTimeoutMs {
		return badRequest("timeout_ms must be between 1 and %d (30 days), not %d", int64(maxWaitpointTimeoutMs), req.TimeoutMs)
	}
	if err := s.tenantAccess(id, tenant, resWaitpoints, req.WaitpointID, actWrite); err != nil {
		return err
	}
	args := &fsm.WaitpointCreateArgs{ID: req.WaitpointID, TimeoutMs: req.TimeoutMs}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindWaitpointCreate, args, body)
}

// handleWaitpointGet answers a waitpoint; with wait_ms (at most 60,000)
// it waits until the waitpoint is no longer pending or the wait ends.
func (s *Server) handleWaitpointGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, wpID := r.PathValue("tenant"), r.PathValue("id")
	if err := validName("waitpoint id", wpID); err != nil {
		return err
	}
	var waitMs int64
	if v := r.URL.Query().Get("wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxWaitMs {
			return badRequest("wait_ms must be between 0 and %d, not %q", maxWaitMs, v)
		}
		waitMs = n
	}
	if err := s.tenantAccess(id, tenant, resWaitpoints, wpID, actRead); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(waitMs) * time.Millisecond)
	for {
		changed := s.replica.Changed()
		wp, index, ok := s.fsm.GetWaitpoint(tenant, wpID)
		if !ok {
			return errorf(fsm.CodeNotFound, "waitpoint %q not found", wpID)
		}
		if wp.State != fsm.WaitpointPending || !time.Now().Before(deadline) {
			return s.readReply(w, index, wp)
		}
		if err := s.replica.WaitChange(r.Context(), changed, deadline, 0); err != nil {
			return unavailable(err)
		}
	}
}

func (s *Server) handleWaitpointComplete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, wpID := r.PathValue("tenant"), r.PathValue("id")
	if err := validName("waitpoint id", wpID); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resWaitpoints, wpID, actWrite); err != nil {
		return err
	}
	var req wire.WaitpointComplete
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	payload, err := compactJSON("payload", req.Payload)
	if err != nil {
		return err
	}
	if payload == nil {
		payload = []byte("null")
	}
	args := &fsm.WaitpointCompleteArgs{ID: wpID, Payload: payload}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindWaitpointComplete, args, body)
}

// handleTaskWait parks a task, under its holder's token, on a waitpoint
// the caller may read.
func (s *Server) handleTaskWait(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
	if _, err := s.authorizeTask(id, tenant, taskID, actWrite); err != nil {
		return s.replayGone(w, r, id, tenant, fsm.KindTaskWait, err)
	}
	var req wire.TaskWait
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if req.FencingToken == nil {
		return badRequest("fencing_token is required")
	}
	if err := validName("waitpoint_id", req.WaitpointID); err != nil {
		return err
	}
	if err := id.allow(tenant, resWaitpoints, req.WaitpointID, actRead); err != nil {
		return err
	}
	args := &fsm.TaskWaitArgs{ID: taskID, FencingToken: *req.FencingToken, WaitpointID: req.WaitpointID}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindTaskWait, args, body)
}

// waitpointExpireBatch bounds one waitpoint.expire.
const waitpointExpireBatch = 256

// expireWaitpoints proposes waitpoint.expire, stamped with the leader's
// time, once the earliest pending waitpoint's timeout passed by it.
func (s *Server) expireWaitpoints() {
	if !s.cluster.IsLeader() {
		return
	}
	if next := s.fsm.NextWaitpointTimeout(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindWaitpointExpire, "", &fsm.WaitpointExpireArgs{Max: waitpointExpireBatch}); err != nil {
		s.log.Debug("waitpoint expire", "err", err)
	}
}
