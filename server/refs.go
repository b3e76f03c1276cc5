package server

import (
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// mayReadArtifact checks that the caller may read the artifact a ref is
// to point at: a ref never leads anyone to an artifact they could not
// read themselves. A missing artifact is 404 only for callers who may read
// every artifact; others get the 403 of an artifact outside their grant.
func (s *Server) mayReadArtifact(id *identity, tenant, artifactID string) error {
	m, _, ok := s.fsm.ArtifactByID(tenant, artifactID)
	if ok && id.allow(tenant, resArtifacts, m.Name, actRead) == nil {
		return nil
	}
	if !ok && id.allow(tenant, resArtifacts, "", actRead) == nil {
		return nil // the FSM answers 404
	}
	return errorf(fsm.CodeForbidden, "principal %q may not read artifact %s, so may not point a ref at it", id.principal, artifactID)
}

func refSetArgs(req *wire.RefSet, ref string) (*fsm.RefSetArgs, error) {
	if err := validPath("ref", ref); err != nil {
		return nil, err
	}
	if err := validDigest("artifact_id", req.ArtifactID); err != nil {
		return nil, err
	}
	if e := req.ExpectArtifactID; e != nil && *e != "" {
		if err := validDigest("expect_artifact_id", *e); err != nil {
			return nil, err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return nil, err
	}
	return &fsm.RefSetArgs{Ref: ref, ArtifactID: req.ArtifactID, ExpectArtifactID: req.ExpectArtifactID, Fence: fence}, nil
}

func (s *Server) refRoutes(add addRoute) {
	add("PUT", "/v1/tenants/{tenant}/refs/{ref...}", routeWrite, s.handleRefSet, cmd(wire.RefSet{}, fsm.KindRefSet))
	add("GET", "/v1/tenants/{tenant}/refs/{ref...}", routeRead, s.handleRefGet)
	add("DELETE", "/v1/tenants/{tenant}/refs/{ref...}", routeWrite, s.handleRefDelete, cmd(nil, fsm.KindRefDelete))
	add("GET", "/v1/tenants/{tenant}/refs", routeRead, s.handleRefList)
}

func (s *Server) handleRefSet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ref := r.PathValue("tenant"), r.PathValue("ref")
	if err := validPath("ref", ref); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resRefs, ref, actWrite); err != nil {
		return err
	}
	var req wire.RefSet
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := refSetArgs(&req, ref)
	if err != nil {
		return err
	}
	if err := s.mayReadArtifact(id, tenant, args.ArtifactID); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindRefSet, args, body)
}

func (s *Server) handleRefGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ref := r.PathValue("tenant"), r.PathValue("ref")
	if err := validPath("ref", ref); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resRefs, ref, actRead); err != nil {
		return err
	}
	v, index, ok := s.fsm.GetRef(tenant, ref)
	if !ok {
		return errorf(fsm.CodeNotFound, "ref %q not found", ref)
	}
	return s.readReply(w, index, v)
}

func (s *Server) handleRefDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ref := r.PathValue("tenant"), r.PathValue("ref")
	if err := validPath("ref", ref); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resRefs, ref, actDelete); err != nil {
		return err
	}
	args := &fsm.RefDeleteArgs{Ref: ref}
	if r.URL.Query().Has("expect_artifact_id") {
		e := r.URL.Query().Get("expect_artifact_id")
		args.ExpectArtifactID = &e
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindRefDelete, args, nil)
}

func (s *Server) handleRefList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, prefix := r.PathValue("tenant"), r.URL.Query().Get("prefix")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resRefs, prefix, actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant on refs under %q", id.principal, prefix)
	}
	refs, index := s.fsm.ListRefs(tenant, prefix, func(ref *fsm.Ref) bool {
		return id.allow(tenant, resRefs, ref.Ref, actRead) == nil
	})
	return s.readReply(w, index, map[string]any{"refs": refs})
}
