package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

func (s *Server) tenantRoutes(add addRoute) {
	add("PUT", "/v1/tenants/{tenant}", routeWrite, s.handleTenantPut, cmd(nil, fsm.KindTenantPut))
	add("GET", "/v1/tenants", routeRead, s.handleTenantList)
	add("POST", "/v1/tenants/{tenant}/principals", routeWrite, s.handlePrincipalCreate, cmd(wire.PrincipalCreate{}, fsm.KindPrincipalCreate))
	add("DELETE", "/v1/tenants/{tenant}/principals/{name}", routeWrite, s.handlePrincipalDelete, cmd(nil, fsm.KindPrincipalDelete))
	add("POST", "/v1/tenants/{tenant}/principals/{name}/rotate", routeWrite, s.handlePrincipalRotate, cmd(nil, fsm.KindPrincipalRotate))
	add("GET", "/v1/tenants/{tenant}/principals", routeRead, s.handlePrincipalList)
}

func (s *Server) handleTenantPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	t := r.PathValue("tenant")
	if err := validName("tenant", t); err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
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
	return s.readReply(w, index, wire.TenantList{Tenants: s.fsm.Tenants()})
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
	var req wire.PrincipalCreate
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
	salt, hash, err := s.newPrincipalToken(t, req.Name)
	if err != nil {
		return err
	}
	args := &fsm.PrincipalCreateArgs{Name: req.Name, Grants: req.Grants, TokenSalt: salt, TokenHash: hash}
	res, err := s.propose(r, id, t, fsm.KindPrincipalCreate, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, s.renderPrincipalToken)
}

// newPrincipalToken picks a random salt for a principal's token and returns
// it with the token's hash: the command carries both, never the token.
func (s *Server) newPrincipalToken(tenant, name string) (salt, hash string, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	salt = hex.EncodeToString(b)
	return salt, hashToken(s.principalToken(tenant, name, salt)), nil
}

// renderPrincipalToken turns a principal record (the result of a create or
// a rotation, first or replayed) into the answer that shows its token.
func (s *Server) renderPrincipalToken(v json.RawMessage) (any, error) {
	var p fsm.Principal
	if err := json.Unmarshal(v, &p); err != nil {
		return nil, err
	}
	return wire.PrincipalWithToken{Name: p.Name, Token: s.principalToken(p.Tenant, p.Name, p.TokenSalt), Grants: p.Grants}, nil
}

// handlePrincipalRotate gives a principal a new token, shown in the answer
// only; the old token fails from the rotation's log index on. Who may
// create the principal may rotate it: an admin write grant on its name and
// grants covering all of its own. The body is empty.
func (s *Server) handlePrincipalRotate(w http.ResponseWriter, r *http.Request, id *identity) error {
	t, name := r.PathValue("tenant"), r.PathValue("name")
	if err := validName("principal name", name); err != nil {
		return err
	}
	if err := s.tenantAdmin(id, t, name, actWrite); err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 && string(bytes.TrimSpace(body)) != "{}" {
		return badRequest("a rotation takes no body (or {})")
	}
	salt, hash, err := s.newPrincipalToken(t, name)
	if err != nil {
		return err
	}
	// A principal gets the new token, so it must hold every grant of the
	// principal rotated: the FSM checks it as the command applies (ByGrants).
	args := &fsm.PrincipalRotateArgs{Name: name, TokenSalt: salt, TokenHash: hash, ByGrants: !id.admin}
	res, err := s.propose(r, id, t, fsm.KindPrincipalRotate, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, s.renderPrincipalToken)
}

// handlePrincipalList lists the tenant's principals that the caller may
// manage (the admin token: all; an admin grant with read: those whose
// names it covers), with their grants.
func (s *Server) handlePrincipalList(w http.ResponseWriter, r *http.Request, id *identity) error {
	t := r.PathValue("tenant")
	if err := validName("tenant", t); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resAdmin, "", actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on admin", id.principal)
	}
	if err := s.inTenant(id, t); err != nil {
		return err
	}
	index := s.fsm.AppliedIndex()
	out := []wire.PrincipalInfo{}
	for _, p := range s.fsm.Principals(t) {
		if id.allow(t, resAdmin, p.Name, actRead) == nil {
			out = append(out, wire.PrincipalInfo{Name: p.Name, Grants: p.Grants})
		}
	}
	return s.readReply(w, index, wire.PrincipalList{Principals: out})
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
	// Its sessions and Idempotency-Key answers go with it (DropKeys).
	res, err := s.propose(r, id, t, fsm.KindPrincipalDelete, &fsm.PrincipalDeleteArgs{Name: name, DropKeys: true}, nil)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}
