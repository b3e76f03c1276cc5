package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// Listing artifact names, deleting versions and keep-last policies
// (docs/api.md "Chunks and artifacts"; fsm/artifactlife.go).

// artifactLifeRoutes: the list is its own pattern, since the catch-all
// ".../artifacts/{path...}" would otherwise redirect ".../artifacts" to
// ".../artifacts/".
func (s *Server) artifactLifeRoutes(add addRoute) {
	add("GET", "/v1/tenants/{tenant}/artifacts", routeRead, s.handleArtifactList)
	add("DELETE", "/v1/tenants/{tenant}/artifacts/{path...}", routeWrite, s.handleArtifactDelete, cmd(nil, fsm.KindArtifactDelete))
	add("PUT", "/v1/tenants/{tenant}/artifact-policies", routeWrite, s.handleArtifactPolicyPut, cmd(wire.ArtifactPolicy{}, fsm.KindArtifactPolicy))
	add("GET", "/v1/tenants/{tenant}/artifact-policies", routeRead, s.handleArtifactPolicyList)
}

// validNamePrefix checks a prefix of names: "" or the start of a name.
func validNamePrefix(what, p string) error {
	if len(p) > 128 || !nameChars(p) {
		return badRequest("%s %q must be at most 128 of [A-Za-z0-9._:-]", what, p)
	}
	return nil
}

func (s *Server) handleArtifactList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, prefix := r.PathValue("tenant"), r.URL.Query().Get("prefix")
	if err := validNamePrefix("prefix", prefix); err != nil {
		return err
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	b, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("page_token"))
	if err != nil || validNamePrefix("page_token", string(b)) != nil {
		return badRequest("page_token is not one this server returned")
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resArtifacts, prefix, actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on artifacts under %q", id.principal, prefix)
	}
	visible := func(name string) bool { return id.allow(tenant, resArtifacts, name, actRead) == nil }
	list, next, index := s.fsm.ListArtifacts(tenant, prefix, string(b), limit, visible)
	if next != "" {
		next = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReply(w, index, map[string]any{"artifacts": list, "next_page_token": next})
}

// handleArtifactDelete deletes {name}/versions/{n} or every version of
// {name}. The FSM refuses a version a ref points at (409 referenced).
func (s *Server) handleArtifactDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, p := r.PathValue("tenant"), r.PathValue("path")
	args := &fsm.ArtifactDeleteArgs{}
	if strings.Contains(p, "/") {
		ap, err := parseArtifactPath(p)
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == fsm.CodeNotFound {
			// Not a version's path: a whole artifact's, whose name holds "/".
			return badRequest("artifact name %q contains \"/\": artifact names match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}", p)
		}
		if err != nil {
			return err
		}
		if ap.byID != "" || ap.content || ap.version == 0 {
			return errorf(codeMethodNotAllowed, "DELETE is allowed on artifacts/{name} and artifacts/{name}/versions/{n}")
		}
		args.Name, args.Version = ap.name, ap.version
	} else {
		if err := validName("artifact name", p); err != nil {
			return err
		}
		args.Name = p
	}
	q := r.URL.Query()
	if args.Version != 0 {
		if q.Has("expect_version") {
			return badRequest("expect_version guards a whole-artifact delete; a version's is expect_artifact_id")
		}
		if q.Has("expect_artifact_id") {
			e := q.Get("expect_artifact_id")
			if err := validDigest("expect_artifact_id", e); err != nil {
				return err
			}
			args.ExpectArtifactID = &e
		}
	} else {
		if q.Has("expect_artifact_id") {
			return badRequest("expect_artifact_id guards a version's delete; a whole artifact's is expect_version")
		}
		var err error
		if args.ExpectVersion, err = queryUint(r, "expect_version"); err != nil {
			return err
		}
	}
	if err := s.tenantAccess(id, tenant, resArtifacts, args.Name, actDelete); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindArtifactDelete, args, nil)
}

// handleArtifactPolicyPut sets a prefix's keep-last policy. Since a policy
// deletes versions, it takes the admin token or a grant with both write
// and delete on artifacts that covers every name under the prefix.
func (s *Server) handleArtifactPolicyPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.mayReach(id, tenant, []string{resArtifacts}, actWrite); err != nil {
		return err
	}
	var req wire.ArtifactPolicy
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if req.Prefix == nil || req.KeepLast == nil {
		return badRequest("prefix and keep_last are required (keep_last 0 clears the prefix's policy)")
	}
	if err := validNamePrefix("prefix", *req.Prefix); err != nil {
		return err
	}
	if *req.KeepLast > 1_000_000 {
		return badRequest("keep_last must be 0 (clear) to 1000000, not %d", *req.KeepLast)
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !policyGrant(id.grants, *req.Prefix) {
		return errorf(fsm.CodeForbidden, "principal %q needs artifacts write and delete on every name under %q to set its policy",
			id.principal, *req.Prefix)
	}
	args := &fsm.ArtifactPolicyArgs{Prefix: *req.Prefix, KeepLast: *req.KeepLast}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindArtifactPolicy, args, body)
}

// policyGrant reports whether one grant gives write and delete on every
// artifact name starting with prefix.
func policyGrant(grants []fsm.Grant, prefix string) bool {
	for _, g := range grants {
		if (g.Resource == resArtifacts || g.Resource == resAll) && prefixIncludes(g.Prefix, prefix) &&
			hasAction(g, actWrite) && hasAction(g, actDelete) {
			return true
		}
	}
	return false
}

// handleArtifactPolicyList answers the tenant's policies to whoever may
// read some artifact of it.
func (s *Server) handleArtifactPolicyList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resArtifacts, "", actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on artifacts", id.principal)
	}
	list, index := s.fsm.ArtifactPolicies(tenant)
	return s.readReply(w, index, map[string]any{"policies": list})
}
