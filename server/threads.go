package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// The thread lifecycle past delete (LangGraph's copy_thread, prune and
// delete_for_runs); docs/api.md "Checkpoints".
func (s *Server) threadRoutes(add addRoute) {
	add("POST", "/v1/tenants/{tenant}/threads/{thread}/copy", routeWrite, s.handleThreadCopy, cmd(wire.ThreadCopy{}, fsm.KindThreadCopy))
	add("POST", "/v1/tenants/{tenant}/checkpoints/prune", routeWrite, s.handleThreadPrune, cmd(wire.ThreadPrune{}, fsm.KindThreadPrune))
	add("POST", "/v1/tenants/{tenant}/checkpoints/delete-runs", routeWrite, s.handleDeleteRuns, cmd(wire.DeleteRuns{}, fsm.KindCheckpointDeleteRuns))
	add("GET", "/v1/tenants/{tenant}/checkpoints", routeRead, s.handleTenantCheckpoints)
	add("PUT", "/v1/tenants/{tenant}/checkpoint-policies", routeWrite, s.handleCheckpointPolicyPut, cmd(wire.CheckpointPolicy{}, fsm.KindCheckpointPolicy))
	add("GET", "/v1/tenants/{tenant}/checkpoint-policies", routeRead, s.handleCheckpointPolicyList)
}

// handleTenantCheckpoints lists checkpoints across threads and namespaces
// (LangGraph's list with no thread_id or no checkpoint_ns): the threads
// the caller may read, one thread when given, one namespace when given
// (even empty: the default one).
func (s *Server) handleTenantCheckpoints(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	qv := r.URL.Query()
	var q fsm.TenantCheckpointsQuery
	if qv.Has("thread") {
		th := qv.Get("thread")
		if err := validText("thread", th, 1, maxThreadIDBytes); err != nil {
			return err
		}
		if err := id.allow(tenant, resCheckpoints, th, actRead); err != nil {
			return err
		}
		q.Thread = &th
	} else if !id.admin && !grantsReach(id.grants, resCheckpoints, "", actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on checkpoints", id.principal)
	}
	if qv.Has(checkpointNSParameter) {
		ns, err := checkpointNS(r)
		if err != nil {
			return err
		}
		q.NS = &ns
	}
	if b := qv.Get("before_id"); b != "" {
		if err := validName("before_id", b); err != nil {
			return err
		}
		q.BeforeID = b
	}
	var err error
	if q.Limit, err = queryLimit(r, 100, 1000); err != nil {
		return err
	}
	if q.Match, err = metadataFilter(r); err != nil {
		return err
	}
	if q.Writes, err = boolParam(r, "pending_writes"); err != nil {
		return err
	}
	if t := qv.Get("page_token"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil || !strings.HasPrefix(string(b), "t/"+tenant+"/th/") {
			return badRequest("page_token is not one this server returned")
		}
		q.From = string(b)
	}
	if !id.admin {
		q.Visible = func(thread string) bool { return grantsAllow(id.grants, resCheckpoints, thread, actRead) }
	}
	list, next, index := s.fsm.ListTenantCheckpoints(tenant, q)
	release, err := s.readBlobChunks(r, list)
	if err != nil {
		return err
	}
	defer release()
	nextToken := ""
	if next != "" {
		nextToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReplyCheckpoints(w, r, index, list, nextToken, false)
}

// Bounds of checkpoint policies (docs/api.md "Checkpoints").
const maxCheckpointMaxAgeMs = 10 * 365 * 24 * 3600 * 1000

// handleCheckpointPolicyPut sets a thread-id prefix's retention policy.
// Since a policy deletes checkpoints, it takes the admin token or a grant
// with write and delete on checkpoints that covers every thread under the
// prefix; a caller with no checkpoints delete grant is refused before its
// body is read.
func (s *Server) handleCheckpointPolicyPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resCheckpoints, "", actDelete) {
		return errorf(fsm.CodeForbidden, "principal %q has no delete grant on checkpoints", id.principal)
	}
	var req wire.CheckpointPolicy
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if req.Prefix == nil {
		return badRequest("prefix is required (\"\" for every thread)")
	}
	if err := validText("prefix", *req.Prefix, 0, maxThreadIDBytes); err != nil {
		return err
	}
	if req.KeepLast > fsm.MaxCheckpointKeepLast {
		return badRequest("keep_last must be 0 (no bound) to %d, not %d", fsm.MaxCheckpointKeepLast, req.KeepLast)
	}
	if req.MaxAgeMs < 0 || req.MaxAgeMs > maxCheckpointMaxAgeMs {
		return badRequest("max_age_ms must be 0 (no bound) to %d, not %d", int64(maxCheckpointMaxAgeMs), req.MaxAgeMs)
	}
	if !id.admin && !cpPolicyGrant(id.grants, *req.Prefix) {
		return errorf(fsm.CodeForbidden, "principal %q needs checkpoints write and delete on every thread under %q to set its policy",
			id.principal, *req.Prefix)
	}
	args := &fsm.CheckpointPolicyArgs{Prefix: *req.Prefix, KeepLast: req.KeepLast, MaxAgeMs: req.MaxAgeMs}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindCheckpointPolicy, args, body)
}

// cpPolicyGrant reports whether one grant gives write and delete on every
// thread whose id starts with prefix.
func cpPolicyGrant(grants []fsm.Grant, prefix string) bool {
	for _, g := range grants {
		if (g.Resource == resCheckpoints || g.Resource == resAll) && prefixIncludes(g.Prefix, prefix) &&
			hasAction(g, actWrite) && hasAction(g, actDelete) {
			return true
		}
	}
	return false
}

// handleCheckpointPolicyList answers the tenant's checkpoint policies to
// whoever may read some thread of it.
func (s *Server) handleCheckpointPolicyList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resCheckpoints, "", actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on checkpoints", id.principal)
	}
	list, index := s.fsm.CheckpointPolicies(tenant)
	return s.readReply(w, index, map[string]any{"policies": list})
}

// handleThreadCopy copies the path's thread to the body's target: read on
// the source, write on the target.
func (s *Server) handleThreadCopy(w http.ResponseWriter, r *http.Request, id *identity) error {
	if r.URL.Query().Has(checkpointNSParameter) {
		return badRequest("a copy takes every namespace of the thread: %s is not taken here", checkpointNSParameter)
	}
	sc, err := s.threadAccess(id, r, actRead)
	if err != nil {
		return err
	}
	var req wire.ThreadCopy
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validText("target", req.Target, 1, maxThreadIDBytes); err != nil {
		return err
	}
	if err := id.allow(sc.tenant, resCheckpoints, req.Target, actWrite); err != nil {
		return err
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.ThreadCopyArgs{Source: sc.thread, Target: req.Target, Fence: fence}
	return s.proposeAndReply(w, r, id, sc.tenant, fsm.KindThreadCopy, args, body)
}

// handleThreadPrune prunes threads: a delete grant on each. A caller with
// no checkpoints delete grant at all is refused before its body is read.
func (s *Server) handleThreadPrune(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resCheckpoints, "", actDelete) {
		return errorf(fsm.CodeForbidden, "principal %q has no delete grant on checkpoints", id.principal)
	}
	var req wire.ThreadPrune
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args := &fsm.ThreadPruneArgs{Threads: req.Threads}
	switch req.Strategy {
	case "keep_latest":
		args.KeepLatest = true
	case "delete":
	default:
		return badRequest(`strategy must be "keep_latest" or "delete", not %q`, req.Strategy)
	}
	if len(req.Threads) > fsm.MaxPruneThreads {
		return badRequest("threads holds %d threads; at most %d a request", len(req.Threads), fsm.MaxPruneThreads)
	}
	for i, th := range req.Threads {
		if err := validText("threads["+strconv.Itoa(i)+"]", th, 1, maxThreadIDBytes); err != nil {
			return err
		}
		if err := id.allow(tenant, resCheckpoints, th, actDelete); err != nil {
			return err
		}
	}
	if args.Fence, err = fenceArg(req.Fence); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindThreadPrune, args, body)
}

// handleDeleteRuns deletes the checkpoints of runs, in whatever threads
// they are: a checkpoints delete grant on every thread (the empty prefix).
func (s *Server) handleDeleteRuns(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.tenantAccess(id, tenant, resCheckpoints, "", actDelete); err != nil {
		return err
	}
	var req wire.DeleteRuns
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if len(req.RunIDs) > fsm.MaxDeleteRuns {
		return badRequest("run_ids holds %d ids; at most %d a request", len(req.RunIDs), fsm.MaxDeleteRuns)
	}
	for i, run := range req.RunIDs {
		if err := validText("run_ids["+strconv.Itoa(i)+"]", run, 1, maxRunIDBytes); err != nil {
			return err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.CheckpointDeleteRunsArgs{RunIDs: req.RunIDs, Fence: fence}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindCheckpointDeleteRuns, args, body)
}

// maxRunIDBytes bounds a run id (a checkpoint's metadata run_id indexed).
const maxRunIDBytes = 256

// runIDOf is a checkpoint metadata's run_id when it is a string of 1 to
// maxRunIDBytes bytes without control characters ("" otherwise): the
// checkpoint is then indexed by it for delete-runs.
func runIDOf(metadata []byte) string {
	var md struct {
		RunID any `json:"run_id"`
	}
	if json.Unmarshal(metadata, &md) != nil {
		return ""
	}
	run, _ := md.RunID.(string)
	if validText("run_id", run, 1, maxRunIDBytes) != nil {
		return ""
	}
	return run
}
