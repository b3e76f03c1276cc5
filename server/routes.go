package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/console"
	"github.com/baton-dev/baton/server/core/replica"
)

// routeKind says where a route is served.
type routeKind int

const (
	routeLocal     routeKind = iota // answered by any node, no auth (health, metrics)
	routeRead                       // leader after ReadBarrier; ?consistency=stale: any node
	routeWrite                      // leader
	routeLongWrite                  // leader, may wait up to maxWaitMs (long poll)
	routeStream                     // any node, authenticated, no time limit (watch)
	routeLocalAuth                  // any node, authenticated (chunk upload, peer calls)
)

// handlerFunc handles an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, id *identity) error

type route struct {
	kind routeKind
	h    handlerFunc
	// cmd describes what the route proposes: every write route has one,
	// and so does a read that writes (the store's refresh on read).
	cmd *proposes
}

// proposes is a route's command descriptor: the request body it decodes
// (the zero value of its fsm/wire type; nil: no JSON body) and the command
// kinds it may propose (none for a write that goes to Raft otherwise, such
// as a membership change). Every write route has one, given where it is
// registered; from it tests derive that every kind of fsm's command table
// is proposed by a route or by a node's own loop (TestEveryKindIsProposed)
// and that docs/openapi.yaml documents the body's members, no more and no
// fewer (TestOpenAPIRequestBodies).
type proposes struct {
	body  any
	kinds []fsm.Kind
}

// cmd is the descriptor of a route that decodes body and proposes kinds.
func cmd(body any, kinds ...fsm.Kind) proposes { return proposes{body: body, kinds: kinds} }

// addRoute registers a route: method, ServeMux pattern, where it is
// served, its handler, and for a write its command descriptor.
type addRoute = func(method, pattern string, kind routeKind, h handlerFunc, p ...proposes)

// addTaskWrite registers a write on one task named in the path (taskWrite),
// its descriptor derived from the handler's types: the body R, the kind.
func addTaskWrite[R any, A any](add addRoute, s *Server, pattern string, kind fsm.Kind, argsOf func(req *R, taskID string) (A, error)) {
	var body R
	add("POST", pattern, routeWrite, taskWrite(s, kind, argsOf), cmd(body, kind))
}

// routes registers the endpoints of docs/api.md. One pattern can serve several
// methods; an unknown method gets a JSON 405, an unknown path a JSON 404.
func (s *Server) routes() {
	for pattern, methods := range s.routeTable() {
		s.mux.Handle(pattern, s.dispatch(methods))
	}
	s.mcpRoute()
	if !s.cfg.ConsoleDisabled {
		s.mux.Handle(console.Prefix, console.Handler()) // the web console's static files (docs/console.md)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf("not_found", "no such endpoint: %s %s", r.Method, r.URL.Path))
		s.drainBody(w, r)
	})
}

// drainBody reads and discards what the handler left of the request body
// (an answer given before or while reading it: 413, 401, 404...), at most
// twice the larger body limit and within drainTimeout. The answer waits in
// the connection's buffer meanwhile. Without this the server closes a
// connection with body data still arriving, and the kernel answers that
// data with a reset, which a client that sends its whole body before
// reading (Python's urllib, most libraries without Expect: 100-continue)
// sees instead of the answer. A body declared longer than the bound is
// not read at all: the connection is closed as before. A client that asked
// Expect: 100-continue and was not told to continue sends nothing more, so
// nothing is asked of it.
func (s *Server) drainBody(w http.ResponseWriter, r *http.Request) {
	limit := 2 * max(s.cfg.MaxChunkBody, s.cfg.MaxJSONBody)
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.ContentLength > limit ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(min(drainTimeout, s.cfg.BodyTimeout))) == nil
	_, err := io.CopyN(io.Discard, r.Body, limit)
	// A body read to its end lifts the deadline; one that was not keeps it,
	// so that net/http's own attempt to discard the rest fails fast and the
	// connection is closed.
	if deadline && err == io.EOF {
		_ = rc.SetReadDeadline(time.Time{})
	}
}

// drainTimeout bounds drainBody's wait for the rest of a body.
const drainTimeout = 5 * time.Second

// routeTable is every route this server serves, by ServeMux pattern and
// method: what routes registers, and what docs/openapi.yaml must describe
// (openapi_test.go compares the two).
func (s *Server) routeTable() map[string]map[string]route {
	table := map[string]map[string]route{}
	add := func(method, pattern string, kind routeKind, h handlerFunc, p ...proposes) {
		if table[pattern] == nil {
			table[pattern] = map[string]route{}
		}
		rt := route{kind: kind, h: h}
		if len(p) > 0 {
			rt.cmd = &p[0]
		}
		table[pattern][method] = rt
	}
	s.clusterRoutes(add)
	s.tenantRoutes(add)
	s.taskRoutes(add)
	s.kvRoutes(add)
	s.storeRoutes(add)
	s.checkpointRoutes(add)
	s.threadRoutes(add)
	s.opRoutes(add)
	s.watchRoutes(add)
	s.chunkRoutes(add)
	s.artifactRoutes(add)
	s.refRoutes(add)
	s.sessionRoutes(add)
	s.quotaRoutes(add)
	if s.cfg.Faults != nil {
		s.failpointRoutes(add)
	}
	return table
}

func (s *Server) dispatch(methods map[string]route) http.Handler {
	allow := make([]string, 0, len(methods))
	for m := range methods {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok && r.Method == http.MethodHead {
			rt, ok = methods[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, errorf(codeMethodNotAllowed, "%s is not allowed on %s; allowed: %s",
				r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		s.serve(w, r, rt)
		s.drainBody(w, r)
	})
}

// serve authenticates, forwards and runs one route. Every node checks the
// bearer token against its own applied state before it reads a byte of the
// body: a follower never buffers or forwards the body of a caller it knows
// to be refused. A token a follower does not know may belong to a principal
// it has not applied yet; that request is streamed to the leader without
// being buffered, and the leader, which authenticates before it reads a
// body, answers it (api-notes.md "Forwarding").
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rt route) {
	// A removed node refuses all but the local routes, and its failpoints
	// (nodes started with --failpoints only), which a test that cut its
	// links must be able to undo.
	if rt.kind != routeLocal && s.removed() && r.Pattern != failpointsPattern {
		writeError(w, errRemoved(s.cluster.ID()))
		return
	}
	if rt.kind == routeLocal {
		if err := rt.h(w, r, nil); err != nil {
			writeError(w, err)
		}
		return
	}
	if rt.kind == routeStream || rt.kind == routeLocalAuth {
		s.serveLocal(w, r, rt)
		return
	}
	timeout := s.cfg.RequestTimeout
	if rt.kind == routeLongWrite {
		timeout += maxWaitMs * time.Millisecond
	}
	stale := rt.kind == routeRead && r.URL.Query().Get("consistency") == "stale"
	if !stale && !s.cluster.IsLeader() {
		id, verified, err := s.followerAuth(r)
		switch {
		case err == nil:
			if err := s.admit(r, id); err != nil {
				writeError(w, err)
				return
			}
			if s.proxy.forward(w, r, s.cfg.MaxJSONBody, timeout) {
				return
			}
		case !verified:
			// The leader could not be asked: it decides itself, and the
			// body goes through unbuffered.
			if s.proxy.forward(w, r, -1, timeout) {
				return
			}
		default:
			writeError(w, err)
			return
		}
	}
	ctx, cancel := contextWithTimeout(r, timeout)
	defer cancel()
	r = r.WithContext(ctx)
	id, err := s.authenticate(r)
	if err == nil {
		err = s.admit(r, id)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	level := replica.Stale // a stale read, served from this node's state as it is
	switch {
	case rt.kind == routeRead && !stale:
		level = replica.Linearizable
	case rt.kind == routeWrite || rt.kind == routeLongWrite:
		level = replica.Leader // what a write checks before it proposes sees every acknowledged write
	}
	if _, err := s.replica.Read(ctx, level); err != nil {
		writeError(w, unavailable(err))
		return
	}
	if err := rt.h(w, r, id); err != nil {
		writeError(w, err)
	}
}

// followerAuth authenticates on a follower. A token this node does not
// know may be a principal's that the leader created a moment ago: the node
// asks the leader for its commit index, applies up to it, and looks again.
// verified is false when that could not be done (no leader, or this node
// too far behind); the caller then lets the leader decide.
func (s *Server) followerAuth(r *http.Request) (id *identity, verified bool, err error) {
	id, err = s.authenticate(r)
	if err == nil || errors.Is(err, errNoToken) || s.cluster.IsLeader() {
		return id, true, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CatchUpWait)
	defer cancel()
	commit, perr := s.proxy.leaderCommit(ctx)
	if perr != nil || s.fsm.WaitApplied(ctx, commit) != nil {
		return nil, false, err
	}
	id, err = s.authenticate(r)
	return id, true, err
}

// admit is what every node checks about an authenticated caller before it
// reads the body: a declared body over the limit is 413, another tenant's
// path is 403, and so is a request on a resource the caller holds no grant
// of that action on at all. Handlers check the object's own name later;
// this only makes sure that nobody outside learns anything from how a body
// is validated.
func (s *Server) admit(r *http.Request, id *identity) error {
	if r.ContentLength > s.cfg.MaxJSONBody {
		return errorf(codeTooLarge, "request body is over the %d byte limit", s.cfg.MaxJSONBody)
	}
	if id.admin {
		return nil
	}
	tenant := r.PathValue("tenant")
	if tenant == "" {
		return s.rateAllow(id) // POST /v1/sessions counts like any other request
	}
	if id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	res := pathResource(r.URL.Path, tenant)
	if res == "" {
		return s.rateAllow(id) // a transaction, a tenant path: the handler authorizes
	}
	action := actWrite
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		action = actRead
	case http.MethodDelete:
		action = actDelete
	}
	if !grantsReach(id.grants, res, "", action) && !checkpointChunkCall(r.URL.Path, tenant, id, action) {
		return errorf(fsm.CodeForbidden, "principal %q has no %s grant on %s", id.principal, action, res)
	}
	return s.rateAllow(id)
}

// rateAllow takes a token of a principal's bucket (its tenant's rate):
// every request a principal makes counts, whatever its route.
func (s *Server) rateAllow(id *identity) error {
	return s.limits.allow(id, s.fsm.TenantUsage(id.tenant).TenantQuota, time.Now())
}

// pathResource is the grant resource of a tenant path, "" when the route
// checks it itself (a transaction spans several, a tenant path is admin's).
func pathResource(p, tenant string) string {
	rest, ok := strings.CutPrefix(p, "/v1/tenants/"+tenant+"/")
	if !ok {
		return ""
	}
	seg, _, _ := strings.Cut(rest, "/")
	switch seg {
	case "tasks", "queues":
		return resTasks
	case "kv":
		return resKV
	case "threads":
		return resCheckpoints
	case "ops":
		return resOps
	case "waitpoints":
		return resWaitpoints
	case "artifacts", "chunks":
		return resArtifacts
	case "refs":
		return resRefs
	case "principals":
		return resAdmin
	}
	return ""
}

// checkpointChunkCall: the chunk endpoints also admit a caller with a
// checkpoints grant of the action, since checkpoint writers upload the
// chunks of large checkpoints (the handlers decide the rest: mayUpload).
func checkpointChunkCall(p, tenant string, id *identity, action string) bool {
	return strings.HasPrefix(p, "/v1/tenants/"+tenant+"/chunks/") && grantsReach(id.grants, resCheckpoints, "", action)
}

// serveLocal runs a route on this node without forwarding. Streams are
// bounded only by the client's connection; other local routes by a timeout.
// The caller is authenticated first, before anything waits or reads.
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request, rt route) {
	if rt.kind == routeLocalAuth {
		ctx, cancel := contextWithTimeout(r, 2*s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	// A token this node does not know may be a principal's created a
	// moment ago: it catches up with the leader's commit index, never
	// with a resume point an unauthenticated caller names, and looks again.
	id, verified, err := s.followerAuth(r)
	if !verified {
		err = errorf(codeUnavailable, "node %s cannot verify this token now (no leader to compare with); retry", s.cluster.ID())
	}
	if err == nil && rt.kind == routeStream {
		var end func()
		if err = s.admitStream(r, id); err == nil {
			end, err = s.limits.startWatch(id)
		}
		if err == nil {
			defer end()
		}
	}
	if err == nil && rt.kind == routeLocalAuth && !id.admin {
		err = s.limits.allow(id, s.fsm.TenantUsage(id.tenant).TenantQuota, time.Now())
	}
	if err == nil {
		err = rt.h(w, r, id)
	}
	if err != nil {
		writeError(w, err)
	}
}

// admitStream checks a watch's tenant before it waits for anything.
func (s *Server) admitStream(r *http.Request, id *identity) error {
	if tenant := r.PathValue("tenant"); !id.admin && id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	if id.admin {
		return nil
	}
	return s.limits.allow(id, s.fsm.TenantUsage(id.tenant).TenantQuota, time.Now())
}

// catchUp waits, briefly, until this node has applied what it knows to be
// committed and the resume point the client names (named; 0: none), so
// that a stream served from local state starts from the state its client
// has already seen acknowledged. A node still short of the client's resume
// point after the wait answers 503: the client retries, here or on another
// node, instead of being told that nothing happened. The caller has
// authenticated, authorized and validated the request first.
func (s *Server) catchUp(r *http.Request, named uint64) error {
	target := max(s.cluster.CommitIndex(), named)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CatchUpWait)
	defer cancel()
	if s.fsm.WaitApplied(ctx, target) == nil {
		return nil
	}
	if applied := s.fsm.AppliedIndex(); applied < named {
		return errorf(codeUnavailable, "this node has applied up to index %d, short of the resume point %d; retry", applied, named)
	}
	return nil
}
