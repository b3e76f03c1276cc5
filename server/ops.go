package server

import (
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

func (s *Server) opRoutes(add addRoute) {
	add("POST", "/v1/tenants/{tenant}/ops/{op_id}/begin", routeWrite, s.handleOpBegin, cmd(wire.OpBegin{}, fsm.KindOpBegin))
	add("POST", "/v1/tenants/{tenant}/ops/{op_id}/finish", routeWrite, s.handleOpFinish, cmd(wire.OpFinish{}, fsm.KindOpFinish))
	add("GET", "/v1/tenants/{tenant}/ops/{op_id}", routeRead, s.handleOpGet)
}

func (s *Server) opAccess(id *identity, r *http.Request, action string) (tenant, opID string, err error) {
	tenant, opID = r.PathValue("tenant"), r.PathValue("op_id")
	if err := validName("op_id", opID); err != nil {
		return "", "", err
	}
	return tenant, opID, s.tenantAccess(id, tenant, resOps, opID, action)
}

func (s *Server) handleOpBegin(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, opID, err := s.opAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	var req wire.OpBegin
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validName("kind", req.Kind); err != nil {
		return err
	}
	if req.ParamsDigest == "" || len(req.ParamsDigest) > 256 {
		return badRequest("params_digest is required (1 to 256 characters)")
	}
	if req.TaskID != "" {
		if err := validName("task_id", req.TaskID); err != nil {
			return err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.OpBeginArgs{ID: opID, Kind: req.Kind, ParamsDigest: req.ParamsDigest, TaskID: req.TaskID, Fence: fence}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindOpBegin, args, body)
}

func (s *Server) handleOpFinish(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, opID, err := s.opAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	var req wire.OpFinish
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	switch req.State {
	case fsm.OpSucceeded, fsm.OpFailed, fsm.OpUnknown:
	default:
		return badRequest("state must be succeeded, failed or unknown, not %q", req.State)
	}
	result, err := compactJSON("result", req.Result)
	if err != nil {
		return err
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.OpFinishArgs{ID: opID, State: req.State, Result: result, Fence: fence}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindOpFinish, args, body)
}

func (s *Server) handleOpGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, opID, err := s.opAccess(id, r, actRead)
	if err != nil {
		return err
	}
	o, index, ok := s.fsm.GetOp(tenant, opID)
	if !ok {
		return errorf(fsm.CodeNotFound, "op %q not found", opID)
	}
	return s.readReply(w, index, o)
}
