package server

import (
	"context"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/replica"
)

// sessionRoutes: POST /v1/sessions opens a client session for the caller
// (any principal, or the admin): its writes carry X-Baton-Session,
// X-Baton-Seq and X-Baton-Ack, and are applied at most once however often
// they are retried (fsm/sessions.go).
func (s *Server) sessionRoutes(add addRoute) {
	add("POST", "/v1/sessions", routeWrite, s.handleSessionOpen, cmd(wire.SessionOpen{}, fsm.KindSessionOpen))
}

func (s *Server) handleSessionOpen(w http.ResponseWriter, r *http.Request, id *identity) error {
	if r.ContentLength > 0 {
		var none wire.SessionOpen
		if _, err := s.readJSON(w, r, &none); err != nil {
			return err
		}
	}
	cmd := s.replica.Command(replica.Caller{Tenant: id.tenant, Principal: id.principalName()}, fsm.KindSessionOpen, &fsm.SessionOpenArgs{})
	res, err := s.apply(r, cmd)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

// publishLimits makes the replicated limits this leader's configured ones,
// when they differ. Every replica evicts by the replicated ones.
func (s *Server) publishLimits() error {
	want := s.cfg.Limits.WithDefaults()
	if !s.cluster.IsLeader() || s.fsm.Limits() == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	_, err := s.replica.ProposeOwn(ctx, fsm.KindLimitsSet, "", &want)
	return err
}
