package server

import (
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// quotaRoutes: a tenant's state quota (fsm/usage.go). The admin sets it;
// the admin or a principal of the tenant with an admin grant reads it.
func (s *Server) quotaRoutes(add addRoute) {
	add("PUT", "/v1/tenants/{tenant}/quota", routeWrite, s.handleQuotaPut, cmd(wire.Quota{}, fsm.KindTenantQuota))
	add("GET", "/v1/tenants/{tenant}/quota", routeRead, s.handleQuotaGet)
}

func (s *Server) handleQuotaPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	t := r.PathValue("tenant")
	if err := id.requireAdmin(); err != nil {
		return err
	}
	if err := validName("tenant", t); err != nil {
		return err
	}
	var req wire.Quota
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if req.MaxBytes == nil || req.MaxKeys == nil {
		return badRequest("max_bytes and max_keys are required (0: no limit)")
	}
	if *req.MaxBytes < 0 || *req.MaxKeys < 0 {
		return badRequest("max_bytes and max_keys must not be negative (0: no limit)")
	}
	q := fsm.TenantQuota{MaxBytes: *req.MaxBytes, MaxKeys: *req.MaxKeys}
	if req.RatePerSec != nil {
		q.RatePerSec = *req.RatePerSec
	}
	if req.Burst != nil {
		q.Burst = *req.Burst
	}
	if q.RatePerSec < 0 || q.Burst < 0 || q.RatePerSec > 1e6 {
		return badRequest("rate_per_sec must be from 0 (no limit) to 1000000, burst not negative")
	}
	args := &fsm.TenantQuotaArgs{TenantQuota: q}
	res, err := s.propose(r, id, t, fsm.KindTenantQuota, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

func (s *Server) handleQuotaGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	t := r.PathValue("tenant")
	if err := s.tenantAdmin(id, t, "", actRead); err != nil {
		return err
	}
	return s.readReply(w, s.fsm.AppliedIndex(), s.fsm.TenantUsage(t))
}
