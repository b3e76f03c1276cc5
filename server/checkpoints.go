package server

import (
	"encoding/json"
	"net/http"

	"github.com/baton-dev/baton/client/wire"
	"github.com/baton-dev/baton/fsm"
)

type checkpointPutRequest struct {
	ParentID *string         `json:"parent_id"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
	Fork     bool            `json:"fork"`
	Fence    *wire.Fence     `json:"fence"`
}

type checkpointWritesRequest struct {
	Writes json.RawMessage `json:"writes"`
	Fence  *wire.Fence     `json:"fence"`
}

type threadDeleteRequest struct {
	Fence *wire.Fence `json:"fence"`
}

func (s *Server) checkpointRoutes(add func(string, string, routeKind, handlerFunc)) {
	base := "/v1/tenants/{tenant}/threads/{thread}"
	add("PUT", base+"/checkpoints/{id}", routeWrite, s.handleCheckpointPut)
	add("GET", base+"/checkpoints/{id}", routeRead, s.handleCheckpointGet)
	add("GET", base+"/checkpoints", routeRead, s.handleCheckpointList)
	add("PUT", base+"/checkpoints/{id}/writes/{task_id}", routeWrite, s.handleCheckpointWrites)
	add("DELETE", base, routeWrite, s.handleThreadDelete)
}

// threadAccess validates the thread name and authorizes action on it.
func (s *Server) threadAccess(id *identity, r *http.Request, action string) (tenant, thread string, err error) {
	tenant, thread = r.PathValue("tenant"), r.PathValue("thread")
	if err := validName("thread", thread); err != nil {
		return "", "", err
	}
	return tenant, thread, s.tenantAccess(id, tenant, resCheckpoints, thread, action)
}

func (s *Server) handleCheckpointPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	cpID := r.PathValue("id")
	if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	if cpID == "latest" {
		return badRequest(`"latest" is reserved and cannot be a checkpoint id`)
	}
	tenant, thread, err := s.threadAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	var req checkpointPutRequest
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := req.args(cpID)
	if err != nil {
		return err
	}
	args.Thread = thread
	return s.proposeAndReply(w, r, id, tenant, fsm.KindCheckpointPut, args, body)
}

func (req *checkpointPutRequest) args(cpID string) (*fsm.CheckpointPutArgs, error) {
	if len(req.Data) == 0 {
		return nil, badRequest("data is required (any JSON value)")
	}
	a := &fsm.CheckpointPutArgs{ID: cpID, Fork: req.Fork}
	if req.ParentID != nil {
		if err := validName("parent_id", *req.ParentID); err != nil {
			return nil, err
		}
		a.ParentID = *req.ParentID
	}
	var err error
	if a.Data, err = compactJSON("data", req.Data); err != nil {
		return nil, err
	}
	if a.Metadata, err = compactJSON("metadata", req.Metadata); err != nil {
		return nil, err
	}
	a.Fence, err = fenceArg(req.Fence)
	return a, err
}

func (s *Server) handleCheckpointGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, thread, err := s.threadAccess(id, r, actRead)
	if err != nil {
		return err
	}
	cpID := r.PathValue("id")
	if cpID == "latest" {
		if cpID = s.fsm.ThreadHead(tenant, thread); cpID == "" {
			return errorf(fsm.CodeNotFound, "thread %q has no checkpoint", thread)
		}
	} else if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	v, index, ok := s.fsm.GetCheckpoint(tenant, thread, cpID)
	if !ok {
		return errorf(fsm.CodeNotFound, "checkpoint %q not found in thread %q", cpID, thread)
	}
	return s.readReply(w, index, v)
}

func (s *Server) handleCheckpointList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, thread, err := s.threadAccess(id, r, actRead)
	if err != nil {
		return err
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	before := r.URL.Query().Get("before")
	if before != "" {
		if err := validName("before", before); err != nil {
			return err
		}
	}
	list, index, ok := s.fsm.ListCheckpoints(tenant, thread, before, limit)
	if !ok {
		return errorf(fsm.CodeNotFound, "checkpoint %q (before) not found in thread %q", before, thread)
	}
	return s.readReply(w, index, map[string]any{"checkpoints": list})
}

func (s *Server) handleCheckpointWrites(w http.ResponseWriter, r *http.Request, id *identity) error {
	cpID, taskID := r.PathValue("id"), r.PathValue("task_id")
	if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	if err := validName("task_id", taskID); err != nil {
		return err
	}
	tenant, thread, err := s.threadAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	var req checkpointWritesRequest
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	writes, err := compactJSON("writes", req.Writes)
	if err != nil {
		return err
	}
	if len(writes) == 0 || writes[0] != '[' {
		return badRequest("writes must be a JSON array")
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.CheckpointWritesArgs{Thread: thread, ID: cpID, TaskID: taskID, Writes: writes, Fence: fence}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindCheckpointWrites, args, body)
}

func (s *Server) handleThreadDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	var req threadDeleteRequest
	body, err := readBody(w, r, s.cfg.MaxJSONBody)
	if err != nil {
		return err
	}
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	tenant, thread, err := s.threadAccess(id, r, actDelete)
	if err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindThreadDelete, &fsm.ThreadDeleteArgs{Thread: thread, Fence: fence}, body)
}
