package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

func (s *Server) taskRoutes(add addRoute) {
	add("POST", "/v1/tenants/{tenant}/tasks", routeWrite, s.handleTaskCreate, cmd(wire.TaskCreate{}, fsm.KindTaskCreate))
	add("GET", "/v1/tenants/{tenant}/tasks", routeRead, s.handleTaskList)
	add("GET", "/v1/tenants/{tenant}/tasks/{id}", routeRead, s.handleTaskGet)
	add("DELETE", "/v1/tenants/{tenant}/tasks/{id}", routeWrite, s.handleTaskDelete, cmd(nil, fsm.KindTaskDelete))
	addTaskWrite(add, s, "/v1/tenants/{tenant}/tasks/{id}/claim", fsm.KindTaskClaim, taskClaimArgs)
	addTaskWrite(add, s, "/v1/tenants/{tenant}/tasks/{id}/renew", fsm.KindTaskRenew, taskRenewArgs)
	add("POST", "/v1/tenants/{tenant}/tasks/{id}/update", routeWrite, s.handleTaskUpdate, cmd(wire.TaskUpdateClaim{}, fsm.KindTaskUpdate, fsm.KindTaskUpdateClaim)) // claimnext.go
	addTaskWrite(add, s, "/v1/tenants/{tenant}/tasks/{id}/fail", fsm.KindTaskFail, taskFailArgs)
	addTaskWrite(add, s, "/v1/tenants/{tenant}/tasks/{id}/retry", fsm.KindTaskRetry, taskRetryArgs)
	addTaskWrite(add, s, "/v1/tenants/{tenant}/tasks/{id}/cancel", fsm.KindTaskCancel, taskCancelArgs)                        // cancel.go
	add("GET", "/v1/tenants/{tenant}/tasks/{id}/dependencies", routeRead, s.handleTaskDependencies)                           // deps.go
	add("POST", "/v1/tenants/{tenant}/tasks/{id}/wait", routeWrite, s.handleTaskWait, cmd(wire.TaskWait{}, fsm.KindTaskWait)) // waitpoints.go
	add("POST", "/v1/tenants/{tenant}/waitpoints", routeWrite, s.handleWaitpointCreate, cmd(wire.WaitpointCreate{}, fsm.KindWaitpointCreate))
	add("GET", "/v1/tenants/{tenant}/waitpoints/{id}", routeLongWrite, s.handleWaitpointGet, cmd(nil))
	add("POST", "/v1/tenants/{tenant}/waitpoints/{id}/complete", routeWrite, s.handleWaitpointComplete, cmd(wire.WaitpointComplete{}, fsm.KindWaitpointComplete))
	add("POST", "/v1/tenants/{tenant}/schedules", routeWrite, s.handleScheduleCreate, cmd(wire.ScheduleCreate{}, fsm.KindScheduleCreate)) // schedules.go
	add("GET", "/v1/tenants/{tenant}/schedules", routeRead, s.handleScheduleList)
	add("GET", "/v1/tenants/{tenant}/schedules/{id}", routeRead, s.handleScheduleGet)
	add("DELETE", "/v1/tenants/{tenant}/schedules/{id}", routeWrite, s.handleScheduleDelete, cmd(nil, fsm.KindScheduleDelete))
	add("POST", "/v1/tenants/{tenant}/schedules/{id}/pause", routeWrite, s.handleSchedulePause(true), cmd(nil, fsm.KindSchedulePause))
	add("POST", "/v1/tenants/{tenant}/schedules/{id}/resume", routeWrite, s.handleSchedulePause(false), cmd(nil, fsm.KindSchedulePause))
	add("POST", "/v1/tenants/{tenant}/queues/{queue}/claim", routeLongWrite, s.handleQueueClaim, cmd(wire.QueueClaim{}, fsm.KindTaskQueueClaim))
	add("POST", "/v1/tenants/{tenant}/queues/{queue}/batch", routeWrite, s.handleQueueBatch, cmd(wire.QueueBatch{}, fsm.KindTaskUpdateBatch)) // claimnext.go
	add("PUT", "/v1/tenants/{tenant}/queues/{queue}/policy", routeWrite, s.handleQueuePolicyPut, cmd(wire.QueuePolicy{}, fsm.KindQueuePolicy))
	add("GET", "/v1/tenants/{tenant}/queues/{queue}/policy", routeRead, s.handleQueuePolicyGet)
	add("GET", "/v1/tenants/{tenant}/queues", routeRead, s.handleQueueList)          // queues.go
	add("GET", "/v1/tenants/{tenant}/queues/{queue}", routeRead, s.handleQueueStats) // queues.go
	add("POST", "/v1/tenants/{tenant}/txn", routeWrite, s.handleTxn, cmd(wire.Txn{}, fsm.KindTxn))
}

// authorizeTask checks action on the task's queue. A missing task is 404
// only for a caller who may act on every queue; anyone else gets 403 for a
// missing task and for another queue's task alike, so grants on some queues
// reveal nothing about the others.
func (s *Server) authorizeTask(id *identity, tenant, taskID, action string) (*fsm.Task, error) {
	if err := validName("tenant", tenant); err != nil {
		return nil, err
	}
	if err := validName("task id", taskID); err != nil {
		return nil, err
	}
	if err := s.inTenantOnly(id, tenant); err != nil {
		return nil, err
	}
	t, _, ok := s.fsm.GetTask(tenant, taskID)
	if !ok {
		if id.allow(tenant, resTasks, "", action) != nil {
			return nil, taskForbidden(id, taskID, action)
		}
		return nil, errorf(fsm.CodeNotFound, "task %q not found", taskID)
	}
	if id.allow(tenant, resTasks, t.Queue, action) != nil {
		return nil, taskForbidden(id, taskID, action)
	}
	return t, nil
}

// replayGone answers a retried write on a task that authorizeTask cannot
// find (refused with refusal) with the first attempt's answer, replayed,
// when its Idempotency-Key or session place has one: the task may be gone
// because of that very write (a delete), or since (a retention purge, a
// delete), and the write was authorized when it was applied. Without a
// remembered answer, the refusal stands. The body, at most MaxJSONBody,
// is read for the request's fingerprint only from an authenticated caller
// of the tenant with a key or a session place.
func (s *Server) replayGone(w http.ResponseWriter, r *http.Request, id *identity, tenant string, kind fsm.Kind, refusal error) error {
	if !replayable(r, refusal) || s.inTenantOnly(id, tenant) != nil {
		return refusal
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return refusal
	}
	if res, ok := s.replayKnown(r, id, tenant, kind, body, refusal); ok {
		return reply(w, res, nil)
	}
	return refusal
}

// replayable: a refusal a replay may stand in for (the task is not found,
// or not visible), of a request that identifies its retries.
func replayable(r *http.Request, refusal error) bool {
	var e *apiError
	return errors.As(refusal, &e) && (e.Code == fsm.CodeNotFound || e.Code == fsm.CodeForbidden) &&
		(r.Header.Get(headerIdempotencyKey) != "" || r.Header.Get(headerSession) != "")
}

// replayKnown returns the answer remembered for the request (its key or
// session place, and body), if refusal is one a replay may stand in for.
func (s *Server) replayKnown(r *http.Request, id *identity, tenant string, kind fsm.Kind, body []byte, refusal error) (*fsm.Result, bool) {
	if !replayable(r, refusal) {
		return nil, false
	}
	cmd, err := s.command(r, id, tenant, kind, struct{}{}, body)
	if err != nil {
		return nil, false
	}
	return s.replica.Replay(cmd)
}

// taskForbidden is the one answer for a task outside the caller's grants,
// whether or not it exists: it names neither its queue nor anything else
// the caller could not see.
func taskForbidden(id *identity, taskID, action string) error {
	return errorf(fsm.CodeForbidden, "principal %q may not %s task %q", id.principal, action, taskID)
}

// inTenantOnly checks that the caller belongs to the tenant (or is the
// admin), without looking at the state.
func (s *Server) inTenantOnly(id *identity, tenant string) error {
	if !id.admin && id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	return nil
}

// hideTaken turns the answer to a create of a task id that is taken by a
// task the caller may not read into the 403 of any task outside its grant,
// instead of a 409 that would confirm that the task exists.
func (s *Server) hideTaken(id *identity, tenant, taskID string, res *fsm.Result) *fsm.Result {
	if res.Code != fsm.CodeAlreadyExists || id.admin || taskID == "" {
		return res
	}
	if t, _, ok := s.fsm.GetTask(tenant, taskID); ok && id.allow(tenant, resTasks, t.Queue, actRead) == nil {
		return res
	}
	ae := taskForbidden(id, taskID, actWrite).(*apiError)
	return &fsm.Result{Code: ae.Code, Message: ae.Message, Index: res.Index, Replay: res.Replay}
}

func (s *Server) handleTaskCreate(w http.ResponseWriter, r *http.Request, id *identity) error {
	t := r.PathValue("tenant")
	var req wire.TaskCreate
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := taskCreateArgs(&req)
	if err != nil {
		return err
	}
	if err := s.tenantAccess(id, t, resTasks, args.Queue, actWrite); err != nil {
		return err
	}
	res, err := s.propose(r, id, t, fsm.KindTaskCreate, args, body)
	if err != nil {
		return err
	}
	return reply(w, s.hideTaken(id, t, args.ID, res), nil)
}

// tenantAccess validates the tenant name, checks the grant and that the
// tenant exists (after authorization, so a 404 never leaks to outsiders).
func (s *Server) tenantAccess(id *identity, tenant, resource, name, action string) error {
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	return id.allow(tenant, resource, name, action)
}

// mayReach is what a route whose grant depends on its body (a schedule's
// queue, a policy's prefix, a transaction's ops) checks before it reads
// the body: the caller belongs to the tenant and holds, on one of the
// resources, a grant of one of the actions on some name; the handler
// checks the names the body gives once it is read.
func (s *Server) mayReach(id *identity, tenant string, resources []string, actions ...string) error {
	if err := s.inTenant(id, tenant); err != nil || id.admin {
		return err
	}
	for _, res := range resources {
		for _, a := range actions {
			if grantsReach(id.grants, res, "", a) {
				return nil
			}
		}
	}
	return errorf(fsm.CodeForbidden, "principal %q has no %s grant on %s", id.principal,
		strings.Join(actions, " or "), strings.Join(resources, ", "))
}

// inTenant checks that the caller belongs to the tenant (or is the admin)
// and then that the tenant exists.
func (s *Server) inTenant(id *identity, tenant string) error {
	if err := validName("tenant", tenant); err != nil {
		return err
	}
	if !id.admin && id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	if !s.fsm.TenantExists(tenant) {
		return errorf(fsm.CodeNotFound, "tenant %q not found", tenant)
	}
	return nil
}

func (s *Server) proposeAndReply(w http.ResponseWriter, r *http.Request, id *identity, tenant string, kind fsm.Kind, args any, body []byte) error {
	res, err := s.propose(r, id, tenant, kind, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

func (s *Server) handleTaskGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
	if _, err := s.authorizeTask(id, tenant, taskID, actRead); err != nil {
		return err
	}
	t, index, ok := s.fsm.GetTask(tenant, taskID)
	if !ok {
		return errorf(fsm.CodeNotFound, "task %q not found", taskID)
	}
	return s.readReply(w, index, t)
}

func (s *Server) handleTaskList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	q := r.URL.Query()
	flt := fsm.TaskFilter{Queue: q.Get("queue"), Status: q.Get("status"), Owner: q.Get("owner"),
		PageToken: q.Get("page_token"), Limit: 100}
	if _, err := base64.RawURLEncoding.DecodeString(flt.PageToken); err != nil {
		return badRequest("page_token is not one this server returned")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be 1 to 1000, not %q", v)
		}
		flt.Limit = n
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if flt.Queue != "" {
		if err := id.allow(tenant, resTasks, flt.Queue, actRead); err != nil {
			return err
		}
	}
	// Without a queue filter, a principal with grants on some queues lists
	// the tasks it may read.
	flt.Visible = func(t *fsm.Task) bool { return id.allow(tenant, resTasks, t.Queue, actRead) == nil }
	tasks, next, index := s.fsm.ListTasks(tenant, flt)
	return s.readReply(w, index, map[string]any{"tasks": tasks, "next_page_token": next})
}

func (s *Server) handleTaskDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
	if _, err := s.authorizeTask(id, tenant, taskID, actDelete); err != nil {
		return s.replayGone(w, r, id, tenant, fsm.KindTaskDelete, err)
	}
	args := &fsm.TaskDeleteArgs{ID: taskID}
	if v := r.URL.Query().Get("expect_version"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("expect_version must be a non-negative integer, not %q", v)
		}
		args.ExpectVersion = &n
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindTaskDelete, args, nil)
}

// taskWrite is the handler of a write on one task named in the path (claim,
// renew, update, fail, retry): authorize on the task's queue, then decode
// the body (R, a wire type) and validate it into the command's args.
func taskWrite[R any, A any](s *Server, kind fsm.Kind, argsOf func(req *R, taskID string) (A, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, id *identity) error {
		tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
		if _, err := s.authorizeTask(id, tenant, taskID, actWrite); err != nil {
			return s.replayGone(w, r, id, tenant, kind, err)
		}
		var req R
		body, err := s.readJSON(w, r, &req)
		if err != nil {
			return err
		}
		args, err := argsOf(&req, taskID)
		if err != nil {
			return err
		}
		return s.proposeAndReply(w, r, id, tenant, kind, args, body)
	}
}

// handleQueueClaim claims the best task of a queue; with wait_ms it
// long-polls (replica.Replica.ClaimQueue).
func (s *Server) handleQueueClaim(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if err := s.tenantAccess(id, tenant, resTasks, queue, actWrite); err != nil {
		return err
	}
	var req wire.QueueClaim
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := queueClaimArgs(&req, queue)
	if err != nil {
		return err
	}
	c, err := caller(r, id, tenant, body)
	if err != nil {
		return err
	}
	claim, err := s.replica.ClaimQueue(r.Context(), c, args, time.Duration(req.WaitMs)*time.Millisecond)
	if err != nil {
		return unavailable(err)
	}
	if claim.Res != nil {
		return reply(w, claim.Res, nil)
	}
	if claim.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleQueuePolicyPut sets a queue's lifecycle defaults (admin only).
func (s *Server) handleQueuePolicyPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if err := id.requireAdmin(); err != nil {
		return err
	}
	if err := validName("queue", queue); err != nil {
		return err
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	var req wire.QueuePolicy
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := queuePolicyArgs(&req, queue)
	if err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindQueuePolicy, args, body)
}

// handleQueuePolicyGet returns a queue's lifecycle defaults (zeros: none),
// to whoever may read the queue's tasks.
func (s *Server) handleQueuePolicyGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if err := validName("queue", queue); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resTasks, queue, actRead); err != nil {
		return err
	}
	p, index := s.fsm.QueuePolicy(tenant, queue)
	return s.readReply(w, index, &p)
}
