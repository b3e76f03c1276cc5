package server

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"
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
}

// routes registers the endpoints of docs/api.md. One pattern can serve several
// methods; an unknown method gets a JSON 405, an unknown path a JSON 404.
func (s *Server) routes() {
	table := map[string]map[string]route{}
	add := func(method, pattern string, kind routeKind, h handlerFunc) {
		if table[pattern] == nil {
			table[pattern] = map[string]route{}
		}
		table[pattern][method] = route{kind: kind, h: h}
	}
	s.clusterRoutes(add)
	s.tenantRoutes(add)
	s.taskRoutes(add)
	s.kvRoutes(add)
	s.checkpointRoutes(add)
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
	for pattern, methods := range table {
		s.mux.Handle(pattern, s.dispatch(methods))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf("not_found", "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
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
	})
}

// serve forwards, authenticates and runs one route.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rt route) {
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
	stale := rt.kind == routeRead && r.URL.Query().Get("consistency") == "stale"
	if !stale && !s.cluster.IsLeader() && s.proxy.forward(w, r) {
		return
	}
	timeout := s.cfg.RequestTimeout
	if rt.kind == routeLongWrite {
		timeout += maxWaitMs * time.Millisecond
	}
	ctx, cancel := contextWithTimeout(r, timeout)
	defer cancel()
	r = r.WithContext(ctx)
	id, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if rt.kind == routeRead && !stale {
		if err := s.cluster.ReadBarrier(ctx); err != nil {
			writeError(w, unavailable(err))
			return
		}
	}
	if rt.kind == routeWrite || rt.kind == routeLongWrite {
		if err := s.cluster.WriteBarrier(ctx); err != nil {
			writeError(w, unavailable(err))
			return
		}
	}
	if err := rt.h(w, r, id); err != nil {
		writeError(w, err)
	}
}

// serveLocal runs a route on this node without forwarding. Streams are
// bounded only by the client's connection; other local routes by a timeout.
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request, rt route) {
	if rt.kind == routeLocalAuth {
		ctx, cancel := contextWithTimeout(r, 2*s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if rt.kind == routeStream {
		if err := s.catchUp(r); err != nil {
			writeError(w, err)
			return
		}
	}
	id, err := s.authenticate(r)
	if err == nil {
		err = rt.h(w, r, id)
	}
	if err != nil {
		writeError(w, err)
	}
}

// catchUp waits, briefly, until this node has applied what it knows to be
// committed and the resume point the client names, so that a stream served
// from local state authenticates against, and starts from, the state its
// client has already seen acknowledged (a principal created a moment ago).
// A node still short of the client's resume point after the wait answers
// 503: the client retries, here or on another node, instead of being told
// that its fresh token is unknown or that nothing happened.
func (s *Server) catchUp(r *http.Request) error {
	target := s.cluster.CommitIndex()
	var named uint64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("from_index")} {
		if rp, err := parseEventID(v); err == nil && rp.index > named {
			named = rp.index
		}
	}
	target = max(target, named)
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
