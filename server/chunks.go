package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/chunkplane"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/replica"
)

// Chunk bodies travel beside the Raft log (docs/design.md "Chunks beside the
// log"): the node that receives a chunk verifies it, stores it durably,
// copies it to its peers, and once a majority holds it commits a small
// "held" record through the leader. Only then does it answer 201.

const maxMissingDigests = 100_000

func (s *Server) chunkRoutes(add addRoute) {
	add("POST", "/v1/tenants/{tenant}/chunks/missing", routeRead, s.handleChunksMissing)
	add("PUT", "/v1/tenants/{tenant}/chunks/{digest}", routeLocalAuth, s.handleChunkPut)
	add("GET", "/v1/tenants/{tenant}/chunks/{digest}", routeRead, s.handleChunkGet)
	add("POST", "/v1/internal/tenants/{tenant}/chunks/{digest}/held", routeWrite, s.handleChunkHeld, cmd(wire.ChunkHeld{}, fsm.KindChunkHeld))
	add("PUT", "/v1/internal/chunks/{digest}", routeLocalAuth, s.handlePeerChunkPut)
	add("GET", "/v1/internal/chunks/{digest}", routeLocalAuth, s.handlePeerChunkGet)
}

func (s *Server) chunkStore() (*chunkstore.Store, error) {
	if s.cfg.Chunks == nil {
		return nil, errorf(codeUnavailable, "this node has no chunk store")
	}
	return s.cfg.Chunks, nil
}

func validDigest(what, d string) error {
	if !chunkstore.ValidDigest(d) {
		return badRequest("%s %q must be sha256:<64 lowercase hex>", what, d)
	}
	return nil
}

// mayUpload: chunk upload needs artifacts write on any prefix.
func mayUpload(id *identity, tenant string) error {
	if id.admin {
		return nil
	}
	if id.tenant != tenant {
		return errorf(fsm.CodeForbidden, "principal %q belongs to another tenant", id.principal)
	}
	// Checkpoint writers upload the chunks of checkpoints too large for
	// one request (docs/api.md "Checkpoints").
	if !grantsReach(id.grants, resArtifacts, "", actWrite) && !grantsReach(id.grants, resCheckpoints, "", actWrite) {
		return errorf(fsm.CodeForbidden, "uploading chunks needs an artifacts or checkpoints write grant")
	}
	return nil
}

func (s *Server) handleChunksMissing(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	var req wire.ChunksMissing
	if _, err := s.readJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Digests) > maxMissingDigests {
		return badRequest("at most %d digests per call", maxMissingDigests)
	}
	for i, d := range req.Digests {
		if err := validDigest(fmt.Sprintf("digests[%d]", i), d); err != nil {
			return err
		}
	}
	if err := validName("tenant", tenant); err != nil {
		return err
	}
	if err := mayUpload(id, tenant); err != nil {
		return err
	}
	missing, index := s.fsm.ChunksHeld(tenant, req.Digests)
	return s.readReply(w, index, wire.MissingChunks{Missing: missing})
}

func (s *Server) handleChunkPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, digest := r.PathValue("tenant"), r.PathValue("digest")
	if err := validName("tenant", tenant); err != nil {
		return err
	}
	if err := validDigest("digest", digest); err != nil {
		return err
	}
	if err := mayUpload(id, tenant); err != nil {
		return err
	}
	store, err := s.chunkStore()
	if err != nil {
		return err
	}
	if err := s.chunkRoom(tenant, digest, r.ContentLength); err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxChunkBody, s.cfg.BodyTimeout)
	if err != nil {
		return err
	}
	if chunkstore.Digest(body) != digest {
		return errorf(codeDigestMismatch, "the body does not hash to %s", digest)
	}
	if missing, index := s.fsm.ChunksHeld(tenant, []string{digest}); len(missing) == 0 {
		setIndex(w, index)
		writeJSON(w, http.StatusOK, map[string]any{"digest": digest, "size": len(body)})
		return nil
	}
	if err := s.chunkRoom(tenant, digest, int64(len(body))); err != nil { // the state may have grown meanwhile
		return err
	}
	// The same work whether or not another tenant holds this chunk, so that
	// neither answers nor timings reveal other tenants' holdings. A body the
	// store compresses is compressed once; this node's write and the copies
	// to the peers, which receive that form, run at once.
	var stored []byte
	if store.Compresses() {
		stored = store.Encode(body)
	}
	local := make(chan error, 1)
	go func() {
		if stored == nil {
			local <- store.PutVerified(digest, body)
			return
		}
		local <- store.PutEncodedVerified(digest, stored)
	}()
	rerr := s.chunks.Replicate(r.Context(), digest, body, stored)
	if err := <-local; err != nil {
		return err
	}
	if rerr != nil {
		return chunkError(rerr)
	}
	return s.commitHeld(w, r, tenant, digest, int64(len(body)))
}

// chunkRoom refuses, with 507 resource_exhausted, the upload of a chunk
// the tenant does not hold yet when the quotas would refuse its hold: before
// its body is read (size: the declared length, or the limit when unknown)
// and again before it is stored and copied, so that a refused upload leaves
// nothing on any node's disk. The hold's own command still decides.
func (s *Server) chunkRoom(tenant, digest string, size int64) error {
	if size <= 0 || size > s.cfg.MaxChunkBody {
		size = s.cfg.MaxChunkBody
	}
	if missing, _ := s.fsm.ChunksHeld(tenant, []string{digest}); len(missing) == 0 {
		return nil
	}
	if why := s.fsm.ChunkHoldRefusal(tenant, digest, size); why != "" {
		return errorf(fsm.CodeResourceExhausted, "%s", why)
	}
	return nil
}

// commitHeld records the hold through the leader: directly when this node
// leads, else through the leader's internal endpoint.
func (s *Server) commitHeld(w http.ResponseWriter, r *http.Request, tenant, digest string, size int64) error {
	args := &fsm.ChunkHeldArgs{Digest: digest, Size: size}
	if s.cluster.IsLeader() {
		// A hold is idempotent by its content: the caller's retry headers
		// (its key or session place, made for the upload) are not its own.
		res, err := s.apply(r, s.replica.Command(replica.Caller{Tenant: tenant}, fsm.KindChunkHeld, args))
		if err != nil {
			return err
		}
		return reply(w, res, nil)
	}
	body, _ := json.Marshal(wire.ChunkHeld{Size: size})
	resp, err := s.leaderCall(r.Context(), http.MethodPost, "/v1/internal/tenants/"+tenant+"/chunks/"+digest+"/held", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	for _, h := range []string{"X-Baton-Index", "Content-Type"} {
		w.Header().Set(h, resp.Header.Get(h))
	}
	w.WriteHeader(resp.StatusCode)
	_, err = io.Copy(w, resp.Body)
	return err
}

func (s *Server) handleChunkHeld(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	tenant, digest := r.PathValue("tenant"), r.PathValue("digest")
	var req wire.ChunkHeld
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validDigest("digest", digest); err != nil {
		return err
	}
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindChunkHeld, &fsm.ChunkHeldArgs{Digest: digest, Size: req.Size}, body)
}

func (s *Server) handleChunkGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant, digest := r.PathValue("tenant"), r.PathValue("digest")
	if err := validDigest("digest", digest); err != nil {
		return err
	}
	if err := s.tenantAccess(id, tenant, resArtifacts, "", actRead); err != nil {
		return err
	}
	if missing, _ := s.fsm.ChunksHeld(tenant, []string{digest}); len(missing) > 0 {
		return errorf(fsm.CodeNotFound, "chunk %s not found", digest)
	}
	body, err := s.readChunk(r.Context(), digest)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	setIndex(w, s.fsm.AppliedIndex())
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(body)
	return err
}

// readChunk returns a verified body: from this node's store, or fetched
// by the chunk plane from a peer.
func (s *Server) readChunk(ctx context.Context, digest string) ([]byte, error) {
	body, err := s.chunks.Read(ctx, digest)
	return body, chunkError(err)
}

// readChunkUnverified is readChunk without the digest check of this
// node's copy (chunkplane.ReadUnverified).
func (s *Server) readChunkUnverified(ctx context.Context, digest string) ([]byte, error) {
	body, err := s.chunks.ReadUnverified(ctx, digest)
	return body, chunkError(err)
}

// chunkError turns the chunk plane's errors into the API's.
func chunkError(err error) error {
	var u *chunkplane.Unavailable
	switch {
	case err == nil:
		return nil
	case errors.As(err, &u):
		return errorf(codeUnavailable, "%s", u.Msg)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return unavailable(err)
	}
	return err
}

func (s *Server) handlePeerChunkPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	store, err := s.chunkStore()
	if err != nil {
		return err
	}
	stored := r.Header.Get(chunkplane.FormHeader) == chunkplane.FormStored
	limit := s.cfg.MaxChunkBody
	if stored {
		limit++ // the stored form's encoding byte
	}
	body, err := readBody(w, r, limit, s.cfg.BodyTimeout)
	if err != nil {
		return err
	}
	put := store.Put
	if stored {
		put = func(digest string, data []byte) error { return store.PutEncoded(digest, data, s.cfg.MaxChunkBody) }
	}
	if err := put(r.PathValue("digest"), body); err != nil {
		if errors.Is(err, chunkstore.ErrMismatch) || errors.Is(err, chunkstore.ErrBadDigest) {
			return errorf(codeDigestMismatch, "%v", err)
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handlePeerChunkGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	store, err := s.chunkStore()
	if err != nil {
		return err
	}
	body, err := store.Get(r.PathValue("digest"))
	if err != nil {
		return errorf(fsm.CodeNotFound, "%v", err)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, err = w.Write(body)
	return err
}

// chunkPeers are the node-to-node calls of the chunk plane: to the peers'
// API, authenticated as this member.
type chunkPeers struct{ s *Server }

func (p chunkPeers) URL(addr, path string) string { return p.s.proxy.url(addr, path) }

func (p chunkPeers) Do(req *http.Request) (*http.Response, error) {
	p.s.peerAuth(req)
	return p.s.proxy.transport.RoundTrip(req)
}

// leaderCall sends an admin request to the leader's HTTP API.
func (s *Server) leaderCall(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	id, _ := s.cluster.Leader()
	addr := s.proxy.leaderAddr(ctx, id)
	if id == "" || addr == "" {
		return nil, errorf(codeUnavailable, "no leader is known right now")
	}
	req, err := http.NewRequestWithContext(ctx, method, s.proxy.url(addr, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	s.peerAuth(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.proxy.transport.RoundTrip(req)
	if err != nil {
		return nil, errorf(codeUnavailable, "reaching the leader: %v", err)
	}
	return resp, nil
}
