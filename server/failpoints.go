package server

import (
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// failpointRoutes exist only on a node started with --failpoints: the chaos
// harness uses them to cut this node's Raft links and skew its clock.
func (s *Server) failpointRoutes(add addRoute) {
	add("GET", failpointsPattern, routeLocalAuth, s.handleFailpointsGet)
	add("PUT", failpointsPattern, routeLocalAuth, s.handleFailpointsPut)
}

const failpointsPattern = "/v1/internal/failpoints"

func (s *Server) failpointState() wire.Failpoints {
	return wire.Failpoints{CutRaftTo: s.cfg.Faults.Cut(), ClockOffsetMs: s.cfg.Faults.ClockOffset().Milliseconds()}
}

func (s *Server) handleFailpointsGet(w http.ResponseWriter, _ *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.failpointState())
	return nil
}

func (s *Server) handleFailpointsPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var req wire.Failpoints
	if _, err := s.readJSON(w, r, &req); err != nil {
		return err
	}
	s.cfg.Faults.SetCut(req.CutRaftTo)
	s.cfg.Faults.SetClockOffset(time.Duration(req.ClockOffsetMs) * time.Millisecond)
	s.log.Warn("failpoints set", "cut_raft_to", req.CutRaftTo, "clock_offset_ms", req.ClockOffsetMs)
	writeJSON(w, http.StatusOK, s.failpointState())
	return nil
}
