package server

import (
	"net/http"
	"strings"

	"github.com/baton-dev/baton/fsm"
)

// identity is an authenticated caller.
type identity struct {
	admin     bool
	tenant    string // the principal's tenant; "" for the admin
	principal string // "" for the admin
	grants    []fsm.Grant
	tokenHash string // of a principal's token; streams re-check it
	peer      string // a member (peer TLS certificate) on a peer route
}

// Resources and actions of grants (docs/api.md "Authentication and tenants").
const (
	resTasks       = "tasks"
	resArtifacts   = "artifacts"
	resRefs        = "refs"
	resCheckpoints = "checkpoints"
	resKV          = "kv"
	resOps         = "ops"
	resWaitpoints  = "waitpoints"
	resAdmin       = "admin"
	resAll         = "*"

	actRead   = "read"
	actWrite  = "write"
	actDelete = "delete"
)

var validResources = map[string]bool{resTasks: true, resArtifacts: true, resRefs: true,
	resCheckpoints: true, resKV: true, resOps: true, resWaitpoints: true, resAdmin: true, resAll: true}
var validActions = map[string]bool{actRead: true, actWrite: true, actDelete: true}

// errNoToken is the answer to a request without a bearer token.
var errNoToken = errorf(codeUnauthenticated, "missing bearer token (Authorization: Bearer <token>)")

// headerPeer, on a request a follower forwarded, names the member whose
// peer certificate the follower verified (a peer route only). The
// receiving node believes it only from a connection that presents a peer
// certificate itself.
const headerPeer = "X-Baton-Peer"

// peerRoutes are what members call on each other: chunk copies and
// repair, the "held" record, joining and publishing an address, and a
// member's question whether it was removed. With peer
// TLS a member is recognised there by its certificate, and the /v1/internal
// ones accept nothing else.
var peerRoutes = map[string]bool{
	"PUT /v1/internal/chunks/{digest}":                        true,
	"GET /v1/internal/chunks/{digest}":                        true,
	"POST /v1/internal/tenants/{tenant}/chunks/{digest}/held": true,
	"GET /v1/internal/configuration":                          true,
	"POST /v1/cluster/members":                                true,
	"POST /v1/cluster/members/{id}/promote":                   true,
	"PUT /v1/cluster/members/{id}/meta":                       true,
}

func isPeerRoute(r *http.Request) bool {
	m := r.Method
	if m == http.MethodHead {
		m = http.MethodGet // dispatch serves HEAD with the GET route
	}
	return peerRoutes[m+" "+r.Pattern]
}

// peerOf names the member that made a request on a peer route: the common
// name of the verified peer certificate on its connection, or, when a
// member forwarded it, the member that member vouches for. "" for anyone
// else, and without peer TLS.
func (s *Server) peerOf(r *http.Request) string {
	if s.cfg.PeerTLS == nil || r.TLS == nil || !isPeerRoute(r) || !s.cfg.PeerTLS.IsPeer(r.TLS.PeerCertificates) {
		return ""
	}
	if r.Header.Get(headerForwarded) != "" {
		return r.Header.Get(headerPeer)
	}
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "" {
		return cn
	}
	return "member"
}

// peerAuth authenticates a node-to-node request: by the peer certificate
// of the transport when peer TLS is on (no token leaves the node), else by
// the admin token.
func (s *Server) peerAuth(req *http.Request) {
	if s.cfg.PeerTLS == nil {
		req.Header.Set("Authorization", "Bearer "+s.cfg.AdminToken)
	}
}

// authenticate resolves the bearer token: 401 when absent, unknown or
// revoked. On a peer route, a member's certificate stands for the admin
// token; the internal routes need it when peer TLS is on.
func (s *Server) authenticate(r *http.Request) (*identity, error) {
	if s.cfg.PeerTLS != nil && isPeerRoute(r) {
		if p := s.peerOf(r); p != "" {
			return &identity{admin: true, peer: p}, nil
		}
		if strings.HasPrefix(r.Pattern, "/v1/internal/") {
			return nil, errorf(codeUnauthenticated, "%s is for cluster members: it needs a peer certificate", r.Pattern)
		}
	}
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok || tok == "" {
		return nil, errNoToken
	}
	if s.isAdminToken(tok) {
		return &identity{admin: true}, nil
	}
	p, found := s.fsm.PrincipalByToken(hashToken(tok))
	if !found {
		return nil, errorf(codeUnauthenticated, "unknown or revoked token")
	}
	return &identity{tenant: p.Tenant, principal: p.Name, grants: p.Grants, tokenHash: p.TokenHash}, nil
}

// bearerToken returns the credentials of an Authorization header of the
// Bearer scheme, whose name is case-insensitive (RFC 7235 section 2.1):
// "Bearer", "bearer" and "BEARER" alike.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// requireAdmin allows only the cluster admin token.
func (id *identity) requireAdmin() error {
	if !id.admin {
		return errorf(fsm.CodeForbidden, "this needs the cluster admin token")
	}
	return nil
}

// allow checks that id may do action on the named object of a resource in
// tenant. Another tenant's path is always 403, whether or not it exists.
func (id *identity) allow(tenant, resource, name, action string) error {
	if id.admin {
		return nil
	}
	if id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	if grantsAllow(id.grants, resource, name, action) {
		return nil
	}
	return errorf(fsm.CodeForbidden, "principal %q has no %s grant on %s %q", id.principal, action, resource, name)
}

func grantsAllow(grants []fsm.Grant, resource, name, action string) bool {
	return fsm.GrantsAllow(grants, resource, name, action)
}

// prefixCovers and prefixIncludes: see fsm.PrefixCovers, fsm.PrefixIncludes.
func prefixCovers(prefix, name string) bool { return fsm.PrefixCovers(prefix, name) }
func prefixIncludes(have, p string) bool    { return fsm.PrefixIncludes(have, p) }

// principalName is how the caller is recorded in commands ("" = admin).
func (id *identity) principalName() string { return id.principal }

// mayDelegate checks that a principal creating another grants nothing it
// does not hold itself: each grant must be covered by one of the creator's
// (same resource or "*", a prefix of the requested prefix, every action).
// The admin token may grant anything.
func (id *identity) mayDelegate(grants []fsm.Grant) error {
	if id.admin {
		return nil
	}
	for i, g := range grants {
		if !covered(id.grants, g) {
			return errorf(fsm.CodeForbidden, "grants[%d] (%s %q %v) is more than principal %q holds", i, g.Resource, g.Prefix, g.Actions, id.principal)
		}
	}
	return nil
}

func covered(have []fsm.Grant, want fsm.Grant) bool { return fsm.GrantCovered(have, want) }

// stillValid reports whether the identity's token still works (the admin's
// always does): a stream re-checks it whenever the state changes.
func (s *Server) stillValid(id *identity) bool {
	if id.admin {
		return true
	}
	_, ok := s.fsm.PrincipalByToken(id.tokenHash)
	return ok
}
