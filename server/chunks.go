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
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/chunkstore"
	"github.com/baton-dev/baton/server/node"
)

// Chunk bodies travel beside the Raft log (docs/design.md "Chunks beside the
// log"): the node that receives a chunk verifies it, stores it durably,
// copies it to its peers, and once a majority holds it commits a small
// "held" record through the leader. Only then does it answer 201.

type missingRequest struct {
	Digests []string `json:"digests"`
}

type heldRequest struct {
	Size int64 `json:"size"`
}

const maxMissingDigests = 100_000

func (s *Server) chunkRoutes(add func(string, string, routeKind, handlerFunc)) {
	add("POST", "/v1/tenants/{tenant}/chunks/missing", routeRead, s.handleChunksMissing)
	add("PUT", "/v1/tenants/{tenant}/chunks/{digest}", routeLocalAuth, s.handleChunkPut)
	add("GET", "/v1/tenants/{tenant}/chunks/{digest}", routeRead, s.handleChunkGet)
	add("POST", "/v1/internal/tenants/{tenant}/chunks/{digest}/held", routeWrite, s.handleChunkHeld)
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
	if !grantsReach(id.grants, resArtifacts, "", actWrite) {
		return errorf(fsm.CodeForbidden, "uploading chunks needs an artifacts write grant")
	}
	return nil
}

func (s *Server) handleChunksMissing(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	var req missingRequest
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
	return s.readReply(w, index, map[string]any{"missing": missing})
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
	body, err := readBody(w, r, s.cfg.MaxChunkBody)
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
	// The same work whether or not another tenant holds this chunk, so that
	// neither answers nor timings reveal other tenants' holdings.
	if err := store.PutVerified(digest, body); err != nil {
		return err
	}
	if err := s.replicateChunk(r.Context(), digest, body); err != nil {
		return err
	}
	return s.commitHeld(w, r, tenant, digest, int64(len(body)))
}

// commitHeld records the hold through the leader: directly when this node
// leads, else through the leader's internal endpoint.
func (s *Server) commitHeld(w http.ResponseWriter, r *http.Request, tenant, digest string, size int64) error {
	args := &fsm.ChunkHeldArgs{Digest: digest, Size: size}
	if s.cluster.IsLeader() {
		// A hold is idempotent by its content: the caller's retry headers
		// (its key or session place, made for the upload) are not its own.
		res, err := s.apply(r, fsm.NewCommand(fsm.KindChunkHeld, s.now(), tenant, "", args))
		if err != nil {
			return err
		}
		return reply(w, res, nil)
	}
	body, _ := json.Marshal(heldRequest{Size: size})
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
	var req heldRequest
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
// from a peer (and stored) when the local copy is missing or corrupt.
func (s *Server) readChunk(ctx context.Context, digest string) ([]byte, error) {
	store, err := s.chunkStore()
	if err != nil {
		return nil, err
	}
	body, err := store.Get(digest)
	if err == nil {
		return body, nil
	}
	if !errors.Is(err, chunkstore.ErrNotFound) && !errors.Is(err, chunkstore.ErrCorrupt) {
		return nil, err
	}
	return s.fetchChunk(ctx, digest)
}

func (s *Server) handlePeerChunkPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	store, err := s.chunkStore()
	if err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxChunkBody)
	if err != nil {
		return err
	}
	if err := store.Put(r.PathValue("digest"), body); err != nil {
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

// peers are the other members with a published HTTP address.
func (s *Server) peers() (peers []node.MemberInfo, voters int, selfVoter bool) {
	members, err := s.cluster.Members()
	if err != nil {
		return nil, 0, false
	}
	for _, m := range members {
		if m.Voter {
			voters++
		}
		if m.ID == s.cluster.ID() {
			selfVoter = m.Voter
			continue
		}
		if m.HTTPAddr != "" {
			peers = append(peers, m)
		}
	}
	return peers, voters, selfVoter
}

// replicateChunk copies a body to every peer and returns once a majority of
// voters (this node included) holds it durably. Copies still in flight then
// finish in the background; repair catches up any node that missed one.
func (s *Server) replicateChunk(ctx context.Context, digest string, body []byte) error {
	peers, voters, selfVoter := s.peers()
	need := voters/2 + 1
	if selfVoter {
		need--
	}
	voterPeers := 0
	for _, p := range peers {
		if p.Voter {
			voterPeers++
		}
	}
	if voterPeers < need {
		return errorf(codeUnavailable, "this node knows the address of %d voting peers and needs %d to hold the chunk; retry", voterPeers, need)
	}
	type ack struct {
		voter bool
		err   error
	}
	acks := make(chan ack, len(peers))
	for _, p := range peers {
		go func(m node.MemberInfo) {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			acks <- ack{m.Voter, s.peerCall(cctx, http.MethodPut, m.HTTPAddr, "/v1/internal/chunks/"+digest, body, nil)}
		}(p)
	}
	ok, failed := 0, 0 // voters only: a non-voter's copy does not make a majority
	for ok < need {
		select {
		case a := <-acks:
			switch {
			case !a.voter:
			case a.err != nil:
				failed++
				s.log.Debug("chunk copy to peer failed", "digest", digest, "err", a.err)
				if voterPeers-failed < need-ok {
					return errorf(codeUnavailable, "could not copy the chunk to a majority of nodes")
				}
			default:
				ok++
			}
		case <-ctx.Done():
			return unavailable(ctx.Err())
		}
	}
	return nil
}

// fetchChunk gets a body from the first peer that has it, verifies it and
// stores it locally.
func (s *Server) fetchChunk(ctx context.Context, digest string) ([]byte, error) {
	store, err := s.chunkStore()
	if err != nil {
		return nil, err
	}
	peers, _, _ := s.peers()
	for _, p := range peers {
		var buf bytes.Buffer
		if err := s.peerCall(ctx, http.MethodGet, p.HTTPAddr, "/v1/internal/chunks/"+digest, nil, &buf); err != nil {
			continue
		}
		if err := store.Put(digest, buf.Bytes()); err != nil {
			continue // a peer's bad copy: try the next
		}
		return buf.Bytes(), nil
	}
	return nil, errorf(codeUnavailable, "no node could supply chunk %s right now", digest)
}

// peerCall makes a member's request to a peer's internal endpoint.
func (s *Server) peerCall(ctx context.Context, method, addr, path string, body []byte, out *bytes.Buffer) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.proxy.url(addr, path), rd)
	if err != nil {
		return err
	}
	s.peerAuth(req)
	resp, err := s.proxy.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %s", method, addr, resp.Status)
	}
	if out != nil {
		_, err = io.Copy(out, io.LimitReader(resp.Body, s.cfg.MaxChunkBody+1))
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return nil
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
