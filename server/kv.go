package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// fenceArg validates an optional fence guard.
func fenceArg(f *wire.Fence) (*fsm.Fence, error) {
	if f == nil {
		return nil, nil
	}
	if err := validName("fence.task_id", f.TaskID); err != nil {
		return nil, err
	}
	return &fsm.Fence{TaskID: f.TaskID, Token: f.Token}, nil
}

const maxTTLMs = 366 * 24 * 60 * 60 * 1000

func kvPutArgs(req *wire.KVPut, ns, key string) (*fsm.KVPutArgs, error) {
	if err := validKV(ns, key); err != nil {
		return nil, err
	}
	if len(req.Value) == 0 {
		return nil, badRequest("value is required (any JSON value)")
	}
	value, err := compactJSON("value", req.Value)
	if err != nil {
		return nil, err
	}
	if req.TTLMs < 0 || req.TTLMs > maxTTLMs {
		return nil, badRequest("ttl_ms must be 0 (no expiry) to %d, not %d", int64(maxTTLMs), req.TTLMs)
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return nil, err
	}
	return &fsm.KVPutArgs{Namespace: ns, Key: key, Value: value, ExpectVersion: req.ExpectVersion,
		TTLMs: req.TTLMs, Fence: fence}, nil
}

func validKV(ns, key string) error {
	if err := validName("namespace", ns); err != nil {
		return err
	}
	return validPath("key", key)
}

func (s *Server) kvRoutes(add addRoute) {
	add("PUT", "/v1/tenants/{tenant}/kv/{namespace}/{key...}", routeWrite, s.handleKVPut, cmd(wire.KVPut{}, fsm.KindKVPut))
	add("GET", "/v1/tenants/{tenant}/kv/{namespace}/{key...}", routeRead, s.handleKVGet)
	add("DELETE", "/v1/tenants/{tenant}/kv/{namespace}/{key...}", routeWrite, s.handleKVDelete, cmd(nil, fsm.KindKVDelete))
	add("GET", "/v1/tenants/{tenant}/kv/{namespace}", routeRead, s.handleKVList)
}

func (s *Server) handleKVPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ns, key := r.PathValue("tenant"), r.PathValue("namespace"), r.PathValue("key")
	if err := validKV(ns, key); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resKV, ns+"/"+key, actWrite); err != nil {
		return err
	}
	var req wire.KVPut
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := kvPutArgs(&req, ns, key)
	if err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindKVPut, args, body)
}

func (s *Server) handleKVGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ns, key := r.PathValue("tenant"), r.PathValue("namespace"), r.PathValue("key")
	if err := validKV(ns, key); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resKV, ns+"/"+key, actRead); err != nil {
		return err
	}
	e, index, ok := s.fsm.GetKV(tenant, ns, key, s.now())
	if !ok {
		return errorf(fsm.CodeNotFound, "no entry %s/%s", ns, key)
	}
	return s.readReply(w, index, e)
}

func (s *Server) handleKVDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ns, key := r.PathValue("tenant"), r.PathValue("namespace"), r.PathValue("key")
	if err := validKV(ns, key); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resKV, ns+"/"+key, actDelete); err != nil {
		return err
	}
	args := &fsm.KVDeleteArgs{Namespace: ns, Key: key}
	var err error
	if args.ExpectVersion, err = queryUint(r, "expect_version"); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindKVDelete, args, nil)
}

func queryUint(r *http.Request, name string) (*uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, badRequest("%s must be a non-negative integer, not %q", name, v)
	}
	return &n, nil
}

func queryLimit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit must be 1 to %d, not %q", max, v)
	}
	return n, nil
}

func (s *Server) handleKVList(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	prefix := r.URL.Query().Get("prefix")
	if err := validName("namespace", ns); err != nil {
		return err
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resKV, ns+"/"+prefix, actRead) {
		return errorf(fsm.CodeForbidden, "principal %q has no read grant under kv %q", id.principal, ns+"/"+prefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("page_token"))
	if err != nil {
		return badRequest("page_token is not one this server returned")
	}
	after := string(b)
	visible := func(e *fsm.KVEntry) bool { return id.allow(tenant, resKV, ns+"/"+e.Key, actRead) == nil }
	entries, next, index := s.fsm.ListKV(tenant, ns, prefix, after, limit, s.now(), visible)
	if next != "" {
		next = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReply(w, index, map[string]any{"entries": entries, "next_page_token": next})
}

// grantsReach reports whether some grant allows action on at least one name
// starting with prefix.
func grantsReach(grants []fsm.Grant, resource, prefix, action string) bool {
	for _, g := range grants {
		if (g.Resource == resource || g.Resource == resAll) && hasAction(g, action) &&
			(strings.HasPrefix(prefix, g.Prefix) || strings.HasPrefix(g.Prefix, prefix)) {
			return true
		}
	}
	return false
}

func hasAction(g fsm.Grant, action string) bool {
	for _, a := range g.Actions {
		if a == action {
			return true
		}
	}
	return false
}
