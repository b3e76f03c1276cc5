package server

import (
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/mcpserver"
)

// MCPConfig configures /mcp, the Model Context Protocol endpoint
// (docs/mcp.md).
type MCPConfig struct {
	Disabled bool
	// MaxSessions bounds the MCP sessions this node holds (default 256).
	MaxSessions int
	// IdleTimeout ends a session that sent nothing for this long and
	// releases its claim (default 10m).
	IdleTimeout time.Duration
}

// mcpRoute registers /mcp: MCP's streamable HTTP transport, whose tools
// call this node's own API in-process with the caller's token, so that
// each is authenticated, authorized and forwarded exactly as the route it
// stands for.
func (s *Server) mcpRoute() {
	if s.cfg.MCP.Disabled {
		return
	}
	s.mcp = mcpserver.NewHTTPHandler(mcpserver.HTTPConfig{
		Authenticate: s.mcpAuth,
		API:          s.Handler(),
		MaxSessions:  s.cfg.MCP.MaxSessions,
		IdleTimeout:  s.cfg.MCP.IdleTimeout,
		MaxBodyBytes: 2*s.cfg.MaxJSONBody + 64<<10,
		Version:      s.cfg.Build.Version,
		Logger:       s.log,
	})
	s.mux.Handle("/mcp", s.mcp)
}

// mcpAuth authenticates a request to /mcp before any of it is read, as a
// route that any node answers: the bearer token (a principal's, or the
// admin's), the principal's request rate, and the tenant: a principal's
// own, or for the admin token the one named by ?tenant= (or the
// X-Baton-Tenant header), which it must name.
func (s *Server) mcpAuth(w http.ResponseWriter, r *http.Request) (mcpserver.Caller, bool) {
	fail := func(err error) (mcpserver.Caller, bool) {
		writeError(w, err)
		return mcpserver.Caller{}, false
	}
	if s.removed() {
		return fail(errRemoved(s.cluster.ID()))
	}
	id, verified, err := s.followerAuth(r)
	if !verified {
		err = errorf(codeUnavailable, "node %s cannot verify this token now (no leader to compare with); retry", s.cluster.ID())
	}
	if err != nil {
		return fail(err)
	}
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		tenant = r.Header.Get("X-Baton-Tenant")
	}
	switch {
	case id.admin && tenant == "":
		return fail(badRequest("the admin token works in one tenant per MCP session: name it with ?tenant=NAME (or X-Baton-Tenant)"))
	case id.admin:
		if err := validName("tenant", tenant); err != nil {
			return fail(err)
		}
	case tenant != "" && tenant != id.tenant:
		return fail(errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal))
	default:
		tenant = id.tenant
		if err := s.limits.allow(id, s.fsm.TenantUsage(id.tenant).TenantQuota, time.Now()); err != nil {
			return fail(err)
		}
	}
	tok, _ := bearerToken(r.Header.Get("Authorization"))
	return mcpserver.Caller{Token: tok, Tenant: tenant, Identity: tenant + "/" + hashToken(tok)}, true
}
