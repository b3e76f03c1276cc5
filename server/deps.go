package server

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// Dependencies (docs/api.md "Dependencies"): the create's checks, the
// listing of a task's dependencies, and the leader's processing of queued
// resolutions.

// validDependsOn checks a create's depends_on and dependency_policy
// before anything is proposed; the state machine checks that each names a
// task of the tenant the caller may read.
func validDependsOn(id string, deps []string, policy string) error {
	if len(deps) > fsm.MaxDependsOn {
		return badRequest("depends_on names %d tasks; at most %d", len(deps), fsm.MaxDependsOn)
	}
	if !fsm.ValidDepPolicy(policy) {
		return badRequest("dependency_policy %q must be fail, cancel or ignore", policy)
	}
	if policy != "" && len(deps) == 0 {
		return badRequest("dependency_policy goes with depends_on")
	}
	seen := make(map[string]bool, len(deps))
	for _, d := range deps {
		if err := validName("depends_on[]", d); err != nil {
			return err
		}
		if d == id {
			return badRequest("task %q may not depend on itself", id)
		}
		if seen[d] {
			return badRequest("depends_on names task %q twice", d)
		}
		seen[d] = true
	}
	return nil
}

// handleTaskDependencies lists a task's dependencies in id order, with
// each one's outcome once resolved, to whoever may read the task.
func (s *Server) handleTaskDependencies(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, taskID := r.PathValue("tenant"), r.PathValue("id")
	q := r.URL.Query()
	after, err := base64.RawURLEncoding.DecodeString(q.Get("page_token"))
	if err != nil {
		return badRequest("page_token is not one this server returned")
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be 1 to 1000, not %q", v)
		}
		limit = n
	}
	if _, err := s.authorizeTask(id, tenant, taskID, actRead); err != nil {
		return err
	}
	deps, next, ok, index := s.fsm.TaskDependencies(tenant, taskID, string(after), limit)
	if !ok {
		return errorf(fsm.CodeNotFound, "task %q not found", taskID)
	}
	token := ""
	if next != "" {
		token = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReply(w, index, map[string]any{"dependencies": deps, "next_page_token": token})
}

// resolveDepsBatch bounds one task.resolve_deps (edges and clean-up keys);
// resolveDepsTick bounds how long one tick of purgeLoop keeps proposing.
const (
	resolveDepsBatch = 1000
	resolveDepsTick  = 200 * time.Millisecond
)

// resolveDeps proposes task.resolve_deps while the state has queued
// dependency resolutions (a fan-out larger than what the resolving
// command itself processes), for at most resolveDepsTick.
func (s *Server) resolveDeps() {
	if !s.cluster.IsLeader() {
		return
	}
	stop := time.Now().Add(resolveDepsTick)
	for s.fsm.DepWorkPending() && time.Now().Before(stop) && s.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
		_, err := s.replica.ProposeOwn(ctx, fsm.KindTaskResolveDeps, "", &fsm.TaskResolveDepsArgs{Max: resolveDepsBatch})
		cancel()
		if err != nil {
			s.log.Debug("task resolve_deps", "err", err)
			return
		}
	}
}
