package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// watchResources are the resources a watch without resources= follows;
// it may also name waitpoints (which came later: a default that grew
// would refuse principals without a grant on them).
var watchResources = []string{fsm.ResourceTasks, fsm.ResourceRefs, fsm.ResourceArtifacts, fsm.ResourceKV,
	fsm.ResourceCheckpoints, fsm.ResourceOps}

// watchKeepalive is how often an idle stream gets a comment line, so that
// proxies and clients can tell a quiet stream from a dead one.
const watchKeepalive = 10 * time.Second

// resumePoint is where a watch continues: after event pos of index (pos
// -1: after every event of index); wire.EventPos says how event ids
// name it, so Last-Event-ID resumes exactly.
type resumePoint struct {
	index uint64
	pos   int
}

func parseEventID(s string) (resumePoint, error) {
	p, ok := wire.ParseEventID(s)
	if !ok {
		return resumePoint{}, badRequest("event id %q is not INDEX or INDEX.POS", s)
	}
	return resumePoint{index: p.Index, pos: p.Pos}, nil
}

func eventID(ev *fsm.Event) string {
	p := wire.EventPos{Index: ev.Index, Pos: ev.Pos}
	if ev.Last {
		p.Pos = -1
	}
	return p.String()
}

type watchFilter struct {
	tenant    string
	resources map[string]bool
	prefix    string
	id        *identity
}

func (wf *watchFilter) match(ev *fsm.Event) bool {
	return ev.Tenant == wf.tenant && wf.resources[ev.Resource] && strings.HasPrefix(ev.Key, wf.prefix) &&
		wf.id.allow(wf.tenant, ev.Resource, ev.Name, actRead) == nil
}

func (s *Server) watchRoutes(add addRoute) {
	add("GET", "/v1/tenants/{tenant}/watch", routeStream, s.handleWatch)
}

// handleWatch streams the changes this node applies, from its own event
// history: a watch is served by the node it is connected to, and every node
// applies the same log, so a client may resume on any node. Apply never
// waits for a watcher; a watcher that falls out of the history window is
// ended with an error event and must re-read the state.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, id *identity) error {
	// Authorized and validated before anything waits.
	wf, start, named, err := s.watchRequest(r, id)
	if err != nil {
		return err
	}
	if err := s.catchUp(r, start.index); err != nil {
		return err
	}
	if !named {
		start = resumePoint{index: s.fsm.AppliedIndex(), pos: -1} // from now: what this node has caught up to
	}
	hist := s.fsm.History()
	if _, compacted := hist.Since(start.index, start.pos, 0); compacted {
		return &apiError{Code: codeCompacted, Message: fmt.Sprintf("index %d is older than this node's retained history (from %d); read the current state and watch from its index", start.index, hist.Floor()),
			Details: map[string]any{"floor": hist.Floor()}}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errorf(codeInternal, "streaming unsupported")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	setIndex(w, start.index)
	w.WriteHeader(http.StatusOK)
	// The stream's first bytes go out with its head, before anything is
	// waited for: a client (or proxy) that reads the body, not the
	// headers, sees at once that the watch is established, and where from.
	fmt.Fprintf(w, ": watching after index %d\n\n", start.index)
	flusher.Flush()
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()
	return s.streamEvents(w, r, flusher, wf, start)
}

// watchRequest authorizes and validates a watch: its filter, and the
// resume point the client named (named false: none, the stream starts from
// this node's state once it has caught up).
func (s *Server) watchRequest(r *http.Request, id *identity) (_ *watchFilter, start resumePoint, named bool, err error) {
	tenant := r.PathValue("tenant")
	q := r.URL.Query()
	wf := &watchFilter{tenant: tenant, resources: map[string]bool{}, prefix: q.Get("prefix"), id: id}
	names := watchResources
	if v := q.Get("resources"); v != "" {
		names = strings.Split(v, ",")
	}
	// No tenant existence check: a watch is served from this node's state,
	// which may not have applied the tenant's creation yet.
	if err := validName("tenant", tenant); err != nil {
		return nil, resumePoint{}, false, err
	}
	if !id.admin && id.tenant != tenant {
		return nil, resumePoint{}, false, errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	for _, res := range names {
		if !validResources[res] || res == resAdmin || res == resAll {
			return nil, resumePoint{}, false, badRequest("unknown resource %q to watch", res)
		}
		if !id.admin && !grantsReach(id.grants, res, "", actRead) {
			return nil, resumePoint{}, false, errorf(fsm.CodeForbidden, "principal %q cannot read %s", id.principal, res)
		}
		wf.resources[res] = true
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		start, err = parseEventID(v)
		named = true
	} else if v := q.Get("from_index"); v != "" {
		start, err = parseEventID(v)
		start.pos, named = -1, true
	}
	if err != nil {
		return nil, resumePoint{}, false, err
	}
	return wf, start, named, nil
}

func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, flusher http.Flusher, wf *watchFilter, at resumePoint) error {
	hist := s.fsm.History()
	keepalive := time.NewTicker(watchKeepalive)
	defer keepalive.Stop()
	for {
		_, changed := s.fsm.Changed()
		if !s.stillValid(wf.id) { // revoked: its tokens fail from the next event on
			writeSSEError(w, codeUnauthenticated, "the watcher's token was revoked")
			flusher.Flush()
			return nil
		}
		evs, compacted := hist.Since(at.index, at.pos, 512)
		if compacted {
			writeSSEError(w, codeCompacted, "this watcher fell behind the node's retained history and was dropped; read the current state and watch again from its index")
			flusher.Flush()
			return nil
		}
		for i := range evs {
			ev := &evs[i]
			at = resumePoint{index: ev.Index, pos: ev.Pos}
			if ev.Last {
				at.pos = -1
			}
			if !wf.match(ev) {
				continue
			}
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", eventID(ev), b)
		}
		if len(evs) > 0 {
			flusher.Flush()
			continue
		}
		select {
		case <-changed:
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		case <-r.Context().Done():
			return nil
		case <-s.ctx.Done():
			return nil
		}
	}
}

func writeSSEError(w http.ResponseWriter, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
}
