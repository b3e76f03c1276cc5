package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/baton-dev/baton/fsm"
)

type principalRequest struct {
	Name   string      `json:"name"`
	Grants []fsm.Grant `json:"grants"`
}

type principalResponse struct {
	Name   string      `json:"name"`
	Token  string      `json:"token"`
	Grants []fsm.Grant `json:"grants"`
}

func (s *Server) tenantRoutes(add func(string, string, routeKind, handlerFunc)) {
	add("PUT", "/v1/tenants/{tenant}", routeWrite, s.handleTenantPut)
	add("GET", "/v1/tenants", routeRead, s.handleTenantList)
	add("POST", "/v1/tenants/{tenant}/principals", routeWrite, s.handlePrincipalCreate)
	add("DELETE", "/v1/tenants/{tenant}/principals/{name}", routeWrite, s.handlePrincipalDelete)
}

func (s *Server) handleTenantPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	t := r.PathValue("tenant")
	if err := validName("tenant", t); err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody)
	if err != nil {
		return err
	}
	res, err := s.propose(r, id, t, fsm.KindTenantPut, &fsm.TenantPutArgs{Name: t}, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

func (s *Server) handleTenantList(w http.ResponseWriter, _ *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	index := s.fsm.AppliedIndex()
	return s.readReply(w, index, map[string]any{"tenants": s.fsm.Tenants()})
}

// tenantAdmin checks that the tenant exists and the caller may manage its
// principals: the admin token, or a principal of the tenant with an admin grant.
func (s *Server) tenantAdmin(id *identity, tenant, principal, action string) error {
	if err := validName("tenant", tenant); err != nil {
		return err
	}
	if err := id.allow(tenant, resAdmin, principal, action); err != nil {
		return err
	}
	if !s.fsm.TenantExists(tenant) {
		return errorf(fsm.CodeNotFound, "tenant %q not found", tenant)
	}
	return nil
}

func (s *Server) handlePrincipalCreate(w http.ResponseWriter, r *http.Request, id *identity) error {
	t := r.PathValue("tenant")
	var req principalRequest
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validName("principal name", req.Name); err != nil {
		return err
	}
	if err := validateGrants(req.Grants); err != nil {
		return err
	}
	if err := s.tenantAdmin(id, t, req.Name, actWrite); err != nil {
		return err
	}
	if err := id.mayDelegate(req.Grants); err != nil {
		return err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	args := &fsm.PrincipalCreateArgs{Name: req.Name, Grants: req.Grants, TokenSalt: hex.EncodeToString(salt)}
	args.TokenHash = hashToken(s.principalToken(t, req.Name, args.TokenSalt))
	res, err := s.propose(r, id, t, fsm.KindPrincipalCreate, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, func(v json.RawMessage) (any, error) {
		var p fsm.Principal
		if err := json.Unmarshal(v, &p); err != nil {
			return nil, err
		}
		return principalResponse{Name: p.Name, Token: s.principalToken(p.Tenant, p.Name, p.TokenSalt), Grants: p.Grants}, nil
	})
}

// principalToken derives a principal's token from the admin secret and the
// replicated salt. The cluster stores only the token's hash; deriving it
// lets an idempotent replay of the creating request return the token again.
func (s *Server) principalToken(tenant, name, salt string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.AdminToken))
	m.Write([]byte("baton principal token\x00" + tenant + "\x00" + name + "\x00" + salt))
	return "btk_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func validateGrants(grants []fsm.Grant) error {
	for i, g := range grants {
		if !validResources[g.Resource] {
			return badRequest("grants[%d]: unknown resource %q (tasks, artifacts, refs, checkpoints, kv, ops, admin or *)", i, g.Resource)
		}
		if len(g.Actions) == 0 {
			return badRequest("grants[%d]: actions must not be empty", i)
		}
		for _, a := range g.Actions {
			if !validActions[a] {
				return badRequest("grants[%d]: unknown action %q (read, write, delete)", i, a)
			}
		}
		if len(g.Prefix) > 1024 {
			return badRequest("grants[%d]: prefix is too long", i)
		}
	}
	return nil
}

func (s *Server) handlePrincipalDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	t, name := r.PathValue("tenant"), r.PathValue("name")
	if err := validName("principal name", name); err != nil {
		return err
	}
	if err := s.tenantAdmin(id, t, name, actDelete); err != nil {
		return err
	}
	res, err := s.propose(r, id, t, fsm.KindPrincipalDelete, &fsm.PrincipalDeleteArgs{Name: name}, nil)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}
